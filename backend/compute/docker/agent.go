package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/templatebuild"
)

// The in-sandbox agent (backend/agent, cmd dn-agent) is injected into every
// container when Config.AgentBinary names its static Linux build: the
// binary lives in a named volume, filled once per engine and binary (its
// name is keyed by the binary's content hash), mounted read-only at
// /.dreadnode in every sandbox; the container's entrypoint becomes the
// agent, with the image's own entrypoint and command (or the spec's
// command) after "--", and a fresh access token per sandbox, of which the
// engine shows only a nonce and a hash (agenttoken.go). The agent runs that
// command as the main process (its exit, with its exit code, still ends
// the sandbox, and its output still goes to the engine's logs), reaps
// orphans as PID 1, and serves envd's contract on port 49983 of the
// container's address. Nothing is needed from the image: no shell, no libc.
const (
	agentDir  = "/.dreadnode"
	agentPath = agentDir + "/dn-agent"
	// agentReadyPath is outside the read-only volume, in the container's
	// own writable layer. Each container's file has a suffix of its own
	// (readyPath): a container started from a copy of another's
	// filesystem (Commit) finds its source's file there already.
	agentReadyPath = "/.dreadnode-ready"
	// labelAgentBinary marks the agent's volume (and its filler container)
	// with the binary's SHA-256. The volume's name does not start with
	// volumePrefix, so deleting a sandbox never removes it.
	labelAgentBinary  = "dev.dreadnode.agent-binary"
	agentVolumePrefix = "dreadnode-agent-"
)

// agentBinary is the agent's file, checked and hashed once at New (a
// missing file is a configuration error said at start-up, not at each
// create), and the volume that holds it on this engine. The bytes are not
// kept: the binary is tens of MiB (the backend's own, when it is its own
// agent), and a heap that holds them for good lets the collector (at the
// binary's GOGC of 400) grow the heap to five times that before it runs,
// which any stream of sandbox output then fills with garbage.
type agentBinary struct {
	path   string
	size   int64
	sum    string // hex SHA-256 of the file
	volume string // agentVolumePrefix + the first 20 hex digits of sum

	mu    sync.Mutex
	ready bool // the volume was seen filled
}

// agentHost injects the agent into containers of one engine: the binary
// and the client of the engine that holds its volume. A Provider and the
// Groups made from it share one, so the volume is filled once for both.
type agentHost struct {
	*agentBinary
	cli   *client.Client
	scope string // labels the volume with who made it (the deployment, the groups' owner)
	// sources caches imageConfig of the source images copies name (by
	// image id, so never stale): every fork of a checkpoint asks for it.
	sources sync.Map // image id -> *container.Config
}

func loadAgent(path string) (*agentBinary, error) {
	if path == "" {
		return nil, nil
	}
	sum, size, err := hashAgent(path)
	if err != nil {
		return nil, err
	}
	return &agentBinary{path: path, size: size, sum: sum, volume: agentVolumePrefix + sum[:20]}, nil
}

// hashAgent checks that path is a Linux executable and returns its hex
// SHA-256 and size, reading it a piece at a time.
func hashAgent(path string) (sum string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("reading the sandbox agent binary: %w (build it with: CGO_ENABLED=0 go build -o dn-agent ./backend/cmd/dn-agent)", err)
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil || string(magic) != "\x7fELF" {
		return "", 0, fmt.Errorf("the sandbox agent binary %s is not a Linux executable (ELF)", path)
	}
	h := sha256.New()
	h.Write(magic)
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("reading the sandbox agent binary %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n + int64(len(magic)), nil
}

// writeAgent writes the agent's file to tw as name, and fails when the file
// is no longer the one hashed at New (replaced on disk since): the volume
// is named by that hash, so it must hold exactly those bytes.
func (a *agentBinary) writeAgent(tw *tar.Writer, name string, mod time.Time) error {
	f, err := os.Open(a.path)
	if err != nil {
		return fmt.Errorf("reading the sandbox agent binary: %w", err)
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: a.size, ModTime: mod}); err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(tw, h), f, a.size); err != nil {
		return fmt.Errorf("reading the sandbox agent binary %s: %w", a.path, err)
	}
	if hex.EncodeToString(h.Sum(nil)) != a.sum {
		return fmt.Errorf("the sandbox agent binary %s changed on disk since the backend started; restart the backend", a.path)
	}
	return nil
}

