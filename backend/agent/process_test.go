package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
)

// collected is what a Start or Connect stream delivered.
type collected struct {
	pid            uint32
	stdout, stderr bytes.Buffer
	pty            bytes.Buffer
	end            *process.ProcessEvent_EndEvent
}

func collect(t *testing.T, receive func() bool, msg func() *process.ProcessEvent, stop func(*collected) bool) *collected {
	t.Helper()
	c := &collected{}
	for receive() {
		switch e := msg().GetEvent().(type) {
		case *process.ProcessEvent_Start:
			c.pid = e.Start.GetPid()
		case *process.ProcessEvent_Data:
			c.stdout.Write(e.Data.GetStdout())
			c.stderr.Write(e.Data.GetStderr())
			c.pty.Write(e.Data.GetPty())
		case *process.ProcessEvent_End:
			c.end = e.End
			return c
		}
		if stop != nil && stop(c) {
			return c
		}
	}
	return c
}

func startReq(tag string, stdin bool, cmd string, args ...string) *connect.Request[process.StartRequest] {
	r := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: cmd, Args: args}, Stdin: proto.Bool(stdin)})
	if tag != "" {
		r.Msg.Tag = proto.String(tag)
	}
	return r
}

func run(t *testing.T, a *agentEnv, req *connect.Request[process.StartRequest]) *collected {
	t.Helper()
	st, err := a.proc.Start(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := collect(t, st.Receive, func() *process.ProcessEvent { return st.Msg().GetEvent() }, nil)
	if c.end == nil {
		t.Fatalf("no end event: %v", st.Err())
	}
	return c
}

func TestStartStreamsOutputAndExitCode(t *testing.T) {
	a := startAgent(t)
	req := startReq("", false, "sh", "-c", `echo "out $GREETING"; echo err >&2; pwd; exit 3`)
	req.Msg.Process.Envs = map[string]string{"GREETING": "hi"}
	req.Msg.Process.Cwd = proto.String("/tmp")
	c := run(t, a, req)
	if c.pid == 0 {
		t.Error("no start event with a pid")
	}
	if got := c.stdout.String(); got != "out hi\n/tmp\n" {
		t.Errorf("stdout %q", got)
	}
	if got := c.stderr.String(); got != "err\n" {
		t.Errorf("stderr %q", got)
	}
	if !c.end.GetExited() || c.end.GetExitCode() != 3 {
		t.Errorf("end %v, want exited with 3", c.end)
	}
}

func TestStartRefusesWhatCannotRun(t *testing.T) {
	a := startAgent(t)
	for name, req := range map[string]*connect.Request[process.StartRequest]{
		"missing command": startReq("", false, "no-such-command-here"),
		"empty command":   startReq("", false, ""),
		"missing cwd": func() *connect.Request[process.StartRequest] {
			r := startReq("", false, "true")
			r.Msg.Process.Cwd = proto.String("/no/such/dir")
			return r
		}(),
	} {
		st, err := a.proc.Start(testCtx(t), req)
		if err == nil {
			for st.Receive() {
			}
			err = st.Err()
			st.Close()
		}
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: want invalid_argument, got %v", name, err)
		}
	}
}

