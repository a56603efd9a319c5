package envd

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
)

// Headers of the agent's extensions of envd's process service (sent only
// when Client.Agent is set; envd ignores unknown headers).
const (
	// OnceHeader on Connect: send what the process printed so far (and its
	// end, if it ended), then end the stream instead of following it.
	OnceHeader = "Dn-Once"
	// EndedHeader on List: list ended processes too; the answer's
	// EndedHeader holds "pid=code,..." for those.
	EndedHeader = "Dn-Ended"
)

// StartRequest is envd's Start of cmd (its config; the caller sets stdin and tag).
func (c *Client) StartRequest(cmd []string, env map[string]string, cwd string) *connect.Request[process.StartRequest] {
	cfg := &process.ProcessConfig{Cmd: cmd[0], Args: cmd[1:], Envs: env}
	if cwd != "" {
		cfg.Cwd = proto.String(cwd)
	}
	return withAuth(c, connect.NewRequest(&process.StartRequest{Process: cfg, Stdin: proto.Bool(false)}))
}

// Start opens a Start stream (see StartRequest).
func (c *Client) Start(ctx context.Context, req *connect.Request[process.StartRequest]) (*connect.ServerStreamForClient[process.StartResponse], error) {
	return c.processes().Start(ctx, req)
}

// Exec runs req with envd's process.Process/Start server stream: stdout
// and stderr are collected until the end event's exit code. A command
// still running at req.Timeout is killed (SIGKILL) and reported as
// compute.KindTimeout with the output so far.
func (c *Client) Exec(ctx context.Context, req compute.ExecRequest) (compute.ExecResult, error) {
	const op = "exec"
	start := time.Now() // a timeout's message states the time that passed
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return compute.ExecResult{}, compute.Errorf(compute.KindInvalid, op, nil, "no command given")
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if req.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
	}
	defer cancel()
	stream, err := c.Start(runCtx, c.StartRequest(req.Cmd, req.Env, req.Cwd))
	if err != nil {
		return compute.ExecResult{}, c.connectError(ctx, runCtx, op, req, start, err, false)
	}
	defer stream.Close()
	var (
		pid     uint32
		started bool
		ended   bool
		end     *process.ProcessEvent_EndEvent
	)
	out, errOut := compute.CappedBuffer{Max: c.maxExecOutput()}, compute.CappedBuffer{Max: c.maxExecOutput()}
	for !ended && stream.Receive() {
		ev := stream.Msg().GetEvent()
		switch e := ev.GetEvent().(type) {
		case *process.ProcessEvent_Start:
			started, pid = true, e.Start.GetPid()
		case *process.ProcessEvent_Data:
			_, _ = out.Write(e.Data.GetStdout())
			_, _ = errOut.Write(e.Data.GetStderr())
			_, _ = out.Write(e.Data.GetPty())
		case *process.ProcessEvent_End:
			ended, end = true, e.End
		}
	}
	res := compute.ExecResult{Stdout: out.Bytes(), Stderr: errOut.Bytes(), Truncated: out.Truncated() || errOut.Truncated()}
	if ended {
		res.ExitCode = int(end.GetExitCode())
		if !end.GetExited() && end.Error != nil && res.ExitCode == 0 {
			res.ExitCode = -1
		}
		if !end.GetExited() && end.GetError() != "" {
			res.Stderr = append(res.Stderr, []byte(end.GetError())...)
		}
		return res, nil
	}
	serr := stream.Err()
	if serr == nil {
		serr = errors.New("the output stream ended without an end event")
	}
	// The deadline may surface first on envd's side (connect sends it along
	// as Connect-Timeout-Ms), before our own context expires.
	timedOut := runCtx.Err() != nil || (req.Timeout > 0 && connect.CodeOf(serr) == connect.CodeDeadlineExceeded && ctx.Err() == nil)
	if started && (timedOut || ctx.Err() != nil) {
		c.kill(ctx, pid)
	}
	return res, c.connectError(ctx, runCtx, op, req, start, serr, started)
}

// kill sends SIGKILL to a process left running after its caller gave up.
func (c *Client) kill(ctx context.Context, pid uint32) {
	if pid == 0 {
		return
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	r := withAuth(c, connect.NewRequest(&process.SendSignalRequest{
		Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}},
		Signal:  process.Signal_SIGNAL_SIGKILL,
	}))
	_, _ = c.processes().SendSignal(kctx, r)
}

