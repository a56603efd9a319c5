package agent

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
)

func withPTY(req *connect.Request[process.StartRequest], cols, rows uint32) *connect.Request[process.StartRequest] {
	req.Msg.Pty = &process.PTY{Size: &process.PTY_Size{Cols: cols, Rows: rows}}
	return req
}

func ptyInput(b string) *process.ProcessInput {
	return &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte(b)}}
}

// A process started with pty runs in a terminal of the size asked for: its
// stdin, stdout and stderr are the terminal (tty names it, and both
// outputs arrive as pty data), which is its controlling terminal.
func TestPTYStartIsATerminal(t *testing.T) {
	a := startAgent(t)
	c := run(t, a, withPTY(startReq("", false, "sh", "-c", `tty; stty size; echo err >&2; [ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo all-tty; exec 3</dev/tty && echo ctty`), 100, 30))
	out := c.pty.String()
	for _, want := range []string{"/dev/pts/", "30 100\r\n", "err\r\n", "all-tty\r\n", "ctty\r\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("pty output %q lacks %q", out, want)
		}
	}
	if c.stdout.Len() != 0 || c.stderr.Len() != 0 {
		t.Errorf("a PTY process sent stdout %q, stderr %q; want all as pty", c.stdout.String(), c.stderr.String())
	}
	if c.end.GetExitCode() != 0 {
		t.Errorf("end %v", c.end)
	}
	// A later Connect replays it as pty data too.
	cst, err := a.proc.Connect(testCtx(t), connect.NewRequest(&process.ConnectRequest{Process: pidSel(c.pid)}))
	if err != nil {
		t.Fatal(err)
	}
	defer cst.Close()
	r := collect(t, cst.Receive, func() *process.ProcessEvent { return cst.Msg().GetEvent() }, nil)
	if r.pty.String() != out || r.stdout.Len() != 0 || r.end == nil {
		t.Errorf("replay: pty %q (want %q), stdout %q, end %v", r.pty.String(), out, r.stdout.String(), r.end)
	}
}

// Update resizes the terminal (the process reads the new size); pty input
// is typed into it (echoed by the terminal); Ctrl+D ends cat's input.
func TestPTYResizeAndInput(t *testing.T) {
	a := startAgent(t)
	ctx := testCtx(t)
	st, err := a.proc.Start(ctx, withPTY(startReq("", false, "sh", "-c", `read line; echo "got $line"; stty size; exec cat`), 80, 24))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() || st.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start event: %v", st.Err())
	}
	sel := pidSel(st.Msg().GetEvent().GetStart().GetPid())
	if _, err := a.proc.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: sel,
		Pty: &process.PTY{Size: &process.PTY_Size{Cols: 132, Rows: 50}}})); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if _, err := a.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: ptyInput("hello\n")})); err != nil {
		t.Fatalf("SendInput pty: %v", err)
	}
	c := collect(t, st.Receive, func() *process.ProcessEvent { return st.Msg().GetEvent() },
		func(c *collected) bool { return strings.Contains(c.pty.String(), "50 132\r\n") })
	if out := c.pty.String(); !strings.Contains(out, "hello\r\n") || !strings.Contains(out, "got hello\r\n") {
		t.Fatalf("pty output %q: want the echo of the input and the line read", out)
	}

	// stdin and CloseStdin are refused for a PTY process: its input is pty.
	_, err = a.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel,
		Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("x")}}}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "pty") {
		t.Errorf("stdin to a PTY process: want failed_precondition naming pty, got %v", err)
	}
	if _, err := a.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("CloseStdin of a PTY process: want failed_precondition, got %v", err)
	}
	// A size out of range names the field.
	_, err = a.proc.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: sel, Pty: &process.PTY{Size: &process.PTY_Size{Cols: 0, Rows: 10}}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "pty.size.cols") {
		t.Errorf("Update with cols 0: want invalid_argument naming pty.size.cols, got %v", err)
	}

	// Ctrl+D at the start of a line is EOF for cat: it ends.
	if _, err := a.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: ptyInput("\x04")})); err != nil {
		t.Fatalf("SendInput ^D: %v", err)
	}
	rest := collect(t, st.Receive, func() *process.ProcessEvent { return st.Msg().GetEvent() }, nil)
	if rest.end == nil || rest.end.GetExitCode() != 0 {
		t.Fatalf("after ^D: end %v, err %v", rest.end, st.Err())
	}
	// Ended: its terminal is closed.
	_, err = a.proc.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: sel, Pty: &process.PTY{Size: &process.PTY_Size{Cols: 10, Rows: 10}}}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("Update after the end: want failed_precondition, got %v", err)
	}
}

// A process without pty has no terminal: pty input and a resize are refused.
func TestPTYRefusedWithoutOne(t *testing.T) {
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
	sel := pidSel(st.Msg().GetEvent().GetStart().GetPid())
	if _, err := a.proc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: ptyInput("x")})); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("pty input without a PTY: want failed_precondition, got %v", err)
	}
	if _, err := a.proc.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: sel, Pty: &process.PTY{Size: &process.PTY_Size{Cols: 10, Rows: 10}}})); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("resize without a PTY: want failed_precondition, got %v", err)
	}
	// Update without pty changes nothing and succeeds, as envd's.
	if _, err := a.proc.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: sel})); err != nil {
		t.Errorf("Update without pty: %v", err)
	}
	if _, err := a.proc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	// A start with a PTY of size 0 rows names the field.
	bad, err := a.proc.Start(ctx, withPTY(startReq("", false, "true"), 80, 0))
	if err == nil {
		for bad.Receive() {
		}
		err = bad.Err()
		bad.Close()
	}
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "pty.size.rows") {
		t.Fatalf("start with pty rows 0: want invalid_argument naming pty.size.rows, got %v", err)
	}
}

// A fork that fails for want of processes (EAGAIN: the pids limit) or
// memory is the sandbox's limit, resource_exhausted; one that fails on the
// command (ENOENT, EACCES) stays the caller's invalid_argument.
func TestForkErrorsAreClassified(t *testing.T) {
	for _, c := range []struct {
		errno syscall.Errno
		limit bool
		says  string
	}{
		{syscall.EAGAIN, true, "process limit"},
		{syscall.ENOMEM, true, "out of memory"},
		{syscall.ENOENT, false, "no such file"},
		{syscall.EACCES, false, "permission denied"},
	} {
		err := forkError(&os.PathError{Op: "fork/exec", Path: "/bin/x", Err: c.errno})
		var le *limitError
		if errors.As(err, &le) != c.limit || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %T %q, want limit %v saying %q", c.errno, err, err, c.limit, c.says)
		}
	}
}