func TestBackgroundProcessReplaysOnConnect(t *testing.T) {
	a := startAgent(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	// Prints, then waits for a file before printing more and ending.
	gate := t.TempDir() + "/go"
	st, err := a.proc.Start(ctx, startReq("bg", false, "sh", "-c",
		`echo first; echo second >&2; while [ ! -e `+gate+` ]; do sleep 0.01; done; echo last`))
	if err != nil {
		t.Fatal(err)
	}
	c := collect(t, st.Receive, func() *process.ProcessEvent { return st.Msg().GetEvent() },
		func(c *collected) bool { return c.stdout.Len() > 0 })
	cancel() // the starter leaves; the process runs on
	st.Close()
	pid := c.pid

	// A new client, by tag: the output so far is replayed, then it follows.
	cst, err := a.proc.Connect(testCtx(t), connect.NewRequest(&process.ConnectRequest{
		Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: "bg"}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cst.Close()
	got := collect(t, cst.Receive, func() *process.ProcessEvent { return cst.Msg().GetEvent() },
		func(c *collected) bool { return c.stderr.Len() > 0 && c.stdout.Len() > 0 })
	if got.pid != pid || got.stdout.String() != "first\n" || got.stderr.String() != "second\n" {
		t.Fatalf("replay: pid %d (want %d), stdout %q, stderr %q", got.pid, pid, got.stdout.String(), got.stderr.String())
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rest := collect(t, cst.Receive, func() *process.ProcessEvent { return cst.Msg().GetEvent() }, nil)
	if rest.stdout.String() != "last\n" || rest.end == nil || rest.end.GetExitCode() != 0 {
		t.Fatalf("live part: stdout %q, end %v, err %v", rest.stdout.String(), rest.end, cst.Err())
	}

	// After its end, by pid: the whole output and the end again.
	after, err := a.proc.Connect(testCtx(t), connect.NewRequest(&process.ConnectRequest{Process: pidSel(pid)}))
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	all := collect(t, after.Receive, func() *process.ProcessEvent { return after.Msg().GetEvent() }, nil)
	if all.stdout.String() != "first\nlast\n" || all.end == nil {
		t.Fatalf("after the end: stdout %q, end %v", all.stdout.String(), all.end)
	}
}

func TestReplayKeepsTheLastMiB(t *testing.T) {
	a := startAgent(t)
	// 3 MiB of output, then a marker.
	c := run(t, a, startReq("", false, "sh", "-c", `head -c 3145728 /dev/zero | tr "\0" x; echo; echo END`))
	cst, err := a.proc.Connect(testCtx(t), connect.NewRequest(&process.ConnectRequest{Process: pidSel(c.pid)}))
	if err != nil {
		t.Fatal(err)
	}
	defer cst.Close()
	r := collect(t, cst.Receive, func() *process.ProcessEvent { return cst.Msg().GetEvent() }, nil)
	n := r.stdout.Len()
	if n < OutputKeepBytes-chunkBytes || n > OutputKeepBytes+chunkBytes || !strings.HasSuffix(r.stdout.String(), "x\nEND\n") {
		t.Fatalf("replayed %d bytes (want about %d, ending with END)", n, OutputKeepBytes)
	}
}

func pidSel(pid uint32) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
}

func TestStdinSendStreamAndClose(t *testing.T) {
	a := startAgent(t)
	ctx := testCtx(t)
	st, err := a.proc.Start(ctx, startReq("", true, "cat"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() || st.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start event: %v", st.Err())
	}
	pid := st.Msg().GetEvent().GetStart().GetPid()
	if _, err := a.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pidSel(pid),
		Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("hello ")}}})); err != nil {
		t.Fatal(err)
	}
	in := a.proc.StreamInput(ctx)
	_ = in.Send(&process.StreamInputRequest{Event: &process.StreamInputRequest_Start{Start: &process.StreamInputRequest_StartEvent{Process: pidSel(pid)}}})
	for _, s := range []string{"streamed ", "world"} {
		_ = in.Send(&process.StreamInputRequest{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{
			Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte(s)}}}}})
	}
	if _, err := in.CloseAndReceive(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(pid)})); err != nil {
		t.Fatal(err)
	}
	c := collect(t, st.Receive, func() *process.ProcessEvent { return st.Msg().GetEvent() }, nil)
	if c.stdout.String() != "hello streamed world" || c.end == nil || c.end.GetExitCode() != 0 {
		t.Fatalf("cat printed %q, end %v", c.stdout.String(), c.end)
	}
	// Its stdin is closed now: a second close, and input, are refused.
	if _, err := a.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(pid)})); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("second close: %v", err)
	}
}

