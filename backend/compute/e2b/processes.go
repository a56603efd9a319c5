package e2b

import (
	"context"
	"io"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/envd"
)

// Processes and files on E2B go through envd with the client the Docker
// provider uses for its agent (package envd). envd keeps no output
// history: ProcessOutput delivers what a process prints from the moment it
// connects (no replay), unlike the Docker provider's agent.

// envdClient reaches envd in ref's sandbox with token.
func (p *Provider) envdClient(ref compute.Ref, token string) *envd.Client {
	return &envd.Client{HTTP: p.hc, URL: p.cfg.EnvdURL(ref.ID), Token: token, User: p.cfg.User,
		Name: "E2B sandbox " + ref.ID, MaxExecOutput: p.cfg.MaxExecOutput,
		Diagnose: func(ctx context.Context, op string, err error) error { return p.diagnose(ctx, op, ref, err) }}
}

// withEnvd runs f with a client of ref's envd, checking ref first and
// retrying once with a fresh token when envd refuses the one in ref.
func (p *Provider) withEnvd(ctx context.Context, op string, ref compute.Ref, f func(*envd.Client) error) error {
	if err := checkRef(op, ref); err != nil {
		return err
	}
	return p.withToken(ctx, op, ref, func(token string) error { return f(p.envdClient(ref, token)) })
}

// Exec implements compute.Provider with envd's Start stream.
func (p *Provider) Exec(ctx context.Context, ref compute.Ref, req compute.ExecRequest) (compute.ExecResult, error) {
	var res compute.ExecResult
	err := p.withEnvd(ctx, "exec", ref, func(c *envd.Client) error {
		var err error
		res, err = c.Exec(ctx, req)
		return err
	})
	return res, err
}

// ExecStream implements compute.Processes.
func (p *Provider) ExecStream(ctx context.Context, ref compute.Ref, req compute.ExecRequest, stdin io.Reader, emit compute.Emit) error {
	return p.withEnvd(ctx, "exec", ref, func(c *envd.Client) error { return c.ExecStream(ctx, req, stdin, emit) })
}

// StartProcess implements compute.Processes.
func (p *Provider) StartProcess(ctx context.Context, ref compute.Ref, req compute.ProcessRequest) (compute.Process, error) {
	var out compute.Process
	err := p.withEnvd(ctx, "start process", ref, func(c *envd.Client) error {
		var err error
		out, err = c.StartProcess(ctx, req)
		return err
	})
	return out, err
}

// ListProcesses implements compute.Processes: envd lists running processes only.
func (p *Provider) ListProcesses(ctx context.Context, ref compute.Ref) ([]compute.Process, error) {
	var out []compute.Process
	err := p.withEnvd(ctx, "list processes", ref, func(c *envd.Client) error {
		var err error
		out, err = c.ListProcesses(ctx)
		return err
	})
	return out, err
}

// ProcessOutput implements compute.Processes: live output only (envd keeps
// no history); with follow false the stream ends after the start event.
func (p *Provider) ProcessOutput(ctx context.Context, ref compute.Ref, pid int, follow bool, emit compute.Emit) error {
	return p.withEnvd(ctx, "process output", ref, func(c *envd.Client) error { return c.ProcessOutput(ctx, pid, follow, emit) })
}

// WriteStdin implements compute.Processes with SendInput and CloseStdin.
func (p *Provider) WriteStdin(ctx context.Context, ref compute.Ref, pid int, data io.Reader, eof bool) error {
	return p.withEnvd(ctx, "write stdin", ref, func(c *envd.Client) error { return c.WriteStdin(ctx, pid, data, eof) })
}

// SignalProcess implements compute.Processes: envd sends SIGTERM and SIGKILL only.
func (p *Provider) SignalProcess(ctx context.Context, ref compute.Ref, pid int, sig string) error {
	return p.withEnvd(ctx, "signal", ref, func(c *envd.Client) error { return c.SignalProcess(ctx, pid, sig) })
}

var _ compute.Processes = (*Provider)(nil)
