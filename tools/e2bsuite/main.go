// Command e2bsuite runs E2B's own integration tests (an unmodified copy of
// e2b-dev/infra's tests/integration, in ../shared/e2b-infra) against a fresh
// backend: `make e2b-suite`.
//
// It builds the test binaries from a temporary copy of the tests (cached by
// the hash of that tree, so a re-run skips the build), starts the backend on
// a free loopback port with a throwaway data directory and a bootstrapped
// org, runs the tests of tests.txt package by package, prints
// "N passed, M failed" with the failed names, stops the backend and removes
// every container it made. It exits non-zero only when a test of
// mustpass.txt fails (a ratchet: the tests known to pass), or when it cannot
// run the suite at all.
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// packages maps a test binary's name to its package directory under
// tests/integration.
var packages = []struct{ name, dir string }{
	{"api", "internal/tests/api"},
	{"sandboxes", "internal/tests/api/sandboxes"},
	{"envd", "internal/tests/envd"},
	{"proxies", "internal/tests/proxies"},
	{"volumes", "internal/tests/api/volumes"},
	{"metrics", "internal/tests/api/metrics"},
	{"templates", "internal/tests/api/templates"},
}

const org = "e2bsuite"

func main() {
	var (
		infra    = flag.String("infra", os.Getenv("E2B_INFRA_DIR"), "the e2b-infra copy (default: $E2B_INFRA_DIR, else ../shared/e2b-infra)")
		listDir  = flag.String("lists", "tools/e2bsuite", "directory of tests.txt, skipped.txt and mustpass.txt")
		cacheDir = flag.String("cache", os.Getenv("E2B_SUITE_CACHE"), "where built test binaries are kept (default: the user cache dir's dreadnode-e2b-suite)")
		runRE    = flag.String("run", "", "only the listed tests matching this regexp")
		parallel = flag.Int("parallel", 2, "-test.parallel of each binary")
		timeout  = flag.Duration("timeout", 20*time.Minute, "-test.timeout of each binary")
		jobs     = flag.Int("jobs", 1, "test binaries run at once")
		logDir   = flag.String("logs", "", "keep the test and backend output here (default: a temporary directory, printed)")
	)
	flag.Parse()
	if err := run(*infra, *listDir, *cacheDir, *runRE, *parallel, *jobs, *timeout, *logDir); err != nil {
		var ratchet ratchetError
		if !errors.As(err, &ratchet) {
			fmt.Fprintln(os.Stderr, "e2b-suite:", err)
		} else {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
}

type ratchetError []string

func (r ratchetError) Error() string {
	return fmt.Sprintf("e2b-suite: %d test(s) of tools/e2bsuite/mustpass.txt failed: %s", len(r), strings.Join(r, ", "))
}

type test struct{ pkg, name string }

func (t test) String() string { return t.pkg + "/" + t.name }

func run(infra, listDir, cacheDir, runRE string, parallel, jobs int, timeout time.Duration, logDir string) error {
	if infra == "" {
		infra = filepath.Join("..", "shared", "e2b-infra")
	}
	infra, err := filepath.Abs(infra)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(infra, "tests", "integration", "go.mod")); err != nil {
		return fmt.Errorf("no e2b-infra copy at %s (set E2B_INFRA_DIR): %v", infra, err)
	}
	tests, err := readList(filepath.Join(listDir, "tests.txt"))
	if err != nil {
		return err
	}
	mustPass, err := readList(filepath.Join(listDir, "mustpass.txt"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if runRE != "" {
		re, err := regexp.Compile(runRE)
		if err != nil {
			return err
		}
		var kept []test
		for _, t := range tests {
			if re.MatchString(t.name) {
				kept = append(kept, t)
			}
		}
		tests = kept
	}
	if logDir == "" {
		if logDir, err = os.MkdirTemp("", "e2b-suite-logs"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	logDir, _ = filepath.Abs(logDir)

	bin, err := buildTests(infra, cacheDir)
	if err != nil {
		return err
	}
	if err := baseImageTags(); err != nil {
		return err
	}
	b, err := startBackend(logDir)
	if err != nil {
		return err
	}
	defer b.stop()
	fmt.Printf("backend at %s (data %s)\n", b.url, b.dataDir)

	env := append(os.Environ(),
		"TESTS_API_SERVER_URL="+b.url+"/e2b",
		"TESTS_ENVD_PROXY=http://localhost:"+b.port,
		"TESTS_SANDBOX_TEMPLATE_ID=base",
		"TESTS_E2B_API_KEY="+b.apiKey,
		// E2B's access token (a user's, for its dashboard's routes) is the
		// org's key here: its template requests take either.
		"TESTS_E2B_ACCESS_TOKEN="+b.apiKey,
		"TESTS_SANDBOX_TEAM_ID="+org,
		"POSTGRES_CONNECTION_STRING=", "TESTS_ORCHESTRATOR_HOST=",
	)
	type outcome struct {
		names []string
		res   map[string]string
		err   error
	}
	outcomes := make([]chan outcome, len(packages))
	sem := make(chan struct{}, max(jobs, 1))
	for i, p := range packages {
		outcomes[i] = make(chan outcome, 1)
		var names []string
		for _, t := range tests {
			if t.pkg == p.name {
				names = append(names, t.name)
			}
		}
		if len(names) == 0 {
			outcomes[i] <- outcome{}
			continue
		}
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := runPackage(filepath.Join(bin, p.name+".test"), filepath.Join(infra, "tests", "integration", p.dir),
				names, parallel, timeout, env, filepath.Join(logDir, p.name+".log"))
			outcomes[i] <- outcome{names, res, err}
		}()
	}
	var passed, failed []string
	reasons := map[string]string{}
	for i, p := range packages {
		o := <-outcomes[i]
		if o.err != nil {
			return o.err
		}
		for _, n := range o.names {
			id := test{p.name, n}.String()
			switch r := o.res[n]; r {
			case "PASS":
				passed = append(passed, id)
			default:
				failed = append(failed, id)
				if r == "" {
					r = "not run to its end: the binary exited (a panic in another test, or its timeout)"
				}
				reasons[id] = r
			}
		}
	}
	b.stop()

	fmt.Printf("\nlogs in %s\n", logDir)
	if len(failed) > 0 {
		fmt.Println("failed:")
		for _, f := range failed {
			fmt.Printf("  %s (%s)\n", f, reasons[f])
		}
	}
	fmt.Printf("%d passed, %d failed\n", len(passed), len(failed))

	var broken ratchetError
	isFailed := map[string]bool{}
	for _, f := range failed {
		isFailed[f] = true
	}
	for _, t := range mustPass {
		if isFailed[t.String()] {
			broken = append(broken, t.String())
		}
	}
	if len(broken) > 0 {
		return broken
	}
	return nil
}

// readList reads "<package> <test> [anything]" lines, skipping blanks and #.
func readList(path string) ([]test, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []test
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			return nil, fmt.Errorf("%s: %q is not \"<package> <test>\"", path, line)
		}
		out = append(out, test{fields[0], fields[1]})
	}
	return out, sc.Err()
}

// treeHash hashes the e2b-infra tree (paths and contents), the Go version
// and the platform: the cache key of the test binaries.
func treeHash(dir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%s\x00", rel)
		_, err = io.Copy(h, f)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

// buildTests returns the directory holding <package>.test for every package,
// building them from a temporary writable copy when the cache misses.
func buildTests(infra, cacheDir string) (string, error) {
	if cacheDir == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		cacheDir = filepath.Join(c, "dreadnode-e2b-suite")
	}
	key, err := treeHash(infra)
	if err != nil {
		return "", err
	}
	// The binaries built depend on the package list too: a package added
	// here must not be looked for in an older build.
	h := sha256.New()
	for _, p := range packages {
		fmt.Fprintf(h, "%s %s\n", p.name, p.dir)
	}
	key += "-" + hex.EncodeToString(h.Sum(nil))[:8]
	bin := filepath.Join(cacheDir, key)
	if _, err := os.Stat(filepath.Join(bin, "complete")); err == nil {
		fmt.Printf("test binaries from the cache %s\n", bin)
		return bin, nil
	}
	tmp, err := os.MkdirTemp("", "e2b-suite-build")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "e2b-infra")
	if out, err := exec.CommandContext(context.Background(), "cp", "-r", infra, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copying %s: %v\n%s", infra, err, out)
	}
	if out, err := exec.CommandContext(context.Background(), "chmod", "-R", "u+w", src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("chmod: %v\n%s", err, out)
	}
	// Each run stages into a directory of its own, so two runs building at
	// once (two checkouts sharing the user cache) never write into each
	// other's binaries; the first to finish publishes, the other uses it.
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	staging, err := os.MkdirTemp(cacheDir, key+".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(staging) // gone once renamed; removes a failed build's
	fmt.Printf("building E2B's test binaries into %s (about 2 minutes the first time)\n", bin)
	args := []string{"test", "-c", "-mod=mod", "-vet=off", "-buildvcs=false", "-o", staging + "/"}
	for _, p := range packages {
		args = append(args, "./"+p.dir)
	}
	cmd := exec.CommandContext(context.Background(), "go", args...)
	cmd.Dir = filepath.Join(src, "tests", "integration")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the test binaries: %v", err)
	}
	if err := os.WriteFile(filepath.Join(staging, "complete"), nil, 0o644); err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(bin, "complete")); err == nil {
		return bin, nil // another run published the same build meanwhile
	}
	_ = os.RemoveAll(bin) // an incomplete directory left by a killed run
	if err := os.Rename(staging, bin); err != nil {
		if _, serr := os.Stat(filepath.Join(bin, "complete")); serr == nil {
			return bin, nil
		}
		return "", err
	}
	return bin, nil
}