func TestSignalAndList(t *testing.T) {
	a := startAgent(t)
	ctx := testCtx(t)
	st, err := a.proc.Start(ctx, startReq("sleeper", false, "sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() {
		t.Fatal(st.Err())
	}
	pid := st.Msg().GetEvent().GetStart().GetPid()
	list, err := a.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range list.Msg.GetProcesses() {
		if p.GetPid() == pid && p.GetTag() == "sleeper" && p.GetConfig().GetCmd() == "sleep" {
			found = true
		}
	}
	if !found {
		t.Fatalf("pid %d (tag sleeper) not in %v", pid, list.Msg.GetProcesses())
	}
	if _, err := a.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pidSel(pid), Signal: process.Signal_SIGNAL_SIGTERM})); err != nil {
		t.Fatal(err)
	}
	c := collect(t, st.Receive, func() *process.ProcessEvent { return st.Msg().GetEvent() }, nil)
	if c.end == nil || c.end.GetExited() || c.end.GetExitCode() != 128+15 || !strings.Contains(c.end.GetStatus(), "terminated") {
		t.Fatalf("end after SIGTERM: %v", c.end)
	}
	list, _ = a.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
	for _, p := range list.Msg.GetProcesses() {
		if p.GetPid() == pid {
			t.Errorf("ended process %d still listed", pid)
		}
	}
	if _, err := a.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pidSel(999999), Signal: process.Signal_SIGNAL_SIGKILL})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("signal to an unknown pid: %v", err)
	}
	// SIGINT is beyond envd's enum, as a number.
	st2, err := a.proc.Start(ctx, startReq("", false, "sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	st2.Receive()
	pid2 := st2.Msg().GetEvent().GetStart().GetPid()
	if _, err := a.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pidSel(pid2), Signal: process.Signal(syscall.SIGINT)})); err != nil {
		t.Fatal(err)
	}
	c2 := collect(t, st2.Receive, func() *process.ProcessEvent { return st2.Msg().GetEvent() }, nil)
	if c2.end == nil || c2.end.GetExitCode() != 128+2 {
		t.Fatalf("end after SIGINT: %v", c2.end)
	}
}

// TestOrphansAreReaped: a command leaving 30 orphans behind; with the agent
// as their subreaper none stays a zombie.
func TestOrphansAreReaped(t *testing.T) {
	a := startAgent(t)
	run(t, a, startReq("", false, "sh", "-c", `for i in $(seq 30); do (sleep 0.05 &); done`))
	eventually(t, 10*time.Second, func() error {
		if z := zombieChildren(); len(z) > 0 {
			return fmt.Errorf("zombie children of the agent: %v", z)
		}
		if n := len(children()); n > 0 {
			return fmt.Errorf("%d children still running", n)
		}
		return nil
	})
}

// children lists the pids whose parent is this process, with their state.
func children() map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	me := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(me) {
			out[pid] = f[0]
		}
	}
	return out
}

func zombieChildren() []int {
	var z []int
	for pid, st := range children() {
		if st == "Z" {
			z = append(z, pid)
		}
	}
	return z
}

// TestBasicAuthPicksTheUser: "Authorization: Basic nobody:" runs the
// process as nobody (this test runs as root); a user /etc/passwd lacks runs
// as the agent's own user.
func TestBasicAuthPicksTheUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test needs root (it starts a process as nobody)")
	}
	a := startAgent(t)
	for user, want := range map[string]string{"nobody": "65534", "no-such-user-here": "0"} {
		req := startReq("", false, "id", "-u")
		req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
		if got := strings.TrimSpace(run(t, a, req).stdout.String()); got != want {
			t.Errorf("user %s: id -u printed %q, want %s", user, got, want)
		}
	}
}

