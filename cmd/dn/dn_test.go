package main_test

// These tests run the built dn binary against a real backend process on the
// real Docker engine (backendproc), with the repository's tasks/ catalog and
// the fixtures in testdata/tasks.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
)

var dnBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dn-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dnBin = filepath.Join(dir, "dn")
	root, err := backendproc.RepoRoot()
	if err == nil {
		cmd := exec.Command("go", "build", "-o", dnBin, "./cmd/dn")
		cmd.Dir = root
		var out []byte
		if out, err = cmd.CombinedOutput(); err != nil {
			err = fmt.Errorf("%v\n%s", err, out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "building dn:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one run of dn.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// dn runs the binary with a private HOME and config directory.
type dn struct {
	t   *testing.T
	env map[string]string
	cfg string
}

func newDN(t *testing.T, env map[string]string) *dn {
	home := t.TempDir()
	e := map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, "cfg"), "PATH": os.Getenv("PATH")}
	for k, v := range env {
		e[k] = v
	}
	return &dn{t: t, env: e, cfg: filepath.Join(home, "cfg", "dreadnode")}
}

func (d *dn) with(k, v string) *dn {
	e := map[string]string{}
	for k, v := range d.env {
		e[k] = v
	}
	e[k] = v
	return &dn{t: d.t, env: e, cfg: d.cfg}
}

func (d *dn) runIn(stdin string, args ...string) result {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dnBin, args...)
	for k, v := range d.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("dn %s: %v", strings.Join(args, " "), err)
	}
	return r
}

func (d *dn) run(args ...string) result {
	d.t.Helper()
	return d.runIn("", args...)
}

func (d *dn) must(args ...string) result {
	d.t.Helper()
	r := d.run(args...)
	if r.code != 0 {
		d.t.Fatalf("dn %s: %s", strings.Join(args, " "), r)
	}
	return r
}

func expect(t *testing.T, r result, code int, in string, wants ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d: %s", r.code, code, r)
	}
	for _, w := range wants {
		if !strings.Contains(in, w) {
			t.Errorf("output lacks %q: %s", w, r)
		}
	}
}

var readyRE = regexp.MustCompile(`Environment (\S+) is ready`)

