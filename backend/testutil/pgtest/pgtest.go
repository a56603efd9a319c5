// Package pgtest starts throwaway PostgreSQL clusters for tests: initdb into
// a temporary directory, a server on a free loopback port with its unix
// socket beside the data, fsync off. A test either starts its own cluster
// (Start) or, in a package whose TestMain calls Main, gets a fresh database
// in the package's one shared cluster (Database), which is much cheaper.
//
// The server binaries come from Debian's postgresql package under
// /usr/lib/postgresql/<version>/bin (`make postgres` installs it); PATH is
// not consulted, since an unrelated initdb may sit on it. When the tests run
// as root the cluster runs as the postgres OS user, because the server
// refuses to run as root.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BinGlob is where the server binaries are looked up; the highest version wins.
const BinGlob = "/usr/lib/postgresql/*/bin"

// startTimeout bounds initdb plus the wait for the first accepted connection
// on a loaded machine.
const startTimeout = 60 * time.Second

// Cluster is one running PostgreSQL server.
type Cluster struct {
	Dir  string // temporary directory holding data, socket and log; removed by Stop
	Port int    // loopback TCP port

	cmd  *exec.Cmd
	done chan struct{} // closed when the server process has exited
	seq  atomic.Int64
}

// BinDir returns the directory holding initdb, pg_ctl and postgres.
func BinDir() (string, error) {
	dirs, _ := filepath.Glob(BinGlob)
	// Version directories sort numerically when compared by length first
	// ("9.6" < "15").
	sort.Slice(dirs, func(i, j int) bool {
		if len(dirs[i]) != len(dirs[j]) {
			return len(dirs[i]) < len(dirs[j])
		}
		return dirs[i] < dirs[j]
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		ok := true
		for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
			if _, err := os.Stat(filepath.Join(dirs[i], b)); err != nil {
				ok = false
			}
		}
		if ok {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found under %s: run `make postgres` to install Debian's postgresql package", BinGlob)
}

// StartCluster initialises and starts a new cluster. The caller must Stop it.
func StartCluster() (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(context.Background(), filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb in %s failed: %v\n%s", data, err, out)
	}
	// A free port can be taken between our probe and the server's bind;
	// a server that exits at start is retried on another port.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c, err := start(bin, dir, cred)
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// serverCredential returns the identity the server runs as: the postgres
// user when we are root (handing it dir), else nil (ourselves).
func serverCredential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("tests run as root, and PostgreSQL refuses root, but there is no postgres user to run it as (%v): run `make postgres`", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The temp dir's parents are world-traversable (/tmp); dir itself
	// must belong to the server for initdb and the socket.
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func start(bin, dir string, cred *syscall.Credential) (*Cluster, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "server.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(context.Background(), filepath.Join(bin, "postgres"),
		"-D", filepath.Join(dir, "data"),
		"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-k", dir,
		// Throwaway data: durability costs time and buys nothing.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	c := &Cluster{Dir: dir, Port: port, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			conn.Close(ctx)
			return c, nil
		}
		select {
		case <-c.done:
			return nil, fmt.Errorf("postgres exited at start on port %d:\n%s", port, readLog(logPath))
		case <-ctx.Done():
			c.kill()
			return nil, fmt.Errorf("postgres did not accept connections within %s (last error: %v):\n%s", startTimeout, err, readLog(logPath))
		case <-time.After(20 * time.Millisecond): // poll interval, bounded by ctx
		}
	}
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

func freePort() (int, error) {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// URL returns the connection URL of database db over loopback TCP.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

func (c *Cluster) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// Stop shuts the server down (fast shutdown: open sessions are ended), waits
// for it to exit and removes its directory.
func (c *Cluster) Stop() error {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			c.kill()
		}
	}
	return os.RemoveAll(c.Dir)
}

// CreateDatabase creates a new, empty database with a unique name and
// returns its URL.
func (c *Cluster) CreateDatabase(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("test_%d", c.seq.Add(1))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return c.URL(name), nil
}

// Start starts a cluster for this test alone; it is stopped and removed when
// the test ends. Missing binaries fail the test.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c, err := StartCluster()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("pgtest: stop cluster: %v", err)
		}
	})
	return c
}

// NewDatabase creates a database for this test in c and returns its URL.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := c.CreateDatabase(ctx)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return url
}

var shared *Cluster

// Main runs a package's tests with one shared cluster, for Database:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// It runs after (cleanups of the package's own) once the tests ended, then
// exits the process with the tests' status.
func Main(m *testing.M, after ...func()) {
	c, err := StartCluster()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		os.Exit(1)
	}
	shared = c
	code := m.Run()
	for _, f := range after {
		f()
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest: stop cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// ErrNoMain is reported by Database when the package's TestMain does not call Main.
var ErrNoMain = errors.New("pgtest.Database needs the package's TestMain to call pgtest.Main(m)")

// Database returns the URL of a new, empty database in the shared cluster
// started by Main. Databases are left for the cluster's removal at exit.
func Database(t testing.TB) string {
	t.Helper()
	if shared == nil {
		t.Fatal(ErrNoMain)
	}
	return shared.NewDatabase(t)
}

// EachDatabase runs fn as a subtest per database the backend supports,
// "sqlite" and "postgres" (the store's dialect names), each with the URL of
// a new, empty database: a file in the test's temp dir, or a fresh database
// of the package's shared cluster (Main). Opening the URL twice opens the
// same database, as a restart does. A failure on PostgreSQL fails the test:
// there is no skip.
func EachDatabase(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, filepath.Join(t.TempDir(), "db")) })
	t.Run("postgres", func(t *testing.T) { fn(t, Database(t)) })
}
