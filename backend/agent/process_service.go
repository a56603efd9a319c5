package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
)

// keepAliveEvery is how often a quiet stream sends a keepalive event, so
// proxies between the backend and the agent do not close it as idle.
var keepAliveEvery = 30 * time.Second

// processService implements processconnect.ProcessHandler.
type processService struct{ ps *Processes }

func (s *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	m := req.Msg
	if m.GetProcess().GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd must not be empty"))
	}
	spec := startSpec{config: m.GetProcess(), tag: m.GetTag(), stdin: m.Stdin == nil || m.GetStdin(), user: processUser(req.Header())}
	if m.Pty != nil {
		size, err := ptySize(m.Pty, "pty")
		if err != nil {
			return connect.NewError(connect.CodeInvalidArgument, err)
		}
		spec.pty = &size
	}
	p, err := s.ps.start(spec)
	var se *startError
	if errors.As(err, &se) {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	var le *limitError
	if errors.As(err, &le) {
		return connect.NewError(connect.CodeResourceExhausted, err)
	}
	if err != nil {
		return connect.NewError(connect.CodeInternal, err)
	}
	// This stream owns the output (see outputLog) until it ends.
	defer p.out.release()
	return follow(ctx, p, false, true, func(ev *process.ProcessEvent) error { return stream.Send(&process.StartResponse{Event: ev}) })
}

// Extensions of envd's contract, asked for by a request header (envd's
// clients never send them, so they see envd's behaviour).
const (
	// OnceHeader on Connect: send the output kept so far (and the end, if
	// the process ended), then end the stream instead of following it.
	OnceHeader = "Dn-Once"
	// EndedHeader on List: list the ended processes kept too; the
	// answer's EndedHeader says "pid=exitcode,..." for those.
	EndedHeader = "Dn-Ended"
)

// Connect replays what the process printed (the last OutputKeepBytes), then
// follows it until its end, which is sent too (with OnceHeader: stops
// after what was kept).
func (s *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	p, err := s.ps.find(req.Msg.GetProcess())
	if err != nil {
		return notFound(req.Msg.GetProcess())
	}
	return follow(ctx, p, req.Header().Get(OnceHeader) != "", false, func(ev *process.ProcessEvent) error { return stream.Send(&process.ConnectResponse{Event: ev}) })
}

// follow sends a start event, the output from the first byte kept, then
// live output and the end event; with once, it returns after what was
// kept (and the end, if the process ended). The owner acknowledges each
// chunk it sent, so none is dropped before.
func follow(ctx context.Context, p *proc, once, owner bool, send func(*process.ProcessEvent) error) error {
	if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: uint32(p.pid)}}}); err != nil {
		return err
	}
	keepAlive := time.NewTicker(keepAliveEvery)
	defer keepAlive.Stop()
	var next uint64
	for {
		chunks, ended, changed := p.out.since(next)
		for _, c := range chunks {
			d := &process.ProcessEvent_DataEvent{}
			switch c.stream {
			case stderrStream:
				d.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: c.data}
			case ptyStream:
				d.Output = &process.ProcessEvent_DataEvent_Pty{Pty: c.data}
			default:
				d.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: c.data}
			}
			if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: d}}); err != nil {
				return err
			}
			next = c.seq + 1
			if owner {
				p.out.ack(next)
			}
		}
		if ended {
			return send(&process.ProcessEvent{Event: &process.ProcessEvent_End{End: endEvent(p)}})
		}
		if once {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				// The caller's deadline (Connect-Timeout-Ms): say so, so it
				// tells a timeout from a stream cut short.
				return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the request's deadline passed before the process ended"))
			}
			return nil
		case <-changed:
		case <-keepAlive.C:
			if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		}
	}
}

// endEvent reads the status as envd does: exited with a code, or a status
// "signal: killed" and the shell's 128+N as the code.
func endEvent(p *proc) *process.ProcessEvent_EndEvent {
	st, _ := p.end()
	if st.Signaled() {
		return &process.ProcessEvent_EndEvent{ExitCode: int32(exitCode(st)), Exited: false, Status: "signal: " + st.Signal().String()}
	}
	return &process.ProcessEvent_EndEvent{ExitCode: int32(st.ExitStatus()), Exited: true, Status: fmt.Sprintf("exit status %d", st.ExitStatus())}
}