type backend struct {
	url, port, apiKey, dataDir, dbPath string
	cmd                                *exec.Cmd
	done                               chan struct{}
	stopped                            bool
}

func freePort() (string, error) {
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port), nil
}

// startBackend builds the backend (static, as `make run` does, so it injects
// itself as the sandbox agent) and starts it as backendproc does for tests.
func startBackend(logDir string) (*backend, error) {
	dataDir, err := os.MkdirTemp("", "e2b-suite-data")
	if err != nil {
		return nil, err
	}
	exe := filepath.Join(dataDir, "dreadnode-backend")
	build := exec.CommandContext(context.Background(), "go", "build", "-o", exe, "./backend/cmd/dreadnode-backend")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the backend: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	b := &backend{port: port, apiKey: ids.Token("dn_e2bsuite"), dataDir: dataDir,
		dbPath: filepath.Join(dataDir, "dreadnode.db"), url: "http://127.0.0.1:" + port, done: make(chan struct{})}
	logf, err := os.Create(filepath.Join(logDir, "backend.log"))
	if err != nil {
		return nil, err
	}
	b.cmd = exec.CommandContext(context.Background(), exe, "serve")
	b.cmd.Env = append(os.Environ(),
		"DREADNODE_LISTEN=127.0.0.1:"+port,
		"DREADNODE_DATA_DIR="+dataDir,
		"DREADNODE_DATABASE_URL="+b.dbPath,
		"DREADNODE_TASKS_DIR=tasks",
		"DREADNODE_PROVIDER=docker",
		"DREADNODE_BOOTSTRAP_ORG="+org,
		"DREADNODE_BOOTSTRAP_API_KEY="+b.apiKey,
		"DREADNODE_BOOTSTRAP_CREDITS=1000000",
		"DREADNODE_SANDBOX_DOMAIN=localhost:"+port,
		"DREADNODE_MIN_TIMEOUT_SEC=1",
		"DREADNODE_RATE_CREATE=off", "DREADNODE_RATE_WRITE=off", "DREADNODE_RATE_READ=off", "DREADNODE_RATE_EXEC=off",
		"DREADNODE_RATE_AUTH_FAILURES=off",
	)
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the backend: %v", err)
	}
	go func() { _ = b.cmd.Wait(); logf.Close(); close(b.done) }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-b.done:
			b.stopped = true
			return nil, fmt.Errorf("the backend exited at start; see %s", logf.Name())
		default:
		}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, b.url+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b, nil
			}
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, fmt.Errorf("the backend at %s was not ready within 90s; see %s", b.url, logf.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends the backend (SIGTERM, SIGKILL after 20s), then removes every
// container, network and volume labelled with its deployment id, and its
// data directory.
func (b *backend) stop() {
	if b.stopped {
		return
	}
	b.stopped = true
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if db, err := store.Open(ctx, b.dbPath); err != nil {
		fmt.Fprintf(os.Stderr, "e2b-suite: opening the backend's database for the clean-up: %v\n", err)
	} else {
		dep, err := db.DeploymentID(ctx)
		_ = db.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2b-suite: reading the deployment id: %v\n", err)
		} else {
			removeLabelled(ctx, compute.LabelDeployment+"="+dep)
		}
	}
	_ = os.RemoveAll(b.dataDir)
}

