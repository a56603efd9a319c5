package docker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/envd"
)

// Processes, exec and files go through the sandbox's agent (agent.go),
// with the envd client the E2B provider uses for envd: one protocol, one
// client. The agent is reached on the container's address on its network
// (the host reaches bridge addresses directly), with the token derived
// from its label (agenttoken.go); nothing runs through the engine's exec. Only the tar
// archive routes keep the engine's archive API.

// agentHTTP is the client every call to an agent goes through: a dial
// that waits for the agent to be reachable (agentdial.go), no overall
// timeout (streams last as long as their callers).
func newAgentHTTP() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         dialAgent,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
		// The agent answers at once; a header that takes this long means
		// the sandbox is frozen (paused after the state check).
		ResponseHeaderTimeout: 60 * time.Second,
	}}
}

// agent returns a client of the agent in ref's running sandbox. A paused or
// stopped sandbox is KindConflict, one made without the agent KindInvalid.
func (p *Provider) agentClient(ctx context.Context, op string, ref compute.Ref) (*envd.Client, error) {
	c, err := p.cli.ContainerInspect(ctx, ref.ID)
	if err != nil {
		return nil, classify(op, err)
	}
	if err := stateError(op, sandboxName(ref), c); err != nil {
		return nil, err
	}
	if !hasAgent(c) {
		return nil, compute.Errorf(compute.KindInvalid, op, nil,
			"sandbox %s was created without the sandbox agent, which processes, exec and files need: delete it and create it again", sandboxName(ref))
	}
	ip, token := agentIP(c), p.agentKey.tokenOf(c)
	if ip == "" {
		return nil, compute.Errorf(compute.KindUnavailable, op, nil, "sandbox %s has no network address to reach its agent at", sandboxName(ref))
	}
	a := envdAddr{url: "http://" + net.JoinHostPort(ip, strconv.Itoa(agent.Port)), token: token}
	p.envds.put(ref.ID, a) // for agentCall, and the router's Envd
	return p.agentAt(ref, a), nil
}

// agentAt is a client of the agent at a.
func (p *Provider) agentAt(ref compute.Ref, a envdAddr) *envd.Client {
	return &envd.Client{HTTP: p.agentHTTP, URL: a.url, Token: a.token,
		Name: "sandbox " + sandboxName(ref), Daemon: "the sandbox agent", Agent: true,
		Diagnose: func(ctx context.Context, op string, err error) error {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			c, ierr := p.cli.ContainerInspect(dctx, ref.ID)
			if ierr != nil {
				return classify(op, ierr)
			}
			if serr := stateError(op, sandboxName(ref), c); serr != nil {
				return serr
			}
			return err
		}}
}

// sandboxName names ref's sandbox in messages: the id its user knows, not
// the container's (unknown to the caller when the provider is used alone).
func sandboxName(ref compute.Ref) string { return cmp.Or(ref.Record, ref.ID) }

// stateError is KindConflict for a sandbox that is not running.
func stateError(op, id string, c container.InspectResponse) error {
	switch {
	case c.State == nil:
		return nil
	case c.State.Paused:
		return compute.Errorf(compute.KindConflict, op, nil, "sandbox %s is paused; resume it first", id)
	case !c.State.Running:
		return compute.Errorf(compute.KindConflict, op, nil, "sandbox %s is not running (%s)", id, c.State.Status)
	}
	return nil
}

func checkCwd(op, cwd string) error {
	if cwd != "" && !path.IsAbs(cwd) {
		return compute.Errorf(compute.KindInvalid, op, nil, "cwd must be an absolute path, got %q", cwd)
	}
	return nil
}

// Exec implements compute.Provider through the agent. A paused or stopped
// instance answers KindConflict. When req.Timeout expires (or ctx ends)
// the command is killed and the output so far is returned with KindTimeout.
func (p *Provider) Exec(ctx context.Context, ref compute.Ref, req compute.ExecRequest) (compute.ExecResult, error) {
	const op = "exec"
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return compute.ExecResult{}, compute.Errorf(compute.KindInvalid, op, nil, "cmd must not be empty")
	}
	if err := checkCwd(op, req.Cwd); err != nil {
		return compute.ExecResult{}, err
	}
	var res compute.ExecResult
	err := p.agentCall(ctx, op, ref, func(ctx context.Context, c *envd.Client) (err error) {
		res, err = c.Exec(ctx, req)
		return err
	})
	if msg, ok := notRunnable(err); ok {
		// A command that cannot be found or run is its exit code 127, as
		// in a shell.
		return compute.ExecResult{ExitCode: 127, Stderr: []byte(msg + "\n")}, nil
	}
	return res, err
}