func TestDNAgainstBackend(t *testing.T) {
	root, err := backendproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	testdata, err := filepath.Abs("testdata/tasks")
	if err != nil {
		t.Fatal(err)
	}
	b := backendproc.Start(t, backendproc.Options{TasksDir: filepath.Join(root, "tasks") + ":" + testdata})
	// Whatever a failed step leaves behind is torn down before the backend stops.
	var envs, sandboxes []string
	t.Cleanup(func() {
		for _, id := range envs {
			deleteVia(t, b, "/api/v1/org/"+b.Org+"/ws/main/environments/"+id)
		}
		for _, id := range sandboxes {
			deleteVia(t, b, "/sandboxes/"+id)
		}
	})
	anon := newDN(t, map[string]string{"DREADNODE_API_URL": b.URL})
	nonce := fmt.Sprint(time.Now().UnixNano())

	// login writes the profile every later step relies on (no key in the env).
	var d *dn
	t.Run("login writes a private profile", func(t *testing.T) {
		r := anon.runIn(b.APIKey+"\n", "login", "--org", b.Org)
		expect(t, r, 0, r.stdout, "Logged in to "+b.URL, `as org "`+b.Org+`"`)
		fi, err := os.Stat(filepath.Join(anon.cfg, "config.yaml"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("profile file: %v mode %v", err, fi.Mode().Perm())
		}
		r = newDN(t, map[string]string{"DREADNODE_API_URL": b.URL}).runIn("wrong-key\n", "login", "--org", b.Org)
		expect(t, r, 1, r.stderr, "HTTP 401", "dn login")
	})
	d = &dn{t: t, env: map[string]string{"HOME": anon.env["HOME"], "XDG_CONFIG_HOME": anon.env["XDG_CONFIG_HOME"], "PATH": os.Getenv("PATH")}, cfg: anon.cfg}

	t.Run("flags override variables which override the profile", func(t *testing.T) {
		d.must("credits")
		r := d.with("DREADNODE_API_KEY", "dn_wrong").run("credits")
		expect(t, r, 1, r.stderr, "HTTP 401", "from env", "DREADNODE_API_KEY")
		d.with("DREADNODE_API_KEY", "dn_wrong").must("credits", "--api-key", b.APIKey)
		r = d.with("DREADNODE_ORG", "someone-else").run("credits", "--json")
		expect(t, r, 1, r.stderr, "HTTP 404")
	})

	t.Run("world run --save runs a job to its end and downloads its output", func(t *testing.T) {
		tarPath := filepath.Join(t.TempDir(), "out.tar")
		r := d.must("world", "run", "--save", tarPath, "--", "sh", "-c", "mkdir -p /output && echo world-result > /output/r.txt && echo world-log")
		expect(t, r, 0, r.stdout, "State:      completed", "Output:     2 files")
		m := regexp.MustCompile(`Job:\s+(\S+)`).FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("no job id in: %s", r)
		}
		sandboxes = append(sandboxes, m[1])
		if b, err := os.ReadFile(tarPath); err != nil || !strings.Contains(string(b), "world-result") {
			t.Fatalf("saved output: %v %q", err, b)
		}
		r = d.must("world", "logs", m[1])
		expect(t, r, 0, r.stdout, "world-log")
		r = d.run("world", "run", "--wait", "--", "sh", "-c", "exit 4")
		expect(t, r, 1, r.stderr, "ended failed", "code 4", "dn world logs")
		r = d.must("world", "list", "--json")
		expect(t, r, 0, r.stdout, m[1])
	})

	var envID, token string
	t.Run("env create --wait reaches ready and prints the token once", func(t *testing.T) {
		r := d.run("env", "create", "web-login", "--timeout-sec", "900", "--wait")
		if m := readyRE.FindStringSubmatch(r.stdout); m != nil {
			envID = m[1]
			envs = append(envs, envID)
		}
		expect(t, r, 0, r.stdout, "is ready (task web-login)", "Service URLs:", "web  http://", "Instruction:", "Execute token: det_")
		if strings.Contains(r.stdout, "web  http://127.") {
			t.Errorf("the service URL is a loopback port; services publish no port on the host:\n%s", r.stdout)
		}
		var states []string
		for _, l := range strings.Split(r.stdout, "\n") {
			if s, ok := strings.CutPrefix(l, "state="); ok {
				states = append(states, strings.Fields(s)[0])
				if !strings.Contains(l, " elapsed=") {
					t.Errorf("state line without elapsed time: %q", l)
				}
			}
		}
		if strings.Join(states, ",") != "building,provisioning,ready" {
			t.Errorf("states printed %v, want building, provisioning, ready", states)
		}
		if strings.Contains(r.stdout, "{{") {
			t.Errorf("the instruction was not filled in: %s", r.stdout)
		}
		kept := filepath.Join(d.cfg, "tokens", "environments", envID)
		b, err := os.ReadFile(kept)
		if err != nil {
			t.Fatalf("the execute token was not kept: %v", err)
		}
		token = strings.TrimSpace(string(b))
		if n := strings.Count(r.stdout+r.stderr, token); n != 1 || !strings.HasPrefix(token, "det_") {
			t.Errorf("token %q printed %d times, want once", token, n)
		}
		if fi, _ := os.Stat(kept); fi.Mode().Perm() != 0o600 {
			t.Errorf("token file mode %v", fi.Mode().Perm())
		}
	})
	if envID == "" {
		t.Fatal("no environment to continue with")
	}

	t.Run("env exec runs with the kept token and exits with the command's code", func(t *testing.T) {
		r := d.run("env", "exec", envID, "--", "wget", "-qO-", "http://web:8080/")
		expect(t, r, 0, r.stdout, "Intranet login")
		r = d.run("env", "exec", envID, "echo out-line; echo err-line >&2; exit 7")
		// The server streams execute (NDJSON): each stream reaches its own file.
		expect(t, r, 7, r.stdout, "out-line")
		expect(t, r, 7, r.stderr, "err-line")
		r = d.run("env", "exec", "--json", envID, "--", "echo", "hi")
		var out struct {
			ExitCode *int   `json:"exit_code"`
			Output   string `json:"output"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.ExitCode == nil || *out.ExitCode != 0 || out.Output != "hi\n" {
			t.Fatalf("--json exec: %v %+v %s", err, out, r)
		}
	})

	t.Run("env status --json has exactly id, state, expires_at, service_urls", func(t *testing.T) {
		r := d.must("env", "status", envID, "--json")
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, r.stdout)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if strings.Join(keys, ",") != "expires_at,id,service_urls,state" {
			t.Fatalf("keys %v", keys)
		}
		var st struct {
			ID          string `json:"id"`
			State       string `json:"state"`
			ExpiresAt   *time.Time
			ServiceURLs map[string]struct {
				URL  string `json:"url"`
				Port int    `json:"port"`
			} `json:"service_urls"`
		}
		_ = json.Unmarshal([]byte(r.stdout), &st)
		if st.ID != envID || st.State != "ready" || st.ServiceURLs["web"].Port == 0 {
			t.Fatalf("status %+v", st)
		}
		r = d.must("env", "list", "--json")
		if !strings.Contains(r.stdout, envID) || strings.Contains(r.stdout, "execute_token") {
			t.Fatalf("env list --json: %s", r.stdout)
		}
	})

	t.Run("a lost or wrong token is explained", func(t *testing.T) {
		r := d.run("env", "exec", "--token", "det_wrong", envID, "--", "true")
		expect(t, r, 1, r.stderr, "HTTP 403", "dn env delete "+envID, "dn env create")
		other := newDN(t, map[string]string{"DREADNODE_API_URL": b.URL, "DREADNODE_API_KEY": b.APIKey, "DREADNODE_ORG": b.Org})
		r = other.run("env", "exec", envID, "--", "true")
		expect(t, r, 1, r.stderr, "no execute token is kept for environment "+envID, "dn env delete "+envID, "--token")
		other.must("env", "exec", "--token", token, envID, "--", "true")
	})

	t.Run("unknown ids are 404 with what to check", func(t *testing.T) {
		r := d.run("env", "status", "no-such-env")
		expect(t, r, 1, r.stderr, `environment "no-such-env" was not found`, "Check the id")
		r = d.run("sandbox", "get", "no-such-sandbox")
		expect(t, r, 1, r.stderr, "HTTP 404")
		r = d.run("task", "info", "no-such-task")
		expect(t, r, 1, r.stderr, "HTTP 404")
	})

	t.Run("usage errors exit 2", func(t *testing.T) {
		r := d.run("env", "create", "web-login", "--no-such-flag")
		expect(t, r, 2, r.stderr, "unknown flag: --no-such-flag")
		r = d.run("env", "status")
		expect(t, r, 2, r.stderr, "accepts 1 arg(s)")
	})

	t.Run("a task that fails to build exits 1 with the build error", func(t *testing.T) {
		r := d.run("env", "create", "dn-broken", "--input", "nonce="+nonce, "--wait")
		if m := regexp.MustCompile(`dn env delete (\S+)`).FindStringSubmatch(r.stderr); m != nil {
			envs = append(envs, m[1])
		}
		expect(t, r, 1, r.stdout+r.stderr, "state=building", "failed: task build failed", "missing header frobnicate.h", "dn task info dn-broken")
	})

	t.Run("a deadline shorter than the build exits 3 and says how to resume", func(t *testing.T) {
		start := time.Now()
		r := d.run("env", "create", "dn-slow", "--input", "nonce="+nonce, "--timeout-sec", "3", "--wait")
		m := regexp.MustCompile(`dn env wait (\S+)`).FindStringSubmatch(r.stderr)
		if m != nil {
			envs = append(envs, m[1])
		}
		expect(t, r, 3, r.stderr, "is still building", "deadline: --timeout-sec 3", "dn env status ")
		if m == nil {
			t.Fatalf("no 'dn env wait <id>' in %s", r)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("the 3 s deadline returned after %v", d)
		}
		r = d.run("env", "wait", m[1], "--timeout-sec", "1")
		expect(t, r, 3, r.stderr, "dn env wait "+m[1])
		d.must("env", "delete", m[1])
	})

	t.Run("sandbox create, exec, cp, logs, delete", func(t *testing.T) {
		r := d.must("sandbox", "create", "--wait", "--json", "--metadata", "suite=dn")
		var sb struct {
			SandboxID   string `json:"sandboxID"`
			State       string `json:"state"`
			AccessToken string `json:"accessToken"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &sb); err != nil || sb.SandboxID == "" {
			t.Fatalf("create --json: %v %s", err, r)
		}
		sandboxes = append(sandboxes, sb.SandboxID)
		if sb.State != "running" || !strings.Contains(r.stderr, "state=running") {
			t.Fatalf("create --wait: %s", r)
		}
		r = d.run("sandbox", "exec", sb.SandboxID, "--", "sh", "-c", "echo out-line; echo err-line >&2; exit 5")
		if r.code != 5 || r.stdout != "out-line\n" || r.stderr != "err-line\n" {
			t.Fatalf("exec: %s", r)
		}
		// exec streams: the first line reaches dn's stdout while the command
		// still runs (it waits for a file the test creates only afterwards).
		cmd := exec.Command(dnBin, "sandbox", "exec", sb.SandboxID, "--", "sh", "-c",
			"echo first-line; while [ ! -e /tmp/go-on ]; do sleep 0.1; done; echo second-line")
		for k, v := range d.env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(pipe)
		if !lines.Scan() || lines.Text() != "first-line" {
			t.Fatalf("streamed exec: first line %q, %v", lines.Text(), lines.Err())
		}
		d.must("sandbox", "exec", sb.SandboxID, "--", "touch", "/tmp/go-on")
		if !lines.Scan() || lines.Text() != "second-line" {
			t.Fatalf("streamed exec: second line %q, %v", lines.Text(), lines.Err())
		}
		for lines.Scan() {
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("streamed exec: %v", err)
		}
		local := filepath.Join(t.TempDir(), "in.txt")
		if err := os.WriteFile(local, []byte("payload\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		d.must("sandbox", "cp", local, sb.SandboxID+":/tmp/in.txt")
		r = d.must("sandbox", "cp", sb.SandboxID+":/tmp/in.txt", "-")
		if r.stdout != "payload\n" {
			t.Fatalf("cp back: %s", r)
		}
		d.must("sandbox", "logs", sb.SandboxID)
		r = d.must("sandbox", "get", sb.SandboxID, "--json")
		if !strings.Contains(r.stdout, `"sandboxID": "`+sb.SandboxID+`"`) || strings.Contains(r.stdout, "accessToken") {
			t.Fatalf("get --json shows no token (GET never carries it): %s", r.stdout)
		}
		r = d.must("sandbox", "list")
		if !strings.Contains(r.stdout, sb.SandboxID) || !strings.Contains(r.stdout, "suite=dn") {
			t.Fatalf("list: %s", r)
		}
		r = d.must("sandbox", "delete", sb.SandboxID)
		expect(t, r, 0, r.stdout, "is deleted")
		r = d.run("sandbox", "exec", "--token", sb.AccessToken, sb.SandboxID, "--", "true")
		expect(t, r, 1, r.stderr, "HTTP 409")
	})

	t.Run("env create without --wait, then env wait, pause, resume", func(t *testing.T) {
		r := d.must("env", "create", "web-login", "--json")
		var created struct {
			ID           string `json:"id"`
			State        string `json:"state"`
			ExecuteToken string `json:"execute_token"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &created); err != nil || created.ID == "" {
			t.Fatalf("create --json: %v %s", err, r)
		}
		envs = append(envs, created.ID)
		if created.State != "building" || !strings.HasPrefix(created.ExecuteToken, "det_") {
			t.Fatalf("created %+v", created)
		}
		r = d.must("env", "wait", created.ID, "--json")
		var ready struct {
			State       string         `json:"state"`
			Instruction string         `json:"instruction"`
			ServiceURLs map[string]any `json:"service_urls"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &ready); err != nil || ready.State != "ready" || ready.ServiceURLs["web"] == nil {
			t.Fatalf("wait --json: %v %+v %s", err, ready, r)
		}
		if !strings.Contains(r.stderr, "state=ready") || strings.Contains(r.stdout, "state=") {
			t.Errorf("with --json the state lines go to stderr: %s", r)
		}
		r = d.must("env", "pause", created.ID)
		expect(t, r, 0, r.stdout, "is paused")
		r = d.run("env", "exec", created.ID, "--", "true")
		expect(t, r, 1, r.stderr, "HTTP 409", "resume it first")
		r = d.must("env", "resume", created.ID)
		expect(t, r, 0, r.stdout, "is ready")
		d.must("env", "exec", created.ID, "--", "true")
		d.must("env", "delete", created.ID)
	})

	t.Run("an interrupted wait exits 130 and says how to resume", func(t *testing.T) {
		cmd := exec.Command(dnBin, "env", "create", "dn-slow", "--input", "nonce=int-"+nonce, "--wait")
		for k, v := range d.env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() && !strings.HasPrefix(sc.Text(), "state=building") {
		}
		_ = cmd.Process.Signal(os.Interrupt)
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		err = cmd.Wait()
		m := regexp.MustCompile(`dn env wait (\S+)`).FindStringSubmatch(errb.String())
		if m != nil {
			envs = append(envs, m[1])
			d.must("env", "delete", m[1])
		}
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 130 || m == nil || !strings.Contains(errb.String(), "interrupted while environment") {
			t.Fatalf("exit %v, stderr %s", err, errb.String())
		}
	})

	t.Run("sandbox logs -f follows a command until the sandbox completes", func(t *testing.T) {
		r := d.must("sandbox", "create", "--json", "--command", "echo first-line; sleep 2; echo second-line")
		var sb struct {
			SandboxID string `json:"sandboxID"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &sb); err != nil || sb.SandboxID == "" {
			t.Fatalf("create: %v %s", err, r)
		}
		sandboxes = append(sandboxes, sb.SandboxID)
		r = d.must("sandbox", "logs", "-f", sb.SandboxID)
		i, j := strings.Index(r.stdout, "first-line\n"), strings.Index(r.stdout, "second-line\n")
		if i < 0 || j < i {
			t.Fatalf("logs -f: %s", r)
		}
		r = d.must("sandbox", "get", sb.SandboxID, "--json")
		if !strings.Contains(r.stdout, `"state": "completed"`) {
			t.Fatalf("logs -f returned before the sandbox completed: %s", r.stdout)
		}
	})

	t.Run("env delete tears down and forgets the token", func(t *testing.T) {
		r := d.must("env", "delete", envID)
		expect(t, r, 0, r.stdout, "is torn_down")
		if _, err := os.Stat(filepath.Join(d.cfg, "tokens", "environments", envID)); !os.IsNotExist(err) {
			t.Fatalf("the token file is still there: %v", err)
		}
		r = d.must("ledger", "list", "--state", "killed", "--json")
		if !strings.Contains(r.stdout, `"environment_id": "`+envID+`"`) {
			t.Fatalf("ledger list: %s", r.stdout)
		}
	})
}

func deleteVia(t *testing.T, b *backendproc.Backend, path string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := b.Do(ctx, http.MethodDelete, path, nil)
	if err != nil {
		t.Errorf("cleanup DELETE %s: %v", path, err)
		return
	}
	resp.Body.Close()
}
