package app

import (
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/templates"
)

// The reconciler's image sweep (compute.OwnedImage) reads the labels the
// fork and snapshot paths write: they must be the same keys, or the sweep
// would take every checkpoint or snapshot for an orphan, or none.
func TestImageSweepLabelsAreTheWritersLabels(t *testing.T) {
	for name, pair := range map[string][2]string{
		"lifecycle checkpoint": {lifecycle.LabelCheckpoint, compute.LabelCheckpoint},
		"tasks checkpoint":     {tasks.LabelCheckpoint, compute.LabelCheckpoint},
		"snapshot build":       {templates.LabelBuild, compute.LabelSnapshotBuild},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s: written as %q, swept as %q", name, pair[0], pair[1])
		}
	}
}