// baseImages are the images E2B's template tests build FROM, which no
// registry serves here: each missing one is tagged from the local base
// image (`make image`), once, and left for later runs.
var baseImages = []string{"ubuntu:22.04", "ubuntu:24.04"}

func baseImageTags() error {
	const local = "dreadnode/base:latest"
	for _, name := range baseImages {
		if exec.CommandContext(context.Background(), "docker", "image", "inspect", name).Run() == nil {
			continue
		}
		if out, err := exec.CommandContext(context.Background(), "docker", "tag", local, name).CombinedOutput(); err != nil {
			return fmt.Errorf("tagging %s as %s for E2B's template tests (build it with `make image`): %v\n%s", local, name, err, out)
		}
		fmt.Printf("tagged %s as %s (E2B's template tests build FROM it)\n", local, name)
	}
	return nil
}

func removeLabelled(ctx context.Context, label string) {
	n := 0
	for _, kind := range []struct{ list, rm []string }{
		{[]string{"ps", "-aq"}, []string{"rm", "-f", "-v"}},
		{[]string{"images", "-q"}, []string{"rmi", "-f"}}, // snapshots and template builds
		{[]string{"network", "ls", "-q"}, []string{"network", "rm"}},
		{[]string{"volume", "ls", "-q"}, []string{"volume", "rm", "-f"}},
	} {
		out, err := exec.CommandContext(ctx, "docker", append(kind.list, "--filter", "label="+label)...).Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2b-suite: docker %s: %v\n", strings.Join(kind.list, " "), err)
			continue
		}
		items := strings.Fields(string(out))
		if len(items) == 0 {
			continue
		}
		n += len(items)
		if out, err := exec.CommandContext(ctx, "docker", append(kind.rm, items...)...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2b-suite: docker %s: %v\n%s", strings.Join(kind.rm, " "), err, out)
		}
	}
	fmt.Printf("removed %d container(s), image(s), network(s) and volume(s) labelled %s\n", n, label)
}