// connectError maps a failed call to envd's process service (req's command,
// begun at start) to the user's terms. A call that could not connect at
// all is KindUnavailable before any timeout is considered: Connect reports
// a dial timeout as CodeDeadlineExceeded, and a command that never reached
// the daemon did not time out.
func (c *Client) connectError(ctx, runCtx context.Context, op string, req compute.ExecRequest, start time.Time, err error, started bool) error {
	cmd := strings.Join(req.Cmd, " ")
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return compute.Errorf(compute.KindTimeout, op, err, "command %q did not finish before the caller's deadline%s", cmd, after(start))
		}
		return compute.Errorf(compute.KindInternal, op, ctx.Err(), "command %q was cancelled", cmd)
	}
	if dial := dialError(err); dial != nil {
		return c.unreachable(ctx, op, err, dial)
	}
	if runCtx.Err() != nil || (req.Timeout > 0 && connect.CodeOf(err) == connect.CodeDeadlineExceeded) {
		if !started {
			return compute.Errorf(compute.KindTimeout, op, err, "command %q was not reported started within its timeout of %s: %s in %s sent no start event%s",
				cmd, req.Timeout, c.daemon(), c.Name, after(start))
		}
		return compute.Errorf(compute.KindTimeout, op, err, "command %q was killed after %s: it did not finish within its timeout of %s",
			cmd, elapsed(start), req.Timeout)
	}
	msg := connectMessage(err)
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return compute.Errorf(compute.KindAuth, op, err, "%s in %s refused the access token or user: %s", c.daemon(), c.Name, msg)
	case connect.CodeDeadlineExceeded:
		return compute.Errorf(compute.KindTimeout, op, err, "%s in %s did not answer in time%s: %s", c.daemon(), c.Name, after(start), msg)
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeFailedPrecondition:
		return compute.Errorf(compute.KindInvalid, op, err, "command %q could not run in %s: %s", cmd, c.Name, msg)
	case connect.CodeResourceExhausted:
		if connect.IsWireError(err) {
			// Said by the daemon: the sandbox is out of processes (its pids
			// limit), memory or descriptors. The caller can act on it (end
			// processes), so not a provider failure.
			return compute.Errorf(compute.KindResourceLimit, op, err, "command %q could not start in %s: %s", cmd, c.Name, msg)
		}
		// Our own read bound refused what the daemon sent.
		return compute.Errorf(compute.KindInternal, op, err, "%s in %s sent more than the %d bytes one message may hold: %s", c.daemon(), c.Name, compute.MaxMessageBytes, msg)
	case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeUnimplemented:
		// Typical of E2B's proxy answering for a sandbox that is gone or paused.
		return c.diagnose(ctx, op, compute.Errorf(compute.KindUnavailable, op, err, "cannot reach %s in %s: %s", c.daemon(), c.Name, msg))
	}
	if !started {
		return compute.Errorf(compute.KindInvalid, op, err, "command %q could not be started in %s: %s", cmd, c.Name, msg)
	}
	return compute.Errorf(compute.KindInternal, op, err, "command %q in %s failed: %s", cmd, c.Name, msg)
}

// elapsed is the time since start as a message states it: to the
// millisecond under a second, else to a tenth of a second ("1m0.2s").
func elapsed(start time.Time) time.Duration {
	d := time.Since(start)
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// after is " (after <elapsed>)" for a message, "" when start is unknown.
func after(start time.Time) string {
	if start.IsZero() {
		return ""
	}
	return " (after " + elapsed(start).String() + ")"
}

// ExitCode reads an end event the way a shell would: 128+N after signal N.
func ExitCode(end *process.ProcessEvent_EndEvent) int { return exitCode(end) }

func exitCode(end *process.ProcessEvent_EndEvent) int {
	if end.GetExited() {
		return int(end.GetExitCode())
	}
	for name, n := range map[string]int{"hangup": 1, "interrupt": 2, "killed": 9, "terminated": 15} {
		if strings.HasSuffix(end.GetStatus(), "signal: "+name) {
			return 128 + n
		}
	}
	if c := int(end.GetExitCode()); c != 0 {
		return c
	}
	return -1
}

// events forwards a process stream's events to emit until the end event.
// It reports whether the end was seen.
func events(receive func() bool, msg func() *process.ProcessEvent, emit compute.Emit) (pid uint32, ended bool, err error) {
	for receive() {
		switch e := msg().GetEvent().(type) {
		case *process.ProcessEvent_Start:
			pid = e.Start.GetPid()
			err = emit(compute.ProcessEvent{Type: compute.EventStart, PID: int(pid)})
		case *process.ProcessEvent_Data:
			if b := e.Data.GetStdout(); len(b) > 0 {
				err = emit(compute.ProcessEvent{Type: compute.EventStdout, Data: b})
			} else if b := e.Data.GetPty(); len(b) > 0 {
				err = emit(compute.ProcessEvent{Type: compute.EventStdout, Data: b})
			} else if b := e.Data.GetStderr(); len(b) > 0 {
				err = emit(compute.ProcessEvent{Type: compute.EventStderr, Data: b})
			}
		case *process.ProcessEvent_End:
			return pid, true, emit(compute.ProcessEvent{Type: compute.EventExit, ExitCode: exitCode(e.End)})
		}
		if err != nil {
			return pid, false, err
		}
	}
	return pid, false, nil
}

// ExecStream runs req with envd's Start stream, emitting its events. The
// command is killed (SIGKILL) when ctx ends, the timeout passes or emit fails.
func (c *Client) ExecStream(ctx context.Context, req compute.ExecRequest, stdin io.Reader, emit compute.Emit) error {
	const op = "exec"
	start := time.Now()
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return compute.Errorf(compute.KindInvalid, op, nil, "no command given")
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if req.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
	}
	defer cancel()
	sr := c.StartRequest(req.Cmd, req.Env, req.Cwd)
	sr.Msg.Stdin = proto.Bool(stdin != nil)
	stream, err := c.Start(runCtx, sr)
	if err != nil {
		return c.connectError(ctx, runCtx, op, req, start, err, false)
	}
	defer stream.Close()
	started := false
	pid, ended, err := events(stream.Receive, func() *process.ProcessEvent { return stream.Msg().GetEvent() },
		func(ev compute.ProcessEvent) error {
			if ev.Type == compute.EventStart && stdin != nil && !started {
				started = true
				go func() { _ = c.writeStdin(runCtx, ev.PID, stdin, true) }()
			}
			return emit(ev)
		})
	if ended {
		return err
	}
	c.kill(ctx, pid)
	if err != nil {
		return err
	}
	serr := stream.Err()
	if serr == nil {
		serr = errors.New("the output stream ended without an end event")
	}
	return c.connectError(ctx, runCtx, op, req, start, serr, pid != 0)
}