// agentMount mounts the agent's volume read-only at agentDir.
func (a *agentBinary) mount() mount.Mount {
	return mount.Mount{Type: mount.TypeVolume, Source: a.volume, Target: agentDir, ReadOnly: true,
		VolumeOptions: &mount.VolumeOptions{NoCopy: true}}
}

// agentFillStale is how long a filler container may hold its name before
// another backend takes it for a crashed one's and removes it.
const agentFillStale = 2 * time.Minute

// ensureAgentVolume makes sure the agent's volume exists and holds the
// binary, filling it when it does not. Once per process and binary: after
// that it costs nothing. Backends sharing the engine (replicas, tests)
// take turns through the filler container's name, which the engine gives
// to one at a time; the filler writes the binary, then a "ready" file, in
// one archive (extracted in order), so a volume with "ready" holds the
// whole binary. image is any local image (the sandbox's own): the filler
// is created, never started.
func (h *agentHost) ensureVolume(ctx context.Context, image string) error {
	a := h.agentBinary
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ready {
		return nil
	}
	labels := map[string]string{labelAgentBinary: a.sum, labelScope: h.scope}
	if _, err := h.cli.VolumeCreate(ctx, volume.CreateOptions{Name: a.volume, Labels: labels}); err != nil {
		return fmt.Errorf("creating the agent's volume %s: %w", a.volume, err)
	}
	filler := a.volume + "-fill"
	deadline := time.Now().Add(agentFillStale + 30*time.Second)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		err := h.fillOnce(ctx, image, filler, labels)
		if err == nil {
			a.ready = true
			return nil
		}
		if !cerrdefs.IsConflict(err) {
			return err
		}
		// The name is taken: another backend is filling the volume, or
		// one was killed while at it and left its filler. A stale one is
		// removed; a live or young one is waited for, unless the volume it
		// mounts is full already (a backend killed after the fill must not
		// hold every other up until its filler goes stale).
		if c, ierr := h.cli.ContainerInspect(ctx, filler); ierr == nil {
			if created, perr := time.Parse(time.RFC3339Nano, c.Created); perr == nil && time.Since(created) > agentFillStale {
				h.removeFiller(c.ID)
			} else if _, serr := h.cli.ContainerStatPath(ctx, filler, "/v/ready"); serr == nil {
				a.ready = true
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the container %s that fills the agent's volume did not go away", filler)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// labelFillOwner marks a filler container with the attempt that made it,
// so an attempt whose create failed can tell its own leftover from
// another backend's filler.
const labelFillOwner = "dev.dreadnode.agent-fill-owner"

// fillOnce makes the filler container (the name is the lock: a conflict
// means another backend holds it), fills the volume and removes the
// filler. The work is shared by every sandbox on the engine, so it does
// not stop when the create that started it is cancelled: a create
// cancelled after the engine made the filler would otherwise leave it
// holding the name until it goes stale.
func (h *agentHost) fillOnce(ctx context.Context, image, filler string, labels map[string]string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), agentFillStale)
	defer cancel()
	owner := randomHex(8)
	labels = maps.Clone(labels)
	labels[labelFillOwner] = owner
	labels[labelHelper] = helperAgentFill
	resp, err := h.cli.ContainerCreate(ctx,
		&container.Config{Image: image, Entrypoint: []string{agentPath}, Labels: labels, NetworkDisabled: true},
		&container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: h.volume, Target: "/v",
			VolumeOptions: &mount.VolumeOptions{NoCopy: true}}}}, nil, nil, filler)
	if cerrdefs.IsConflict(err) {
		return err
	}
	if err != nil {
		// The engine may have made it before the error (a timeout).
		if c, ierr := h.cli.ContainerInspect(ctx, filler); ierr == nil && c.Config != nil && c.Config.Labels[labelFillOwner] == owner {
			h.removeFiller(c.ID)
		}
		return fmt.Errorf("creating the container that fills the agent's volume: %w", err)
	}
	err = h.fillVolume(ctx, resp.ID)
	h.removeFiller(resp.ID)
	return err
}

