package docker

import (
	"context"
	"errors"
	"slices"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// withAgent injects the agent (agent.go) into a service's container, as
// into a sandbox's: its volume mounted read-only, the agent as the
// entrypoint, running after "--" the command the service would have run
// (its compose entrypoint and command merged with its image's as the
// engine merges them), with a token of its own (agenttoken.go). The agent
// runs as root and the command as the service's user (compose `user`, else
// the image's); its exit, with its code, still ends the container. No
// ready file: a command that cannot start ends the container, which Bring
// reports with its logs, and Exec waits for an agent that is starting.
func (e *Groups) withAgent(ctx context.Context, cfg *container.Config, host *container.HostConfig, name string, s compute.GroupService) error {
	img, err := e.agent.imageConfig(ctx, s.Image)
	if errdefs.IsNotFound(err) {
		return perr(err, "creating service %q: image %s is missing", name, s.Image)
	}
	if err != nil {
		return perr(err, "inspecting the image of service %q", name)
	}
	main := mainCommand(cfg.Entrypoint, cfg.Cmd, img)
	if len(main) == 0 {
		// The engine's own refusal, which the agent (a command of its own) would hide.
		return perr(errors.New("no command specified: its image has neither ENTRYPOINT nor CMD and the compose file sets neither entrypoint nor command"),
			"creating service %q", name)
	}
	if err := e.agent.ensureVolume(ctx, s.Image); err != nil {
		return perr(err, "creating service %q: preparing its in-container agent", name)
	}
	user := cfg.User
	if user == "" {
		user = img.User
	}
	if !slices.Contains(host.CapAdd, "SETUID") || !slices.Contains(host.CapAdd, "SETGID") || len(host.GroupAdd) > 0 {
		// A root agent could not become the user as the engine does: the
		// service dropped the capabilities to change users (compose
		// cap_drop), or has supplementary groups (group_add) the agent
		// does not give. The agent runs as that user itself (cfg.User is
		// left as it is), as the service's own entrypoint would have, and
		// starts its processes as that user, its own; its token is then
		// readable by that user, whose commands are all the agent runs.
		agentEntrypoint(cfg, main, "", e.agentKey)
		if user != "" {
			cfg.Env = append(cfg.Env, agent.EnvMainUser+"="+user)
		}
	} else {
		agentEntrypoint(cfg, main, user, e.agentKey)
	}
	host.Mounts = append(host.Mounts, e.agent.mount())
	return nil
}
