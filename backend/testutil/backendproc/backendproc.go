// Package backendproc starts the real backend binary for tests: a process of
// its own (so tests can kill -9 it), on a free loopback port, with a private
// database and a bootstrapped org and key.
package backendproc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/images"
)

// Options tune a backend.
type Options struct {
	// TasksDir is the task catalog; default the repo's tasks/.
	TasksDir string
	// Env adds or overrides variables (e.g. DREADNODE_PROVIDER).
	Env map[string]string
	// Credits is the bootstrap balance; 0 means 1000000.
	Credits float64
	// DatabaseURL is the database to run on; default a fresh SQLite file
	// in DataDir. Several backends given one postgres:// URL are replicas.
	DatabaseURL string
	// APIKey is the bootstrapped key; default a fresh one. Replicas share it.
	APIKey string
}

// Backend is a running backend process.
type Backend struct {
	URL     string
	APIKey  string
	Org     string
	DataDir string
	opts    Options
	cmd     *exec.Cmd
	logs    *lockedBuffer
	done    chan struct{}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// RepoRoot is the directory holding go.mod.
func RepoRoot() (string, error) { return images.RepoRoot() }

// Binary builds the backend once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "dreadnode-backend-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "dreadnode-backend")
		cmd := exec.CommandContext(context.Background(), "go", "build", "-o", binPath, "./backend/cmd/dreadnode-backend")
		cmd.Dir = root
		// Static, as `make run` and the image build it: the backend finds
		// no dn-agent beside it and injects itself as the sandbox agent.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building the backend: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Start builds the base image if missing, then starts a backend and waits
// until /readyz answers 200. The process is stopped at test cleanup.
func Start(t testing.TB, opts Options) *Backend {
	t.Helper()
	images.EnsureBase(t)
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if opts.TasksDir == "" {
		opts.TasksDir = filepath.Join(root, "tasks")
	}
	if opts.Credits == 0 {
		opts.Credits = 1_000_000
	}
	b := &Backend{DataDir: t.TempDir(), Org: "acc", APIKey: opts.APIKey, opts: opts}
	if b.APIKey == "" {
		b.APIKey = ids.Token("dn_test")
	}
	if b.opts.DatabaseURL == "" {
		b.opts.DatabaseURL = filepath.Join(b.DataDir, "dreadnode.db")
	}
	b.start(t)
	t.Cleanup(func() {
		b.Stop()
		if t.Failed() {
			t.Logf("backend output:\n%s", b.Logs())
		}
	})
	return b
}

func (b *Backend) start(t testing.TB) {
	t.Helper()
	env := append(os.Environ(),
		"DREADNODE_LISTEN=127.0.0.1:0",
		"DREADNODE_DATA_DIR="+b.DataDir,
		"DREADNODE_DATABASE_URL="+b.opts.DatabaseURL,
		"DREADNODE_TASKS_DIR="+b.opts.TasksDir,
		"DREADNODE_BOOTSTRAP_ORG="+b.Org,
		"DREADNODE_BOOTSTRAP_API_KEY="+b.APIKey,
		fmt.Sprintf("DREADNODE_BOOTSTRAP_CREDITS=%g", b.opts.Credits),
		"DREADNODE_MIN_TIMEOUT_SEC=1",
		// Tests and benchmarks drive one key far past a person's pace; the
		// limits have tests of their own (backend/app, ratelimit_test.go).
		// Options.Env may set them back.
		"DREADNODE_RATE_CREATE=off", "DREADNODE_RATE_WRITE=off", "DREADNODE_RATE_READ=off", "DREADNODE_RATE_EXEC=off",
		"DREADNODE_RATE_AUTH_FAILURES=off",
	)
	for k, v := range b.opts.Env {
		env = append(env, k+"="+v)
	}
	b.cmd = exec.CommandContext(context.Background(), Binary(t), "serve")
	b.cmd.Env = env
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if b.logs == nil {
		b.logs = &lockedBuffer{}
	}
	b.cmd.Stderr = b.logs
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("starting the backend: %v", err)
	}
	b.done = make(chan struct{})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			_, _ = b.logs.Write([]byte(line + "\n"))
			if u, ok := strings.CutPrefix(line, "dreadnode-backend listening on "); ok {
				select {
				case urls <- u:
				default:
				}
			}
		}
	}()
	go func() { _ = b.cmd.Wait(); close(b.done) }()
	select {
	case b.URL = <-urls:
	case <-b.done:
		t.Fatalf("the backend exited at start:\n%s", b.Logs())
	case <-time.After(60 * time.Second):
		b.Kill()
		t.Fatalf("the backend printed no URL within 60s:\n%s", b.Logs())
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, b.URL+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backend at %s was not ready within 60s (last error %v):\n%s", b.URL, err, b.Logs())
		}
		time.Sleep(50 * time.Millisecond) // polling interval, bounded by the deadline
	}
}

// Kill sends SIGKILL, as a crash would, and waits for the process to end.
func (b *Backend) Kill() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	}
}

// Freeze stops the process with SIGSTOP, as a stalled host or a long GC
// pause would: it holds its connections and leases but does nothing until
// Thaw.
func (b *Backend) Freeze() error { return b.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen process (SIGCONT).
func (b *Backend) Thaw() error { return b.signal(syscall.SIGCONT) }

func (b *Backend) signal(sig syscall.Signal) error {
	if b.cmd == nil || b.cmd.Process == nil {
		return fmt.Errorf("the backend was never started")
	}
	select {
	case <-b.done:
		return fmt.Errorf("the backend at %s has exited", b.URL)
	default:
	}
	return syscall.Kill(-b.cmd.Process.Pid, sig)
}

// Exited reports whether the process has ended.
func (b *Backend) Exited() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// Stop asks the backend to shut down (SIGTERM), killing it after 15s.
func (b *Backend) Stop() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	select {
	case <-b.done:
		return
	default:
	}
	// A frozen process would not see SIGTERM until the 15s are up.
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGCONT)
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(15 * time.Second):
		b.Kill()
	}
}

// Restart starts a new process on the same database (after Kill or Stop).
// The URL may change.
func (b *Backend) Restart(t testing.TB) {
	t.Helper()
	b.Stop()
	b.start(t)
}

// Logs is everything the process printed so far.
func (b *Backend) Logs() string { return b.logs.String() }

// Do sends an authenticated request and returns the response.
func (b *Backend) Do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.URL+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", b.APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return http.DefaultClient.Do(req)
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// DumpStacks ends the process with SIGQUIT, which makes the Go runtime
// print every goroutine's stack into Logs: for a test that finds a backend
// stuck, before it fails.
func (b *Backend) DumpStacks() {
	if b.Exited() {
		return
	}
	_ = syscall.Kill(b.cmd.Process.Pid, syscall.SIGCONT)
	_ = syscall.Kill(b.cmd.Process.Pid, syscall.SIGQUIT)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		b.Kill()
	}
}

// Memory reads the process's resident set now and its peak so far (VmRSS
// and VmHWM of /proc/PID/status), in bytes.
func (b *Backend) Memory() (rss, peak uint64, err error) {
	if b.cmd == nil || b.cmd.Process == nil {
		return 0, 0, fmt.Errorf("the backend was never started")
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		var kb uint64
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
			rss = kb << 10
		} else if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			peak = kb << 10
		}
	}
	if rss == 0 || peak == 0 {
		return 0, 0, fmt.Errorf("no VmRSS/VmHWM in /proc/%d/status", b.cmd.Process.Pid)
	}
	return rss, peak, nil
}