// fillVolume writes the binary and then "ready" into the volume
// mounted at /v of the filler, unless "ready" is there already.
func (h *agentHost) fillVolume(ctx context.Context, id string) error {
	if _, err := h.cli.ContainerStatPath(ctx, id, "/v/ready"); err == nil {
		return nil
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		now := time.Now()
		err := h.writeAgent(tw, "dn-agent", now)
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "ready", Mode: 0o444, ModTime: now})
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	err := h.cli.CopyToContainer(ctx, id, "/v", pr, container.CopyToContainerOptions{})
	pr.Close()
	if err != nil {
		return fmt.Errorf("filling the agent's volume: %w", err)
	}
	return nil
}

func (h *agentHost) removeFiller(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// RemoveVolumes removes the anonymous volumes an image's VOLUME made, never a named one.
	_ = removeContainer(ctx, h.cli, id)
}

// withAgent makes the agent the container's entrypoint, running the
// command the container would have run (the image's entrypoint with cmd,
// or with the image's own cmd when cmd is empty) as the image's user, with
// a token of key (agenttoken.go). The agent writes agentReadyPath once
// that command started (waitAgent).
func (h *agentHost) withAgent(ctx context.Context, cfg *container.Config, image string, cmd []string, key tokenKey) error {
	imgCfg, err := h.imageConfig(ctx, image)
	if err != nil {
		return err
	}
	agentEntrypoint(cfg, mainCommand(nil, cmd, imgCfg), imgCfg.User, key)
	cfg.Env = append(cfg.Env, agent.EnvReadyFile+"="+agentReadyPath+"-"+randomHex(8))
	// A template built by API: its start command runs at every start of
	// the container and its WORKDIR is where processes start. Said empty
	// when the image has none: an image copied from a sandbox (Commit)
	// carries its source container's values in its environment.
	start, workdir := templatebuild.StartOf(imgCfg.Labels), imgCfg.Labels[templatebuild.LabelWorkdir]
	startJSON := ""
	if start.Cmd != "" || start.ReadyCmd != "" {
		b, err := json.Marshal(start)
		if err != nil {
			return err
		}
		startJSON = string(b)
	}
	cfg.Env = append(cfg.Env, agent.EnvStart+"="+startJSON, agent.EnvDefaultWorkdir+"="+workdir)
	return nil
}

// hasStart reports whether a container's agent runs a template's start
// command before it reports ready.
func hasStart(c *container.Config) bool {
	if c == nil {
		return false
	}
	v := ""
	for _, e := range c.Env { // the last one counts, as in the engine
		if s, ok := strings.CutPrefix(e, agent.EnvStart+"="); ok {
			v = s
		}
	}
	return v != ""
}

// readyPath is where c's agent writes its ready file: the path its
// environment names (agentReadyPath itself for containers made before the
// suffix).
func readyPath(c *container.Config) string {
	if c != nil {
		for _, e := range c.Env {
			if v, ok := strings.CutPrefix(e, agent.EnvReadyFile+"="); ok {
				return v
			}
		}
	}
	return agentReadyPath
}

// imageConfig is what of image's configuration decides its main command
// and its user.
func (h *agentHost) imageConfig(ctx context.Context, image string) (*container.Config, error) {
	img, err := h.cli.ImageInspect(ctx, image)
	if err != nil {
		return nil, err
	}
	src := ""
	if img.Config != nil && img.Config.Labels[labelSourceImage] != "" {
		// A copy made by Commit: its own entrypoint is its source
		// container's agent.
		src = img.Config.Labels[labelSourceImage]
		if c, ok := h.sources.Load(src); ok {
			return c.(*container.Config), nil
		}
		if img, err = h.cli.ImageInspect(ctx, src); err != nil {
			return nil, err
		}
	}
	cfg := &container.Config{}
	if img.Config != nil {
		cfg = &container.Config{User: img.Config.User, Entrypoint: img.Config.Entrypoint, Cmd: img.Config.Cmd, Labels: img.Config.Labels}
	}
	if strings.HasPrefix(src, "sha256:") && src == img.ID { // an id names one configuration for good
		h.sources.Store(src, cfg)
	}
	return cfg, nil
}

