package tasks

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
)

// Bounds of a fork's count.
const (
	MinForkCount = 1
	MaxForkCount = 100
)

// LabelCheckpoint labels a checkpoint's images with its id (the records
// forked from it name it in their checkpoint column); lifecycle's, whose
// release removes them.
const LabelCheckpoint = "dev.dreadnode.checkpoint"

// ForkRequest asks for Count copies of environment ID.
type ForkRequest struct {
	Org, Workspace, ID string
	Count              int
}

// Forked is one fork's outcome: the environment (with its execute token,
// shown once) or why it could not be made.
type Forked struct {
	Env          *Env
	ExecuteToken string
	Err          error
}

// Fork commits every service of a ready (or paused) environment once (its
// filesystem as it is: one image per service, one-shot services left out,
// their work is in the others' files) and makes Count environments from
// those images: each its own network, service URLs and execute token,
// ready without the task's build or its one-shot seeding. Memory is not
// copied: the services' processes start again from their commands. Each
// fork is placed by admission like a create and is a record of its own
// naming the parent's.
func (s *Service) Fork(ctx context.Context, req ForkRequest) ([]Forked, error) {
	if req.Count < MinForkCount || req.Count > MaxForkCount {
		return nil, domain.Invalid("count", fmt.Sprintf("must be between %d and %d", MinForkCount, MaxForkCount))
	}
	if _, err := s.Get(ctx, req.Org, req.Workspace, req.ID); err != nil {
		return nil, err
	}
	if s.cfg.Committer == nil {
		return nil, &domain.UnavailableError{Detail: "this provider cannot checkpoint a task environment's services, so it cannot fork one"}
	}
	// The parent's own operations (pause, resume, delete) wait for the commit.
	unlock := s.lockEnv(req.ID)
	parent, task, images, checkpoint, err := s.checkpointEnv(ctx, req)
	unlock()
	if err != nil {
		return nil, err
	}
	out := make([]Forked, req.Count)
	made := 0
	for i := range out {
		if out[i] = s.forkOne(ctx, parent, task, checkpoint, images); out[i].Err == nil {
			made++
		}
	}
	if made == 0 {
		s.dropImages(slices.Collect(maps.Values(images)))
	}
	return out, nil
}

// checkpointEnv commits the services of environment req.ID; the caller holds
// its lock.
func (s *Service) checkpointEnv(ctx context.Context, req ForkRequest) (*Env, *catalog.Task, map[string]string, string, error) {
	parent, err := s.Get(ctx, req.Org, req.Workspace, req.ID)
	if err != nil {
		return nil, nil, nil, "", err
	}
	if parent.State != taskenv.StateReady && parent.State != taskenv.StatePaused {
		return nil, nil, nil, "", domain.ConflictIn(string(parent.State), fmt.Sprintf("environment %s is %s; only a ready or paused environment can be forked", parent.ID, parent.State))
	}
	task := s.catalog.Exact(parent.TaskOrg, parent.TaskName, parent.TaskVersion)
	if task == nil {
		return nil, nil, nil, "", domain.ConflictIn(string(parent.State), fmt.Sprintf("task %s of environment %s is no longer in the catalog; it cannot be forked", parent.TaskRef, parent.ID))
	}
	checkpoint := ids.New()
	images := map[string]string{}
	for _, svc := range slices.Sorted(maps.Keys(parent.Containers)) {
		if slices.Contains(parent.OneShots, svc) {
			continue
		}
		img, err := s.cfg.Committer.Commit(ctx, compute.Ref{ID: parent.Containers[svc], Record: parent.RecordID}, compute.CommitOptions{
			Name:   "dreadnode-checkpoint/" + checkpoint + ":" + svc,
			Labels: map[string]string{compute.LabelOrg: parent.OrgID, compute.LabelRecord: parent.RecordID, compute.LabelService: svc, LabelCheckpoint: checkpoint}})
		if err != nil {
			s.dropImages(slices.Collect(maps.Values(images)))
			return nil, nil, nil, "", &domain.ProviderError{Detail: fmt.Sprintf("could not checkpoint service %q of environment %s: %v", svc, parent.ID, err)}
		}
		images[svc] = img.Name
	}
	return parent, task, images, checkpoint, nil
}

