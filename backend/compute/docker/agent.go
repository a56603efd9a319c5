package docker

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// The in-sandbox agent (backend/agent, cmd dn-agent) is injected into every
// container when Config.AgentBinary names its static Linux build: before the
// container starts, the engine's archive API puts the binary and a fresh
// access token under /.dreadnode, and the container's entrypoint becomes
// the agent, with the image's own entrypoint and command (or the spec's
// command) after "--". The agent runs that command as the main process
// (its exit, with its exit code, still ends the sandbox, and its output
// still goes to the engine's logs), reaps orphans as PID 1, and serves
// envd's contract on port 49983 of the container's address. Nothing is
// needed from the image: no shell, no libc.
const (
	agentDir       = "/.dreadnode"
	agentPath      = agentDir + "/dn-agent"
	agentTokenPath = agentDir + "/token"
	agentRunDir    = agentDir + "/run" // writable by the image's user, whoever it is
	agentReadyPath = agentRunDir + "/ready"
	// labelAgentToken holds the agent's access token, so every replica
	// (and a restarted backend) can reach the agent; only those with the
	// engine's socket can read it, and they are root on the host anyway.
	labelAgentToken = "dev.dreadnode.agent-token"
)

// agentBinary is the agent's bytes, read once at New (a missing file is a
// configuration error said at start-up, not at each create).
type agentBinary struct{ data []byte }

func loadAgent(path string) (*agentBinary, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the sandbox agent binary: %w (build it with: CGO_ENABLED=0 go build -o dn-agent ./backend/cmd/dn-agent)", err)
	}
	if len(b) < 4 || string(b[:4]) != "\x7fELF" {
		return nil, fmt.Errorf("the sandbox agent binary %s is not a Linux executable (ELF)", path)
	}
	return &agentBinary{data: b}, nil
}

// withAgent makes the agent the container's entrypoint, running the
// command the container would have run (the image's entrypoint with cmd,
// or with the image's own cmd when cmd is empty), and labels the token.
func (p *Provider) withAgent(ctx context.Context, cfg *container.Config, image string, cmd []string, token string) error {
	img, err := p.cli.ImageInspect(ctx, image)
	if err != nil {
		return err
	}
	var main []string
	if img.Config != nil && img.Config.User != "" && img.Config.User != "root" && img.Config.User != "0" {
		// The agent runs as root (it reads its root-only token and starts
		// processes as any user); the main command keeps the image's user.
		cfg.User = "0"
		cfg.Env = append(cfg.Env, agent.EnvMainUser+"="+img.Config.User)
	}
	if img.Config != nil {
		main = append(main, img.Config.Entrypoint...)
		if len(cmd) == 0 {
			cmd = img.Config.Cmd
		}
	}
	main = append(main, cmd...)
	cfg.Entrypoint = []string{agentPath}
	if len(main) > 0 {
		cfg.Entrypoint = append(cfg.Entrypoint, "--")
	}
	// A container Entrypoint set here drops the image's Cmd; ours is all in it.
	cfg.Entrypoint = append(cfg.Entrypoint, main...)
	cfg.Cmd = nil
	cfg.Labels[labelAgentToken] = token
	cfg.Env = append(cfg.Env, agent.EnvReadyFile+"="+agentReadyPath)
	return nil
}

// waitAgent waits until the agent in a started container reports (through
// the engine, no network needed) that it listens and started the main
// command. A container that ends first could not start its main command:
// that is the create's failure, with the agent's last words from the logs.
func (p *Provider) waitAgent(ctx context.Context, id string) error {
	const op = "create"
	ctx, cancel := context.WithTimeout(ctx, agentReadyTimeout)
	defer cancel()
	for wait := time.Millisecond; ; wait = min(2*wait, 5*time.Millisecond) {
		c, err := p.cli.ContainerInspect(ctx, id)
		if err != nil {
			return classify(op, err)
		}
		if c.Config == nil || c.Config.Labels[labelAgentToken] == "" {
			return nil // made without the agent (before it was configured): nothing to wait for
		}
		if _, err := p.cli.ContainerStatPath(ctx, id, agentReadyPath); err == nil {
			return nil
		}
		if c.State != nil && !c.State.Running && c.State.Status != "created" {
			logs, _ := p.Logs(ctx, compute.Ref{ID: id})
			return compute.Errorf(compute.KindEntrypoint, op, nil, "the main process could not start: %s", lastLine(strings.TrimSpace(strings.TrimPrefix(logs, "dn-agent: "))))
		}
		select {
		case <-ctx.Done():
			return compute.Errorf(compute.KindUnavailable, op, ctx.Err(), "the sandbox agent did not report ready within %s", agentReadyTimeout)
		case <-time.After(wait):
		}
	}
}

// ensureAgent makes sure a created container that is to be adopted holds
// its agent: the create that made it may still be copying it in (then it
// appears within moments), or have crashed before (then the copy is made
// here, with the token of the container's label).
func (p *Provider) ensureAgent(ctx context.Context, c container.InspectResponse) error {
	if p.agent == nil || c.Config == nil || c.Config.Labels[labelAgentToken] == "" {
		return nil
	}
	token := c.Config.Labels[labelAgentToken]
	deadline := time.Now().Add(2 * time.Second)
	for wait := time.Millisecond; time.Now().Before(deadline); wait = min(2*wait, 100*time.Millisecond) {
		// The token is the archive's last file: complete once it has its size.
		if st, err := p.cli.ContainerStatPath(ctx, c.ID, agentTokenPath); err == nil && st.Size == int64(len(token)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return p.copyAgent(ctx, c.ID, token)
}

// agentReadyTimeout bounds the wait for the agent after the container started.
const agentReadyTimeout = 30 * time.Second

// copyAgent puts the agent and its token into a created container.
func (p *Provider) copyAgent(ctx context.Context, id, token string) error {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		now := time.Now()
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "." + agentDir + "/", Mode: 0o755, ModTime: now})
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "." + agentRunDir + "/", Mode: 0o1777, ModTime: now})
		}
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "." + agentPath, Mode: 0o755, Size: int64(len(p.agent.data)), ModTime: now})
		}
		if err == nil {
			_, err = tw.Write(p.agent.data)
		}
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "." + agentTokenPath, Mode: 0o400, Size: int64(len(token)), ModTime: now})
		}
		if err == nil {
			_, err = io.WriteString(tw, token)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err := p.cli.CopyToContainer(ctx, id, "/", pr, container.CopyToContainerOptions{})
	pr.Close()
	return err
}
