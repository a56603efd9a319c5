package reconciler

import (
	"context"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// sweepImages removes the images the backend made whose owner is gone (at
// most once per ImageSweepEvery, part of the orphan sweep): a fork's
// checkpoint no live record was forked from (the fork path releases it
// when the last fork ends; a backend that died meanwhile, or between the
// commit and the forks' records, left it), a snapshot whose build record
// does not exist (a snapshot answered with an error, or deleted, whose
// image removal did not happen), a template build's tag no build names.
// Images younger than ImageGrace are kept: their record may be about to be
// written. An image a container still uses is refused by the engine and
// kept (a sandbox started from a deleted snapshot runs on).
func (rc *Reconciler) sweepImages(ctx context.Context) {
	is, ok := rc.prov.(compute.ImageSweeper)
	if !ok {
		return
	}
	now := rc.cfg.Clock.Now()
	if last := rc.imagesSwept.Load(); last != 0 && now.UnixNano()-last < int64(rc.cfg.ImageSweepEvery) {
		return
	}
	rc.imagesSwept.Store(now.UnixNano())
	imgs, err := is.OwnedImages(ctx)
	if err != nil {
		rc.log.Warn("listing the backend's images for the orphan sweep failed; retrying next period", "err", err)
		return
	}
	for _, img := range imgs {
		if now.Sub(img.Created) < rc.cfg.ImageGrace {
			continue
		}
		var refs []string // what to remove: the image, or its orphaned tags
		switch {
		case img.Checkpoint != "":
			inUse, err := rc.db.CheckpointInUse(ctx, img.Checkpoint)
			if err != nil || inUse {
				continue
			}
			refs = []string{img.ID}
		case img.SnapshotBuild != "":
			owned, err := rc.db.BuildOwnsImage(ctx, img.SnapshotBuild, "")
			if err != nil || owned {
				continue
			}
			refs = []string{img.ID}
		default:
			for _, tag := range img.TemplateTags {
				if owned, err := rc.db.BuildOwnsImage(ctx, "", tag); err == nil && !owned {
					refs = append(refs, tag)
				}
			}
		}
		for _, ref := range refs {
			rc.log.Info("removing an image whose record is gone or whose forks all ended", "image", ref, "checkpoint", img.Checkpoint, "snapshot_build", img.SnapshotBuild)
			if err := is.RemoveImage(ctx, ref); err != nil && !compute.IsNotFound(err) {
				rc.log.Debug("an orphaned image was not removed (in use, or the engine refused); retrying next sweep", "image", ref, "err", err)
			}
		}
	}
}
