package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// run calls Main in-process with an empty environment and a private config
// directory; nothing here reaches a server.
func run(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	e := map[string]string{"HOME": dir, "XDG_CONFIG_HOME": dir + "/cfg"}
	for k, v := range env {
		e[k] = v
	}
	var out, errb bytes.Buffer
	code = Main(args, IO{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(k string) string { return e[k] }})
	return code, out.String(), errb.String()
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "dn"`},
		{[]string{"env", "bogus"}, `unknown command "bogus" for "dn env"`},
		{[]string{"env", "create"}, "accepts 1 arg(s), received 0"},
		{[]string{"env", "create", "web-login", "--bad-flag"}, "unknown flag: --bad-flag"},
		{[]string{"env", "create", "web-login", "--timeout-sec", "soon"}, `invalid argument "soon"`},
		{[]string{"env", "create", "web-login", "--timeout-sec", "0"}, "--timeout-sec must be a positive number"},
		{[]string{"env", "create", "web-login", "--input", "novalue"}, `--input "novalue": expected KEY=VALUE`},
		{[]string{"env", "status", "a", "b"}, "accepts 1 arg(s), received 2"},
		{[]string{"env", "exec", "id"}, "requires at least 2 arg(s)"},
		{[]string{"env", "exec", "id", "--"}, "no command given"},
		{[]string{"sandbox", "create", "--env", "=x"}, `--env "=x": expected KEY=VALUE`},
		{[]string{"sandbox", "cp", "a.txt", "b.txt"}, "exactly one of <src> and <dst> must be a sandbox path"},
		{[]string{"sandbox", "cp", "sb1:/a", "sb2:/b"}, "exactly one of <src> and <dst> must be a sandbox path"},
		{[]string{"credits", "extra"}, `unknown command "extra" for "dn credits"`},
		{[]string{"--profile", "../x", "credits"}, "profile name"},
	} {
		code, _, stderr := run(t, nil, tc.args...)
		if code != ExitUsage {
			t.Errorf("dn %s: exit %d, want %d (stderr %q)", strings.Join(tc.args, " "), code, ExitUsage, stderr)
		}
		if !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "--help' for usage") {
			t.Errorf("dn %s: stderr %q lacks %q and the usage pointer", strings.Join(tc.args, " "), stderr, tc.want)
		}
	}
}

func TestMissingSettingsExit1WithWhatToDo(t *testing.T) {
	code, _, stderr := run(t, nil, "env", "list")
	if code != ExitError || !strings.Contains(stderr, "no API key is configured") || !strings.Contains(stderr, "dn login") {
		t.Fatalf("no key: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = run(t, map[string]string{"DREADNODE_API_KEY": "k"}, "task", "list")
	if code != ExitError || !strings.Contains(stderr, "no organization is configured") || !strings.Contains(stderr, "DREADNODE_ORG") {
		t.Fatalf("no org: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = run(t, map[string]string{"DREADNODE_API_KEY": "k", "DREADNODE_API_URL": "127.0.0.1:8080"}, "sandbox", "list")
	if code != ExitError || !strings.Contains(stderr, `"127.0.0.1:8080"`) || !strings.Contains(stderr, "Fix --api-url, DREADNODE_API_URL or the profile (from env)") {
		t.Fatalf("bad URL: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = run(t, map[string]string{"DREADNODE_API_KEY": "k", "DREADNODE_ORG": "o"}, "env", "exec", "e1", "--", "true")
	if code != ExitError || !strings.Contains(stderr, "no execute token is kept for environment e1") {
		t.Fatalf("no token: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"dn env delete e1", "dn env create <task_ref> --wait", "--token"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("lost-token message %q lacks %q", stderr, want)
		}
	}
}

func TestHelpAndCompletion(t *testing.T) {
	code, stdout, _ := run(t, nil, "--help")
	if code != 0 || !strings.Contains(stdout, "Exit codes:") || !strings.Contains(stdout, "3  timeout") {
		t.Fatalf("help: exit %d\n%s", code, stdout)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, stdout, stderr := run(t, nil, "completion", sh)
		if code != 0 || !strings.Contains(stdout, "dn") || len(stdout) < 500 {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", sh, code, len(stdout), stderr)
		}
	}
}

func TestRemotePath(t *testing.T) {
	for in, want := range map[string][2]string{
		"sb1:/tmp/a.txt": {"sb1", "/tmp/a.txt"},
		"sb1:rel":        {"", ""},
		"./x:/y":         {"", ""},
		"C:/x":           {"C", "/x"},
		"plain.txt":      {"", ""},
	} {
		id, p, ok := remotePath(in)
		if ok != (want[0] != "") || id != want[0] || p != want[1] {
			t.Errorf("remotePath(%q) = %q %q %v", in, id, p, ok)
		}
	}
}

// waiterFor returns a waiter writing to buf with no progress line.
func waiterFor(buf *bytes.Buffer, d time.Duration, longPoll bool) *waiter {
	now := time.Now()
	return &waiter{start: now, deadline: now.Add(d), longPoll: longPoll, out: buf, p: &progress{w: buf}, what: "x"}
}

func TestWaiterPrintsEachStateAndUsesLongPoll(t *testing.T) {
	var buf bytes.Buffer
	states := []string{"provisioning", "ready"}
	var asked []string
	w := waiterFor(&buf, time.Minute, true)
	final, err := w.run(context.Background(), "building", envFinal, func(_ context.Context, since string, hold time.Duration) (string, error) {
		asked = append(asked, since)
		if hold < time.Second {
			t.Errorf("long poll asked to hold %v", hold)
		}
		s := states[0]
		states = states[1:]
		return s, nil
	})
	if err != nil || final != "ready" {
		t.Fatalf("final %q, %v", final, err)
	}
	if strings.Join(asked, ",") != "building,provisioning" {
		t.Errorf("long polls since %v", asked)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "state=building elapsed=") || !strings.HasPrefix(lines[2], "state=ready elapsed=") {
		t.Fatalf("lines %q", lines)
	}
}

func TestWaiterFallsBackToBackoffWhenLongPollIsRefused(t *testing.T) {
	var buf bytes.Buffer
	var polls []time.Duration
	w := waiterFor(&buf, time.Minute, true)
	start := time.Now()
	final, err := w.run(context.Background(), "building", envFinal, func(_ context.Context, _ string, hold time.Duration) (string, error) {
		polls = append(polls, hold)
		if hold > 0 {
			return "", &client.APIError{StatusCode: 400, Envelope: apitypes.Error{Detail: "wait: unknown query parameter"}}
		}
		return "ready", nil
	})
	if err != nil || final != "ready" {
		t.Fatalf("final %q, %v", final, err)
	}
	if len(polls) != 2 || polls[0] == 0 || polls[1] != 0 {
		t.Fatalf("polls %v: want one refused long poll, then a plain poll", polls)
	}
	if d := time.Since(start); d < backoffMin {
		t.Fatalf("the plain poll came after %v, before the 1 s backoff", d)
	}
}

func TestWaiterDeadline(t *testing.T) {
	var buf bytes.Buffer
	w := waiterFor(&buf, 1500*time.Millisecond, false)
	n := 0
	state, err := w.run(context.Background(), "building", envFinal, func(context.Context, string, time.Duration) (string, error) {
		n++
		return "building", nil
	})
	var de *errDeadline
	if !errors.As(err, &de) || state != "building" {
		t.Fatalf("state %q, err %v", state, err)
	}
	if n < 1 || n > 2 {
		t.Fatalf("%d polls in 1.5 s with a 1 s → 2 s backoff", n)
	}
}

func TestWaiterInterrupted(t *testing.T) {
	var buf bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	w := waiterFor(&buf, time.Minute, true)
	_, err := w.run(ctx, "building", envFinal, func(ctx context.Context, _ string, _ time.Duration) (string, error) {
		cancel()
		return "", ctx.Err()
	})
	if !errors.Is(err, errInterrupted) {
		t.Fatalf("err %v, want errInterrupted", err)
	}
}