var (
	resultLine = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (Test\S*) `)
	stackFrame = regexp.MustCompile(`^\S+\.(Test\w+)\(`)
	marker     = regexp.MustCompile(`^=== (?:RUN|CONT|NAME|PAUSE)\s+(Test[^/\s]*)`)
)

// runPackage runs one binary over names in its package directory and
// returns each top-level test's result (PASS, FAIL, SKIP; missing when the
// binary ended before the test did).
func runPackage(exe, dir string, names []string, parallel int, timeout time.Duration, env []string, logPath string) (map[string]string, error) {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	cmd := exec.CommandContext(context.Background(), exe, "-test.run", "^("+strings.Join(sorted, "|")+")$",
		"-test.parallel", fmt.Sprint(parallel), "-test.v", "-test.timeout", timeout.String())
	cmd.Dir = dir
	cmd.Env = env
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	fmt.Printf("== %s: %d test(s), log %s\n", filepath.Base(exe), len(names), logPath)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	res := map[string]string{}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	panicked, panicMsg, panicTest := false, "", ""
	current, firstErr, wantNext := "", map[string]string{}, 0
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(logf, line)
		if m := marker.FindStringSubmatch(line); m != nil {
			current, wantNext = m[1], 0
		}
		// testify's "Error:" line and the two after it: the cause shown
		// with a failed test.
		if t := strings.TrimSpace(line); current != "" {
			if wantNext > 0 {
				if t != "" && !strings.HasPrefix(t, "Test:") && !strings.HasPrefix(t, "Messages:") && !strings.HasPrefix(t, "---") && !strings.HasPrefix(t, "===") {
					firstErr[current] += " " + strings.Join(strings.Fields(t), " ")
				}
				wantNext--
			} else if rest, ok := strings.CutPrefix(t, "Error:"); ok && firstErr[current] == "" {
				firstErr[current] = strings.Join(strings.Fields(rest), " ")
				wantNext = 2
			}
		}
		if m := resultLine.FindStringSubmatch(line); m != nil {
			res[m[2]] = m[1]
			fmt.Printf("  %s %s\n", m[1], m[2])
		}
		if strings.HasPrefix(line, "panic: ") && !panicked {
			panicked, panicMsg = true, strings.TrimPrefix(line, "panic: ")
			fmt.Printf("  %s\n", line)
		}
		// The first test function in the panic's stack is the one that
		// panicked.
		if m := stackFrame.FindStringSubmatch(line); panicked && panicTest == "" && m != nil {
			panicTest = m[1]
		}
	}
	_ = cmd.Wait()
	for _, n := range names {
		if n == panicTest {
			firstErr[n] = "panicked: " + panicMsg
		}
		switch res[n] {
		case "FAIL":
			cause := firstErr[n]
			if len(cause) > 240 {
				cause = cause[:240] + "…"
			}
			res[n] = "FAIL: " + cause
		case "SKIP":
			res[n] = "skipped"
		}
	}
	return res, nil
}
