package e2b

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
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/envdpb/process"
)

// Processes on E2B go through envd's process.Process service. envd keeps no
// output history: ProcessOutput delivers what a process prints from the
// moment it connects (no replay), unlike the Docker provider.

// withAuth sets the access token envd expects on a connect request.
func withAuth[T any](req *connect.Request[T], token string) *connect.Request[T] {
	if token != "" {
		req.Header().Set(accessTokenHeader, token)
	}
	return req
}

func selector(pid int) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: uint32(pid)}}
}

// exitCode reads an end event the way a shell would: 128+N after signal N.
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

// ExecStream implements compute.Processes with envd's Start stream. The
// command is killed (SIGKILL) when ctx ends, the timeout passes or emit fails.
func (p *Provider) ExecStream(ctx context.Context, ref compute.Ref, req compute.ExecRequest, stdin io.Reader, emit compute.Emit) error {
	const op = "exec"
	if err := checkRef(op, ref); err != nil {
		return err
	}
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return compute.Errorf(compute.KindInvalid, op, nil, "no command given")
	}
	return p.withToken(ctx, op, ref, func(token string) error {
		runCtx, cancel := ctx, context.CancelFunc(func() {})
		if req.Timeout > 0 {
			runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		}
		defer cancel()
		sr := p.startRequest(token, req.Cmd, req.Env, req.Cwd)
		sr.Msg.Stdin = proto.Bool(stdin != nil)
		stream, err := p.processClient(ref.ID).Start(runCtx, sr)
		if err != nil {
			return p.connectError(ctx, runCtx, op, ref, req, err, false)
		}
		defer stream.Close()
		started := false
		pid, ended, err := events(stream.Receive, func() *process.ProcessEvent { return stream.Msg().GetEvent() },
			func(ev compute.ProcessEvent) error {
				if ev.Type == compute.EventStart && stdin != nil && !started {
					started = true
					go p.feed(runCtx, ref, token, ev.PID, stdin)
				}
				return emit(ev)
			})
		if ended {
			return err
		}
		p.kill(ctx, ref, token, pid)
		if err != nil {
			return err
		}
		serr := stream.Err()
		if serr == nil {
			serr = errors.New("the output stream ended without an end event")
		}
		return p.connectError(ctx, runCtx, op, ref, req, serr, pid != 0)
	})
}

// feed copies stdin to a process with SendInput, then closes its stdin.
// It ends with ctx (the command's run) at the latest.
func (p *Provider) feed(ctx context.Context, ref compute.Ref, token string, pid int, stdin io.Reader) {
	_ = p.writeStdin(ctx, ref, token, pid, stdin, true)
}

func (p *Provider) writeStdin(ctx context.Context, ref compute.Ref, token string, pid int, r io.Reader, eof bool) error {
	client := p.processClient(ref.ID)
	buf := make([]byte, 64<<10)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			req := withAuth(connect.NewRequest(&process.SendInputRequest{Process: selector(pid),
				Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: buf[:n]}}}), token)
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
	req := withAuth(connect.NewRequest(&process.CloseStdinRequest{Process: selector(pid)}), token)
	_, err := client.CloseStdin(ctx, req)
	return err
}

// connectMessage is envd's own message of a connect error.
func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

// processError maps an envd answer about one process to the user's terms.
func (p *Provider) processError(ctx context.Context, op string, ref compute.Ref, pid int, err error) error {
	msg := connectMessage(err)
	switch connect.CodeOf(err) {
	case connect.CodeNotFound:
		return compute.Errorf(compute.KindNotFound, op, err, "no running process with pid %d in E2B sandbox %s", pid, ref.ID)
	case connect.CodeFailedPrecondition, connect.CodeInvalidArgument:
		return compute.Errorf(compute.KindConflict, op, err, "process %d in E2B sandbox %s: %s", pid, ref.ID, msg)
	}
	return p.connectError(ctx, ctx, op, ref, compute.ExecRequest{Cmd: []string{"pid " + strconv.Itoa(pid)}}, err, true)
}

// StartProcess implements compute.Processes: envd runs the process on after
// the start event, when the stream is closed.
func (p *Provider) StartProcess(ctx context.Context, ref compute.Ref, req compute.ProcessRequest) (compute.Process, error) {
	const op = "start process"
	if err := checkRef(op, ref); err != nil {
		return compute.Process{}, err
	}
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return compute.Process{}, compute.Errorf(compute.KindInvalid, op, nil, "no command given")
	}
	var out compute.Process
	err := p.withToken(ctx, op, ref, func(token string) error {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		sr := p.startRequest(token, req.Cmd, req.Env, req.Cwd)
		sr.Msg.Stdin = proto.Bool(req.Stdin)
		if req.Tag != "" {
			sr.Msg.Tag = proto.String(req.Tag)
		}
		stream, err := p.processClient(ref.ID).Start(sctx, sr)
		if err != nil {
			return p.connectError(ctx, sctx, op, ref, compute.ExecRequest{Cmd: req.Cmd}, err, false)
		}
		defer stream.Close()
		for stream.Receive() {
			if st := stream.Msg().GetEvent().GetStart(); st != nil {
				out = compute.Process{PID: int(st.GetPid()), Tag: req.Tag, Cmd: req.Cmd, Running: true, StartedAt: time.Now().UTC().Truncate(time.Second)}
				return nil
			}
		}
		serr := stream.Err()
		if serr == nil {
			serr = errors.New("no start event")
		}
		return p.connectError(ctx, sctx, op, ref, compute.ExecRequest{Cmd: req.Cmd}, serr, false)
	})
	return out, err
}