func (s *processService) List(_ context.Context, req *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	out := &process.ListResponse{}
	var ended []string
	for _, p := range s.ps.list(req.Header().Get(EndedHeader) != "") {
		info := &process.ProcessInfo{Config: p.config, Pid: uint32(p.pid)}
		if p.tag != "" {
			info.Tag = &p.tag
		}
		out.Processes = append(out.Processes, info)
		if st, done := p.end(); done {
			ended = append(ended, fmt.Sprintf("%d=%d", p.pid, exitCode(st)))
		}
	}
	res := connect.NewResponse(out)
	if len(ended) > 0 {
		res.Header().Set(EndedHeader, strings.Join(ended, ","))
	}
	return res, nil
}

// Update resizes a process's PTY; without pty it changes nothing, as envd.
func (s *processService) Update(_ context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	p, err := s.ps.find(req.Msg.GetProcess())
	if err != nil {
		return nil, notFound(req.Msg.GetProcess())
	}
	if req.Msg.Pty != nil {
		size, err := ptySize(req.Msg.Pty, "pty")
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		if err := p.resize(size); errors.Is(err, errNoPTY) {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no PTY to resize (started without pty, or ended)", p.pid))
		} else if err != nil {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("resizing the PTY of process %d: %w", p.pid, err))
		}
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}

func (s *processService) SendInput(_ context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	p, err := s.ps.find(req.Msg.GetProcess())
	if err != nil {
		return nil, notFound(req.Msg.GetProcess())
	}
	if err := input(p, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

// StreamInput writes each data event in order to the process chosen by the
// first (start) event.
func (s *processService) StreamInput(_ context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	var p *proc
	for stream.Receive() {
		switch e := stream.Msg().GetEvent().(type) {
		case *process.StreamInputRequest_Start:
			found, err := s.ps.find(e.Start.GetProcess())
			if err != nil {
				return nil, notFound(e.Start.GetProcess())
			}
			p = found
		case *process.StreamInputRequest_Data:
			if p == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the first event of StreamInput must be start, naming the process"))
			}
			if err := input(p, e.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

func input(p *proc, in *process.ProcessInput) error {
	if _, isPTY := in.GetInput().(*process.ProcessInput_Pty); isPTY {
		if err := p.writePTY(in.GetPty()); errors.Is(err, errNoPTY) {
			if p.hasPTY() {
				return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has ended; its PTY is closed", p.pid))
			}
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no PTY; send stdin", p.pid))
		} else if err != nil {
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("cannot write to the PTY of process %d: %v", p.pid, err))
		}
		return nil
	}
	if p.hasPTY() {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d runs in a PTY; send its input as pty, not stdin", p.pid))
	}
	if err := p.writeStdin(in.GetStdin()); err != nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("cannot write to the stdin of process %d: it was started without stdin, closed it, or ended", p.pid))
	}
	return nil
}

// SendSignal sends SIGTERM or SIGKILL as envd does, and, beyond envd's
// enum, any other signal number 1–31 (SIGINT, SIGHUP, ...).
func (s *processService) SendSignal(_ context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	p, err := s.ps.find(req.Msg.GetProcess())
	if err != nil {
		return nil, notFound(req.Msg.GetProcess())
	}
	n := int(req.Msg.GetSignal())
	if n < 1 || n > 31 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal must be a signal number from 1 to 31 (SIGTERM 15, SIGKILL 9), got %d", n))
	}
	if err := p.signal(syscall.Signal(n)); err != nil {
		// Known but ended: a state the caller can see (409), not a missing process.
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has ended", p.pid))
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func (s *processService) CloseStdin(_ context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	p, err := s.ps.find(req.Msg.GetProcess())
	if err != nil {
		return nil, notFound(req.Msg.GetProcess())
	}
	if p.hasPTY() {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d runs in a PTY, which has no stdin to close; send Ctrl+D (0x04) as pty input", p.pid))
	}
	if err := p.closeStdin(); err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("the stdin of process %d is already closed (or it was started without one)", p.pid))
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

func notFound(sel *process.ProcessSelector) error {
	switch s := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", s.Pid))
	case *process.ProcessSelector_Tag:
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %q not found", s.Tag))
	}
	return connect.NewError(connect.CodeInvalidArgument, errors.New("process selector must give a pid or a tag"))
}
