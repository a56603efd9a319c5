package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Bounds of a fork request (E2B's SandboxForkRequest).
const (
	MinForkCount = 1
	MaxForkCount = 100
)

// ForkOptions are what a fork asks for besides its parent.
type ForkOptions struct {
	// Count is how many sandboxes to make from the one checkpoint (1–100).
	Count int
	// TimeoutSec is each fork's lifetime (raised to MinTimeout).
	TimeoutSec int
	// AllowPaused forks a paused parent (which stays paused); the E2B edge
	// refuses one, as E2B does (409).
	AllowPaused bool
}

// Forked is one fork's outcome: the sandbox made (with its access token),
// or why it could not be made. Each fork succeeds or fails alone.
type Forked struct {
	Created
	Err error
}

// Fork checkpoints parent (its filesystem becomes a private image; a running
// parent is paused only for the commit, a paused one stays paused) and makes
// opts.Count sandboxes from it, each a record of its own naming parent, with
// the parent's template, resources, env, metadata and network policy, placed
// by admission like a create. Memory is not copied: each fork's processes
// start again from its template's command. The checkpoint's image is removed
// once no record needs it (ReleaseCheckpoint).
func (s *Service) Fork(ctx context.Context, parent *store.Record, opts ForkOptions) ([]Forked, error) {
	if opts.Count < MinForkCount || opts.Count > MaxForkCount {
		return nil, domain.Invalid("count", fmt.Sprintf("must be between %d and %d", MinForkCount, MaxForkCount))
	}
	if err := checkTimeout("timeout", opts.TimeoutSec, s.cfg.MinTimeout); err != nil {
		return nil, err
	}
	if !sandbox.AddressedAsSandbox(parent.Kind) {
		return nil, domain.NotFound("sandbox", parent.ID)
	}
	forkable := parent.Phase == sandbox.PhaseRunning || (opts.AllowPaused && parent.Phase == sandbox.PhasePaused)
	if !forkable {
		what := string(sandbox.StateRunning)
		if opts.AllowPaused {
			what = string(sandbox.StateRunning) + " or " + string(sandbox.StatePaused)
		}
		return nil, domain.ConflictIn(string(parent.PublicState()), fmt.Sprintf("sandbox %s is %s; only a %s sandbox can be forked", parent.ID, parent.PublicState(), what))
	}
	if s.cfg.Committer == nil {
		return nil, &domain.UnavailableError{Detail: "the " + s.prov.Name() + " provider cannot checkpoint a sandbox, so it cannot fork one"}
	}
	if _, err := s.template(ctx, parent.TemplateID); err != nil {
		return nil, err
	}
	if s.cfg.Admit != nil {
		if err := s.cfg.Admit(ctx, parent.OrgID); err != nil {
			return nil, err
		}
	}
	checkpoint := ids.New()
	image, err := s.checkpoint(ctx, parent, checkpoint)
	if err != nil {
		return nil, err
	}
	out := make([]Forked, opts.Count)
	made := 0
	for i := range out {
		out[i] = s.forkOne(ctx, parent, checkpoint, image, opts.TimeoutSec)
		if out[i].Err == nil {
			made++
		}
	}
	if made == 0 {
		s.dropCheckpoint(checkpoint, []string{image})
	}
	return out, nil
}

// checkpoint commits parent's filesystem to an image labelled with its org,
// its record and checkpoint. A parent that ended while it was committed
// (deleted, expired, killed) is not forked: the image is removed and the
// answer is that the sandbox is gone.
func (s *Service) checkpoint(ctx context.Context, parent *store.Record, checkpoint string) (string, error) {
	labels := map[string]string{compute.LabelOrg: parent.OrgID, compute.LabelRecord: parent.ID, LabelCheckpoint: checkpoint}
	img, err := s.cfg.Committer.Commit(ctx, parent.Ref(), compute.CommitOptions{Name: CheckpointImage(checkpoint, "sandbox"), Labels: labels})
	image := img.Name
	if err != nil {
		if compute.IsNotFound(err) {
			return "", domain.ConflictIn(string(sandbox.StateDeleted), fmt.Sprintf("sandbox %s ended while it was being forked; nothing was forked", parent.ID))
		}
		return "", providerErr("checkpoint", err)
	}
	if s.afterCheckpoint != nil {
		s.afterCheckpoint(parent)
	}
	cur, err := s.db.FreshRecord(ctx, parent.ID)
	if err == nil && (cur.Phase == sandbox.PhaseStopping || cur.Phase.Terminal()) {
		err = domain.ConflictIn(string(cur.PublicState()), fmt.Sprintf("sandbox %s ended while it was being forked (%s); nothing was forked", parent.ID, cur.PublicState()))
	}
	if err != nil {
		s.dropCheckpoint(checkpoint, []string{image})
		return "", err
	}
	return image, nil
}

// forkOne stores one fork of parent, starting from image.
func (s *Service) forkOne(ctx context.Context, parent *store.Record, checkpoint, image string, timeoutSec int) Forked {
	now := s.now()
	token := ids.Token("sbx_at")
	spec := parent.Spec
	spec.EnvVars = maps.Clone(parent.Spec.EnvVars)
	spec.Command = slices.Clone(parent.Spec.Command)
	spec.Volumes = slices.Clone(parent.Spec.Volumes)
	spec.Image = image
	rec := &store.Record{
		ID: ids.New(), OrgID: parent.OrgID, Kind: sandbox.KindRuntime, Provider: parent.Provider, Phase: sandbox.PhasePending,
		TemplateID: parent.TemplateID, Metadata: maps.Clone(parent.Metadata), CPUCount: parent.CPUCount, MemoryMB: parent.MemoryMB,
		AutoPause: parent.AutoPause, AutoResume: parent.AutoResume, TimeoutSec: timeoutSec,
		AccessTokenHash: ids.HashSecret(token), CreatedAt: now, EndAt: now.Add(time.Duration(timeoutSec) * time.Second),
		Spec: spec, ParentID: parent.ID, Checkpoint: checkpoint,
	}
	if _, err := s.insert(ctx, rec, ""); err != nil {
		return Forked{Err: err}
	}
	return Forked{Created: Created{Record: rec, AccessToken: token}}
}

// SetAfterCheckpoint makes every later fork run f between its commit and
// its check that the parent still lives: tests end the parent there. Set it
// before any fork starts.
func (s *Service) SetAfterCheckpoint(f func(parent *store.Record)) { s.afterCheckpoint = f }

// CheckpointImage names the image of one instance of checkpoint (a task
// service's name, or "sandbox").
func CheckpointImage(checkpoint, instance string) string {
	return "dreadnode-checkpoint/" + checkpoint + ":" + instance
}

// LabelCheckpoint labels a checkpoint's images with its id (the records
// forked from it name it in their checkpoint column).
const LabelCheckpoint = "dev.dreadnode.checkpoint"

// ReleaseCheckpoint removes the images of r's checkpoint once no record that
// is not over names it: call it when a forked record ended. An image still
// used by an instance stays (the engine refuses to remove it); the last
// fork to end removes it.
func (s *Service) ReleaseCheckpoint(r *store.Record) {
	if r.Checkpoint == "" || !r.Phase.Terminal() {
		return
	}
	images := slices.Collect(maps.Values(r.Spec.ServiceImages))
	if r.Spec.Image != "" {
		images = append(images, r.Spec.Image)
	}
	go s.dropCheckpoint(r.Checkpoint, images)
}

// dropCheckpoint removes images of checkpoint unless a live record still
// names it.
func (s *Service) dropCheckpoint(checkpoint string, images []string) {
	if s.cfg.Committer == nil || len(images) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inUse, err := s.db.CheckpointInUse(ctx, checkpoint)
	if err != nil || inUse {
		return
	}
	for _, img := range images {
		if err := s.cfg.Committer.RemoveImage(ctx, img); err != nil && !compute.IsNotFound(err) && !errors.Is(err, context.Canceled) {
			s.log.Warn("removing a fork's checkpoint image failed; it is tried again when the next fork of it ends", "checkpoint", checkpoint, "image", img, "err", err)
		}
	}
}