// mainCommand is the command a container runs, merged as the engine
// merges a container's entrypoint and cmd with its image's: an entrypoint
// given (non-nil) replaces the image's, and a non-empty one drops the
// image's cmd too (compose's entrypoint override without a command); an
// empty cmd takes the image's otherwise.
func mainCommand(entrypoint, cmd []string, img *container.Config) []string {
	if len(entrypoint) == 0 {
		if len(cmd) == 0 {
			cmd = img.Cmd
		}
		if entrypoint == nil {
			entrypoint = img.Entrypoint
		}
	}
	return append(slices.Clone(entrypoint), cmd...)
}

// agentEntrypoint makes the agent cfg's entrypoint, with main after "--",
// checking a token of key. user is the user main runs as ("" or root: the
// agent's own); the agent runs as root (it starts processes as any user)
// and the main command, and the processes it starts, as user.
func agentEntrypoint(cfg *container.Config, main []string, user string, key tokenKey) {
	if !rootUser(user) {
		cfg.User = "0"
		cfg.Env = append(cfg.Env, agent.EnvMainUser+"="+user)
	}
	cfg.Entrypoint = []string{agentPath}
	if len(main) > 0 {
		cfg.Entrypoint = append(cfg.Entrypoint, "--")
	}
	// A container Entrypoint set here drops the image's Cmd; ours is all in it.
	cfg.Entrypoint = append(cfg.Entrypoint, main...)
	cfg.Cmd = nil
	// Only the token's nonce (label) and hash (environment) are where
	// inspect shows them; the agent passes none of its DN_AGENT_
	// variables on.
	key.inject(cfg)
}

// rootUser reports whether a Docker USER is root, in root's group ("" is
// the engine's default, root).
func rootUser(user string) bool {
	return user == "" || user == "root" || user == "0"
}

// waitAgent waits until the agent in a started container reports (through
// the engine, no network needed) that it listens and started the main
// command. A container that ends first could not start its main command:
// that is the create's failure, with the agent's last words from the logs.
func (p *Provider) waitAgent(ctx context.Context, id string) error {
	const op = "create"
	limit := agentReadyTimeout
	if c, err := p.cli.ContainerInspect(ctx, id); err == nil && hasStart(c.Config) {
		limit += agent.StartReadyTime // the agent waits for the template's ready command first
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for wait := time.Millisecond; ; wait = min(2*wait, 5*time.Millisecond) {
		c, err := p.cli.ContainerInspect(ctx, id)
		if err != nil {
			return classify(op, err)
		}
		if !hasAgent(c) {
			return nil // made without the agent (before it was configured): nothing to wait for
		}
		if st, err := p.cli.ContainerStatPath(ctx, id, readyPath(c.Config)); err == nil && st.Mtime.After(staleReady) {
			return nil
		}
		if c.State != nil && !c.State.Running && c.State.Status != "created" {
			logs, _ := p.Logs(ctx, compute.Ref{ID: id})
			return compute.Errorf(compute.KindEntrypoint, op, nil, "the main process could not start: %s", lastLine(strings.TrimSpace(strings.TrimPrefix(logs, "dn-agent: "))))
		}
		select {
		case <-ctx.Done():
			return compute.Errorf(compute.KindUnavailable, op, ctx.Err(), "the sandbox agent did not report ready within %s", limit)
		case <-time.After(wait):
		}
	}
}

// staleReady is the time a container started again (after a
// filesystem-only pause) finds on the ready marker of its previous start:
// restart stamps it so before the start (markStale), and the agent's new
// marker is written after it.
var staleReady = time.Unix(1, 0)

// markStale dates the ready marker a stopped container kept from its
// previous start back to the epoch, so waitAgent waits for this start's.
func (p *Provider) markStale(ctx context.Context, id string) error {
	c, err := p.cli.ContainerInspect(ctx, id)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(readyPath(c.Config), "/"), Mode: 0o644, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return p.cli.CopyToContainer(ctx, id, "/", &buf, container.CopyToContainerOptions{})
}

// ensureAgent makes sure a created container that is to be adopted can
// start its agent: its volume is filled (the create that made it may have
// crashed before).
func (p *Provider) ensureAgent(ctx context.Context, c container.InspectResponse) error {
	if p.agent == nil || !hasAgent(c) {
		return nil
	}
	return p.agent.ensureVolume(ctx, c.Config.Image)
}

// agentReadyTimeout bounds the wait for the agent after the container started.
const agentReadyTimeout = 30 * time.Second