// forkOne stores one fork of parent that starts its services from images.
func (s *Service) forkOne(ctx context.Context, parent *Env, task *catalog.Task, checkpoint string, images map[string]string) Forked {
	prec, err := s.db.GetRecord(ctx, parent.RecordID)
	if err != nil {
		return Forked{Err: err}
	}
	now := s.now()
	token := ids.Token("det")
	detail := "forked from " + parent.ID
	e := &Env{ID: ids.New(), OrgID: parent.OrgID, Workspace: parent.Workspace, TaskRef: parent.TaskRef, TaskOrg: parent.TaskOrg,
		TaskName: parent.TaskName, TaskVersion: parent.TaskVersion, Inputs: maps.Clone(parent.Inputs), Resolved: maps.Clone(parent.Resolved),
		TimeoutSec: parent.TimeoutSec, ProjectID: parent.ProjectID, SecretIDs: slices.Clone(parent.SecretIDs), State: taskenv.StateBuilding,
		ExecuteService: parent.ExecuteService, TokenHash: ids.HashSecret(token), RecordID: ids.New(),
		Deadline: now.Add(s.cfg.BuildDeadline), CreatedAt: now, UpdatedAt: now,
		Timeline: []TimelineEntry{{State: taskenv.StateBuilding, At: now, Detail: detail}}}
	rec := &store.Record{ID: e.RecordID, OrgID: e.OrgID, Kind: sandbox.KindTask, Provider: s.providerName, Phase: sandbox.PhasePending,
		TemplateID: prec.TemplateID, TimeoutSec: e.TimeoutSec, CPUCount: prec.CPUCount, MemoryMB: prec.MemoryMB, EnvironmentID: e.ID,
		CreatedAt: now, PhaseDeadline: e.Deadline, ParentID: prec.ID, Checkpoint: checkpoint,
		Spec:     store.Spec{ServiceImages: maps.Clone(images)},
		Metadata: map[string]string{"environment_id": e.ID, "workspace": e.Workspace, "task": prec.TemplateID, "forked_from": parent.ID}}
	if err := s.db.Tx(ctx, func(tx *sql.Tx) error { return s.insertTx(ctx, tx, task, e, rec) }); err != nil {
		return Forked{Err: err}
	}
	s.log.Info("task environment forked", "environment", e.ID, "parent", parent.ID, "org", e.OrgID, "record", e.RecordID,
		"waits_for_admission", rec.Phase == sandbox.PhaseQueued)
	s.inserted(e, rec)
	return Forked{Env: e, ExecuteToken: token}
}

// ReleaseCheckpoint removes the images of a forked environment's
// checkpoint once no live record names it: call it when its record ended.
func (s *Service) ReleaseCheckpoint(rec *store.Record) {
	if rec.Checkpoint == "" || len(rec.Spec.ServiceImages) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if inUse, err := s.db.CheckpointInUse(ctx, rec.Checkpoint); err != nil || inUse {
			return
		}
		s.dropImages(slices.Collect(maps.Values(rec.Spec.ServiceImages)))
	}()
}

// dropImages removes checkpoint images (an image an instance still uses
// stays: the engine refuses, and the last fork to end removes it).
func (s *Service) dropImages(images []string) {
	if s.cfg.Committer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, img := range images {
		if err := s.cfg.Committer.RemoveImage(ctx, img); err != nil && !compute.IsNotFound(err) {
			s.log.Warn("removing a forked environment's checkpoint image failed; it is tried again when the next fork of it ends", "image", img, "error", err)
		}
	}
}

// forkGroup is the group a forked environment runs: each service from its
// checkpoint image, the one-shot services (whose work is in the checkpoint)
// left out with the conditions on them.
func forkGroup(g *compute.Group, images map[string]string) *compute.Group {
	for name, svc := range g.Services {
		img, ok := images[name]
		if !ok {
			delete(g.Services, name)
			continue
		}
		svc.From = img
		g.Services[name] = svc
	}
	for name, svc := range g.Services {
		for dep := range svc.DependsOn {
			if _, ok := g.Services[dep]; !ok {
				delete(svc.DependsOn, dep)
			}
		}
		g.Services[name] = svc
	}
	return g
}