func selector(pid int) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: uint32(pid)}}
}

// bodyError is a failure to read the input (not envd's).
type bodyError struct{ err error }

func (e bodyError) Error() string { return e.err.Error() }

func (c *Client) writeStdin(ctx context.Context, pid int, r io.Reader, eof bool) error {
	client := c.processes()
	buf := make([]byte, 64<<10)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			req := withAuth(c, connect.NewRequest(&process.SendInputRequest{Process: selector(pid),
				Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: buf[:n]}}}))
			if _, err := client.SendInput(ctx, req); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return bodyError{rerr}
		}
	}
	if !eof {
		return nil
	}
	_, err := client.CloseStdin(ctx, withAuth(c, connect.NewRequest(&process.CloseStdinRequest{Process: selector(pid)})))
	return err
}

// processError maps an envd answer about one process to the user's terms.
func (c *Client) processError(ctx context.Context, op string, pid int, err error) error {
	msg := connectMessage(err)
	switch connect.CodeOf(err) {
	case connect.CodeNotFound:
		return compute.Errorf(compute.KindNotFound, op, err, "no running process with pid %d in %s", pid, c.Name)
	case connect.CodeFailedPrecondition, connect.CodeInvalidArgument:
		return compute.Errorf(compute.KindConflict, op, err, "process %d in %s: %s", pid, c.Name, msg)
	}
	return c.connectError(ctx, ctx, op, compute.ExecRequest{Cmd: []string{"pid " + strconv.Itoa(pid)}}, time.Time{}, err, true)
}

// StartProcess starts a process that runs on after the start event, when
// the stream is closed.
func (c *Client) StartProcess(ctx context.Context, req compute.ProcessRequest) (compute.Process, error) {
	const op = "start process"
	start := time.Now()
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return compute.Process{}, compute.Errorf(compute.KindInvalid, op, nil, "no command given")
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sr := c.StartRequest(req.Cmd, req.Env, req.Cwd)
	sr.Msg.Stdin = proto.Bool(req.Stdin)
	if req.Tag != "" {
		sr.Msg.Tag = proto.String(req.Tag)
	}
	stream, err := c.Start(sctx, sr)
	if err != nil {
		return compute.Process{}, c.connectError(ctx, sctx, op, compute.ExecRequest{Cmd: req.Cmd}, start, err, false)
	}
	defer stream.Close()
	for stream.Receive() {
		if st := stream.Msg().GetEvent().GetStart(); st != nil {
			return compute.Process{PID: int(st.GetPid()), Tag: req.Tag, Cmd: req.Cmd, Running: true, StartedAt: time.Now().UTC().Truncate(time.Second)}, nil
		}
	}
	serr := stream.Err()
	if serr == nil {
		serr = errors.New("no start event")
	}
	return compute.Process{}, c.connectError(ctx, sctx, op, compute.ExecRequest{Cmd: req.Cmd}, start, serr, false)
}

