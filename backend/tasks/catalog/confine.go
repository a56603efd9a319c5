package catalog

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// FieldError names the field of a task's compose file that is refused
// (services.<name>.build.context …): a 400 when a request's inputs
// produced it, a catalog problem when the task's own files do.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// checkBuildPaths refuses a build context or Dockerfile outside the task's
// own directory root, whether through ".." or a symlink: the builder would
// send that directory (the backend's data, its keys) into the image.
func checkBuildPaths(p *types.Project, root string) error {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("task directory %s: %w", root, err)
	}
	names := make([]string, 0, len(p.Services))
	for name := range p.Services {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b := p.Services[name].Build
		if b == nil {
			continue
		}
		ctx := b.Context
		if ctx == "" {
			ctx = "."
		}
		if !filepath.IsAbs(ctx) {
			ctx = filepath.Join(root, ctx)
		}
		field := "services." + name + ".build."
		if err := inside(realRoot, ctx); err != nil {
			return &FieldError{Field: field + "context", Msg: fmt.Sprintf("the build context %s %v; a task builds only from its own directory", b.Context, err)}
		}
		if b.DockerfileInline != "" {
			continue
		}
		df := b.Dockerfile
		if df == "" {
			df = "Dockerfile"
		}
		if !filepath.IsAbs(df) {
			df = filepath.Join(ctx, df)
		}
		if err := inside(realRoot, df); err != nil {
			return &FieldError{Field: field + "dockerfile", Msg: fmt.Sprintf("the Dockerfile %s %v; a task builds only from its own directory", b.Dockerfile, err)}
		}
	}
	return nil
}

// inside says why p (once its symlinks are resolved) is not within
// realRoot, nil when it is. A path that does not exist is left to the
// build, which reports it, unless its lexical form already leaves.
func inside(realRoot, p string) error {
	real, err := filepath.EvalSymlinks(p)
	if os.IsNotExist(err) {
		real = filepath.Clean(p)
	} else if err != nil {
		return fmt.Errorf("cannot be read (%v)", err)
	}
	rel, err := filepath.Rel(realRoot, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		if real != filepath.Clean(p) {
			return fmt.Errorf("leaves the task's directory through a symlink (to %s)", real)
		}
		return fmt.Errorf("is outside the task's directory")
	}
	return nil
}