// The Start stream gets every byte however far it falls behind (the
// process waits, as on a pipe), and a replay keeps at least the last MiB.
func TestStartStreamLosesNothing(t *testing.T) {
	a := startAgent(t)
	st, err := a.proc.Start(testCtx(t), startReq("", false, "sh", "-c", `head -c 33554432 /dev/zero | tr "\0" x`))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := 0
	for st.Receive() {
		if d := st.Msg().GetEvent().GetData(); d != nil {
			if n == 0 {
				// A reader that falls behind (not synchronisation: whatever
				// the process does meanwhile, every byte must arrive).
				time.Sleep(300 * time.Millisecond)
			}
			n += len(d.GetStdout())
		}
		if st.Msg().GetEvent().GetEnd() != nil {
			break
		}
	}
	if n != 32<<20 {
		t.Fatalf("the Start stream delivered %d bytes of 32 MiB (more than socket buffers hold)", n)
	}
}

// The agent's extensions: Dn-Once replays and ends without following a
// running process; Dn-Ended lists ended processes with their exit codes.
func TestOnceAndEndedExtensions(t *testing.T) {
	a := startAgent(t)
	ctx := testCtx(t)
	st, err := a.proc.Start(ctx, startReq("", false, "sh", "-c", "echo up; exec sleep 600"))
	if err != nil {
		t.Fatal(err)
	}
	running := collect(t, st.Receive, func() *process.ProcessEvent { return st.Msg().GetEvent() },
		func(c *collected) bool { return c.stdout.String() == "up\n" })
	st.Close()
	defer func() {
		_, _ = a.proc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pidSel(running.pid), Signal: process.Signal_SIGNAL_SIGKILL}))
	}()
	ended := run(t, a, startReq("", false, "sh", "-c", "exit 3"))
	req := connect.NewRequest(&process.ConnectRequest{Process: pidSel(running.pid)})
	req.Header().Set(OnceHeader, "1")
	cst, err := a.proc.Connect(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	r := collect(t, cst.Receive, func() *process.ProcessEvent { return cst.Msg().GetEvent() }, nil)
	cst.Close()
	if r.stdout.String() != "up\n" || r.end != nil || cst.Err() != nil {
		t.Fatalf("Dn-Once: %q, end %v, err %v", r.stdout.String(), r.end, cst.Err())
	}
	lreq := connect.NewRequest(&process.ListRequest{})
	lreq.Header().Set(EndedHeader, "1")
	res, err := a.proc.List(ctx, lreq)
	if err != nil {
		t.Fatal(err)
	}
	pids := map[uint32]bool{}
	for _, p := range res.Msg.GetProcesses() {
		pids[p.GetPid()] = true
	}
	if !pids[running.pid] || !pids[ended.pid] || !strings.Contains(res.Header().Get(EndedHeader), fmt.Sprintf("%d=3", ended.pid)) {
		t.Fatalf("Dn-Ended list %v, header %q", pids, res.Header().Get(EndedHeader))
	}
	plain, err := a.proc.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plain.Msg.GetProcesses() {
		if p.GetPid() == ended.pid {
			t.Fatal("envd's List (no header) lists an ended process")
		}
	}
}

// A write that would trim past the oldest chunk waits for every chunk it
// would drop that the owner has not sent, not only the oldest one.
func TestOutputLogKeepsEveryUnsentChunk(t *testing.T) {
	l := newOutputLog()
	l.write(stdoutStream, make([]byte, 10)) // seq 0
	l.ack(1)                                // seq 0 sent
	l.write(stdoutStream, make([]byte, 10)) // seq 1, not sent
	done := make(chan struct{})
	go func() { l.write(stdoutStream, make([]byte, OutputKeepBytes)); close(done) }() // would drop seq 0 and 1
	select {
	case <-done:
	case <-time.After(200 * time.Millisecond): // the write is held, as it must be
	}
	if chunks, _, _ := l.since(1); len(chunks) == 0 || chunks[0].seq != 1 {
		t.Fatalf("seq 1 was dropped before the owner sent it")
	}
	l.ack(2)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the write stayed held after the owner sent every chunk")
	}
}