// ListProcesses lists the running processes (envd lists no others) and,
// from the agent, the ended ones it keeps, with their exit codes.
func (c *Client) ListProcesses(ctx context.Context) ([]compute.Process, error) {
	const op = "list processes"
	req := withAuth(c, connect.NewRequest(&process.ListRequest{}))
	if c.Agent {
		req.Header().Set(EndedHeader, "1")
	}
	res, err := c.processes().List(ctx, req)
	if err != nil {
		return nil, c.connectError(ctx, ctx, op, compute.ExecRequest{Cmd: []string{"list"}}, time.Time{}, err, true)
	}
	ended := map[int]int{}
	for _, kv := range strings.Split(res.Header().Get(EndedHeader), ",") {
		pid, code, ok := strings.Cut(kv, "=")
		p, perr := strconv.Atoi(pid)
		n, cerr := strconv.Atoi(code)
		if ok && perr == nil && cerr == nil {
			ended[p] = n
		}
	}
	out := make([]compute.Process, 0, len(res.Msg.GetProcesses()))
	for _, pi := range res.Msg.GetProcesses() {
		cmd := append([]string{pi.GetConfig().GetCmd()}, pi.GetConfig().GetArgs()...)
		p := compute.Process{PID: int(pi.GetPid()), Tag: pi.GetTag(), Cmd: cmd, Running: true}
		if code, ok := ended[p.PID]; ok {
			p.Running, p.ExitCode = false, &code
		}
		out = append(out, p)
	}
	return out, nil
}

var errStop = errors.New("stop")

// ProcessOutput emits a process's output with envd's Connect. envd sends
// live output only (it keeps no history), so with follow false the stream
// ends after the start event; the agent replays what it kept first and,
// with follow false, ends after the output so far (and the end, if any).
func (c *Client) ProcessOutput(ctx context.Context, pid int, follow bool, emit compute.Emit) error {
	const op = "process output"
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := withAuth(c, connect.NewRequest(&process.ConnectRequest{Process: selector(pid)}))
	send := emit
	if !follow && c.Agent {
		req.Header().Set(OnceHeader, "1")
	} else if !follow {
		send = func(ev compute.ProcessEvent) error {
			if err := emit(ev); err != nil {
				return err
			}
			return errStop
		}
	}
	stream, err := c.processes().Connect(cctx, req)
	if err != nil {
		return c.processError(ctx, op, pid, err)
	}
	defer stream.Close()
	_, ended, err := events(stream.Receive, func() *process.ProcessEvent { return stream.Msg().GetEvent() }, send)
	if ended || errors.Is(err, errStop) {
		return nil
	}
	if err != nil {
		return err
	}
	if serr := stream.Err(); serr != nil && ctx.Err() == nil {
		return c.processError(ctx, op, pid, serr)
	}
	return nil
}

// WriteStdin copies data to a process's stdin with SendInput and, with
// eof, closes it with CloseStdin.
func (c *Client) WriteStdin(ctx context.Context, pid int, data io.Reader, eof bool) error {
	const op = "write stdin"
	if data == nil {
		data = strings.NewReader("")
	}
	if err := c.writeStdin(ctx, pid, data, eof); err != nil {
		if be := (bodyError{}); errors.As(err, &be) {
			return compute.Errorf(compute.KindInvalid, op, err, "reading the input failed: %v", be.err)
		}
		return c.processError(ctx, op, pid, err)
	}
	return nil
}

// signals are the signals SignalProcess sends by name: envd sends SIGTERM
// and SIGKILL only, the agent the others too.
var signals = map[string]process.Signal{"SIGTERM": process.Signal_SIGNAL_SIGTERM, "SIGKILL": process.Signal_SIGNAL_SIGKILL,
	"SIGINT": process.Signal(2), "SIGHUP": process.Signal(1)}

// SignalProcess sends sig to a process (and its group).
func (c *Client) SignalProcess(ctx context.Context, pid int, sig string) error {
	const op = "signal"
	s, ok := signals[sig]
	if ok && !c.Agent && sig != "SIGTERM" && sig != "SIGKILL" {
		ok = false
	}
	if !ok {
		if c.Agent {
			return compute.Errorf(compute.KindInvalid, op, nil, "signal must be SIGTERM, SIGKILL, SIGINT or SIGHUP, got %q", sig)
		}
		return compute.Errorf(compute.KindInvalid, op, nil, "E2B's envd can send SIGTERM and SIGKILL only, not %s", sig)
	}
	req := withAuth(c, connect.NewRequest(&process.SendSignalRequest{Process: selector(pid), Signal: s}))
	if _, err := c.processes().SendSignal(ctx, req); err != nil {
		return c.processError(ctx, op, pid, err)
	}
	return nil
}
