package catalog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultOrg owns the tasks whose manifest names no org; its tasks are
// visible to every org.
const DefaultOrg = "dreadnode"

// ErrNotFound is returned by Resolve for an unknown ref.
var ErrNotFound = errors.New("task not found")

// Catalog is the set of tasks under one or more root directories. Each task
// is a directory holding task.yaml (at any depth up to 3 below a root). It
// rescans when a ref is not found (at most every RescanEvery), so tasks added
// while the backend runs become available.
type Catalog struct {
	dirs        []string
	publicOrg   string
	log         *slog.Logger
	mu          sync.RWMutex
	tasks       []*Task // sorted: org, name, version descending
	problems    []error
	scannedAt   time.Time
	RescanEvery time.Duration
}

// Open loads the catalog in dir, a directory or a list of directories
// separated by the OS path list separator (':' on Unix), like
// DREADNODE_TASKS_DIR. A missing directory contributes nothing (and a
// warning); tasks that fail to load are skipped and reported by Problems.
func Open(ctx context.Context, dir string, log *slog.Logger) (*Catalog, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Catalog{publicOrg: DefaultOrg, log: log, RescanEvery: 2 * time.Second}
	for _, d := range filepath.SplitList(dir) {
		if d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		c.dirs = append(c.dirs, abs)
	}
	c.Rescan(ctx)
	return c, nil
}

// Dirs are the catalog's root directories.
func (c *Catalog) Dirs() []string { return append([]string(nil), c.dirs...) }

// Rescan reloads every task from disk.
func (c *Catalog) Rescan(ctx context.Context) {
	var tasks []*Task
	var problems []error
	seen := map[string]string{}
	for _, root := range c.dirs {
		if _, err := os.Stat(root); err != nil {
			problems = append(problems, fmt.Errorf("task catalog %s: %w", root, err))
			continue
		}
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				problems = append(problems, err)
				return nil
			}
			if d.IsDir() {
				rel, _ := filepath.Rel(root, path)
				if rel != "." && (strings.HasPrefix(d.Name(), ".") || strings.Count(rel, string(filepath.Separator)) >= 3) {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Name() != ManifestFile {
				return nil
			}
			dir := filepath.Dir(path)
			t, err := LoadTask(ctx, dir, c.publicOrg)
			if err != nil {
				problems = append(problems, fmt.Errorf("task %s: %w", dir, err))
				return nil
			}
			if other, dup := seen[t.Ref()]; dup {
				problems = append(problems, fmt.Errorf("task %s: %s is already defined by %s; skipped", dir, t.Ref(), other))
				return nil
			}
			seen[t.Ref()] = dir
			tasks = append(tasks, t)
			return nil
		})
	}
	sort.Slice(tasks, func(i, j int) bool {
		a, b := tasks[i], tasks[j]
		if a.Org != b.Org {
			return a.Org < b.Org
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.SemVer.GreaterThan(b.SemVer)
	})
	for _, p := range problems {
		c.log.Warn("task catalog problem", "error", p)
	}
	c.mu.Lock()
	c.tasks, c.problems, c.scannedAt = tasks, problems, time.Now()
	c.mu.Unlock()
}

// Problems lists what the last scan could not load.
func (c *Catalog) Problems() []error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]error(nil), c.problems...)
}

// visible reports whether org may provision t: the public org's tasks are
// everyone's, an org's own tasks are its own.
func (c *Catalog) visible(t *Task, org string) bool {
	return t.Org == c.publicOrg || t.Org == org
}

// List returns the tasks org may provision (every version).
func (c *Catalog) List(org string) []*Task {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []*Task
	for _, t := range c.tasks {
		if c.visible(t, org) {
			out = append(out, t)
		}
	}
	return out
}

// Resolve finds the task ref names for org: without an org in the ref the
// caller's own tasks come first, then the public ones; without a version the
// highest semantic version wins (pre-releases only when nothing else matches).
func (c *Catalog) Resolve(ctx context.Context, ref Ref, org string) (*Task, error) {
	if t := c.resolve(ref, org); t != nil {
		return t, nil
	}
	c.mu.RLock()
	stale := time.Since(c.scannedAt) > c.RescanEvery
	c.mu.RUnlock()
	if stale {
		c.Rescan(ctx)
		if t := c.resolve(ref, org); t != nil {
			return t, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrNotFound, ref)
}

// Exact returns the task org/name@version (no visibility check, no rescan):
// used to continue an environment created earlier.
func (c *Catalog) Exact(org, name, version string) *Task {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, t := range c.tasks {
		if t.Org == org && t.Name == name && t.Version == version {
			return t
		}
	}
	return nil
}

func (c *Catalog) resolve(ref Ref, org string) *Task {
	match := func(*Task) bool { return true }
	if ref.Version != "" {
		m, err := versionMatcher(ref.Version)
		if err != nil {
			return nil
		}
		match = func(t *Task) bool { return m(t.SemVer) }
	}
	orgs := []string{ref.Org}
	if ref.Org == "" {
		orgs = []string{org, c.publicOrg}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, o := range orgs {
		var best, bestPre *Task
		for _, t := range c.tasks { // versions descending
			if t.Org != o || t.Name != ref.Name || !c.visible(t, org) || !match(t) {
				continue
			}
			if t.SemVer.Prerelease() == "" {
				best = t
				break
			}
			if bestPre == nil {
				bestPre = t
			}
		}
		if best != nil {
			return best
		}
		if bestPre != nil {
			return bestPre
		}
	}
	return nil
}