// ListProcesses implements compute.Processes: envd lists running processes only.
func (p *Provider) ListProcesses(ctx context.Context, ref compute.Ref) ([]compute.Process, error) {
	const op = "list processes"
	if err := checkRef(op, ref); err != nil {
		return nil, err
	}
	var out []compute.Process
	err := p.withToken(ctx, op, ref, func(token string) error {
		req := withAuth(connect.NewRequest(&process.ListRequest{}), token)
		res, err := p.processClient(ref.ID).List(ctx, req)
		if err != nil {
			return p.connectError(ctx, ctx, op, ref, compute.ExecRequest{Cmd: []string{"list"}}, err, true)
		}
		out = out[:0]
		for _, pi := range res.Msg.GetProcesses() {
			cmd := append([]string{pi.GetConfig().GetCmd()}, pi.GetConfig().GetArgs()...)
			out = append(out, compute.Process{PID: int(pi.GetPid()), Tag: pi.GetTag(), Cmd: cmd, Running: true})
		}
		return nil
	})
	return out, err
}

// ProcessOutput implements compute.Processes with envd's Connect: live
// output only (envd keeps no history); with follow false the stream ends
// after the start event.
func (p *Provider) ProcessOutput(ctx context.Context, ref compute.Ref, pid int, follow bool, emit compute.Emit) error {
	const op = "process output"
	if err := checkRef(op, ref); err != nil {
		return err
	}
	return p.withToken(ctx, op, ref, func(token string) error {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		req := withAuth(connect.NewRequest(&process.ConnectRequest{Process: selector(pid)}), token)
		stream, err := p.processClient(ref.ID).Connect(cctx, req)
		if err != nil {
			return p.processError(ctx, op, ref, pid, err)
		}
		defer stream.Close()
		send := emit
		if !follow {
			send = func(ev compute.ProcessEvent) error {
				if err := emit(ev); err != nil {
					return err
				}
				return errStop
			}
		}
		_, ended, err := events(stream.Receive, func() *process.ProcessEvent { return stream.Msg().GetEvent() }, send)
		if ended || errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return err
		}
		if serr := stream.Err(); serr != nil && ctx.Err() == nil {
			return p.processError(ctx, op, ref, pid, serr)
		}
		return nil
	})
}

var errStop = errors.New("stop")

// bodyError is a failure to read the input (not envd's).
type bodyError struct{ err error }

func (e bodyError) Error() string { return e.err.Error() }

// WriteStdin implements compute.Processes with SendInput and CloseStdin.
func (p *Provider) WriteStdin(ctx context.Context, ref compute.Ref, pid int, data io.Reader, eof bool) error {
	const op = "write stdin"
	if err := checkRef(op, ref); err != nil {
		return err
	}
	return p.withToken(ctx, op, ref, func(token string) error {
		if err := p.writeStdin(ctx, ref, token, pid, data, eof); err != nil {
			if be := (bodyError{}); errors.As(err, &be) {
				return compute.Errorf(compute.KindInvalid, op, err, "reading the input failed: %v", be.err)
			}
			return p.processError(ctx, op, ref, pid, err)
		}
		return nil
	})
}

// SignalProcess implements compute.Processes: envd sends SIGTERM and SIGKILL only.
func (p *Provider) SignalProcess(ctx context.Context, ref compute.Ref, pid int, sig string) error {
	const op = "signal"
	if err := checkRef(op, ref); err != nil {
		return err
	}
	var s process.Signal
	switch sig {
	case "SIGTERM":
		s = process.Signal_SIGNAL_SIGTERM
	case "SIGKILL":
		s = process.Signal_SIGNAL_SIGKILL
	default:
		return compute.Errorf(compute.KindInvalid, op, nil, "E2B's envd can send SIGTERM and SIGKILL only, not %s", sig)
	}
	return p.withToken(ctx, op, ref, func(token string) error {
		req := withAuth(connect.NewRequest(&process.SendSignalRequest{Process: selector(pid), Signal: s}), token)
		if _, err := p.processClient(ref.ID).SendSignal(ctx, req); err != nil {
			return p.processError(ctx, op, ref, pid, err)
		}
		return nil
	})
}

var _ compute.Processes = (*Provider)(nil)