// notRunnable reports whether the agent refused to start a command because
// it cannot be found or run (not a missing cwd, which stays a 400, as on
// /processes), with the agent's message.
func notRunnable(err error) (string, bool) {
	var ce *connect.Error
	if compute.KindOf(err) == compute.KindInvalid && errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument &&
		!strings.HasPrefix(ce.Message(), "cwd ") {
		return ce.Message(), true
	}
	return "", false
}

// ExecStream implements compute.Processes through the agent's Start stream.
func (p *Provider) ExecStream(ctx context.Context, ref compute.Ref, req compute.ExecRequest, stdin io.Reader, emit compute.Emit) error {
	const op = "exec"
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return compute.Errorf(compute.KindInvalid, op, nil, "cmd must not be empty")
	}
	if err := checkCwd(op, req.Cwd); err != nil {
		return err
	}
	began := false
	track := func(ev compute.ProcessEvent) error {
		began = true
		return emit(ev)
	}
	err := p.agentCall(ctx, op, ref, func(ctx context.Context, c *envd.Client) error {
		return c.ExecStream(ctx, req, stdin, track)
	})
	if msg, ok := notRunnable(err); ok && !began {
		// As the buffered Exec answers (and a shell, and E2B's envd, which
		// runs commands through one): a command that cannot be found or
		// run is a run with exit code 127 and the reason on stderr.
		return emitAll(emit, true, compute.ProcessEvent{Type: compute.EventStderr, Data: []byte(msg + "\n")},
			compute.ProcessEvent{Type: compute.EventExit, ExitCode: 127})
	}
	return err
}

// StartProcess implements compute.Processes. The agent keeps each
// process's output (its last MiB at least) and its end, so any replica, or
// a restarted backend, replays them.
func (p *Provider) StartProcess(ctx context.Context, ref compute.Ref, req compute.ProcessRequest) (compute.Process, error) {
	const op = "start process"
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return compute.Process{}, compute.Errorf(compute.KindInvalid, op, nil, "cmd must not be empty")
	}
	if err := checkCwd(op, req.Cwd); err != nil {
		return compute.Process{}, err
	}
	c, err := p.agentClient(ctx, op, ref)
	if err != nil {
		return compute.Process{}, err
	}
	return c.StartProcess(ctx, req)
}

// ListProcesses implements compute.Processes: running processes and the
// ended ones the agent keeps, with their exit codes.
func (p *Provider) ListProcesses(ctx context.Context, ref compute.Ref) ([]compute.Process, error) {
	c, err := p.agentClient(ctx, "list processes", ref)
	if err != nil {
		return nil, err
	}
	return c.ListProcesses(ctx)
}

// ProcessOutput implements compute.Processes: the output kept, then (with
// follow) live output until the exit.
func (p *Provider) ProcessOutput(ctx context.Context, ref compute.Ref, pid int, follow bool, emit compute.Emit) error {
	c, err := p.agentClient(ctx, "process output", ref)
	if err != nil {
		return err
	}
	return c.ProcessOutput(ctx, pid, follow, emit)
}

// WriteStdin implements compute.Processes.
func (p *Provider) WriteStdin(ctx context.Context, ref compute.Ref, pid int, data io.Reader, eof bool) error {
	c, err := p.agentClient(ctx, "write stdin", ref)
	if err != nil {
		return err
	}
	return c.WriteStdin(ctx, pid, data, eof)
}

// SignalProcess implements compute.Processes: SIGTERM, SIGKILL, SIGINT or
// SIGHUP to the process and its process group.
func (p *Provider) SignalProcess(ctx context.Context, ref compute.Ref, pid int, sig string) error {
	switch sig {
	case "SIGTERM", "SIGKILL", "SIGINT", "SIGHUP":
	default:
		return compute.Errorf(compute.KindInvalid, "signal", nil, "signal must be SIGTERM, SIGKILL, SIGINT or SIGHUP, got %q", sig)
	}
	c, err := p.agentClient(ctx, "signal", ref)
	if err != nil {
		return err
	}
	return c.SignalProcess(ctx, pid, sig)
}

// lastLine is the last line of a message (the agent's last words in the logs).
func lastLine(msg string) string {
	for i := len(msg) - 1; i >= 0; i-- {
		if msg[i] == '\n' {
			return msg[i+1:]
		}
	}
	return msg
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var _ compute.Processes = (*Provider)(nil)
