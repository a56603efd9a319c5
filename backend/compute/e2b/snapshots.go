package e2b

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// SnapshotImagePrefix marks, in a Spec's Image, a snapshot E2B holds: the
// rest is E2B's template id of the snapshot, which Create starts from.
const SnapshotImagePrefix = "e2b-snapshot:"

// Snapshots is the committer of snapshots on E2B (the templates service's
// Images): E2B's own POST /sandboxes/{sandboxID}/snapshots makes a
// snapshot template in the team, DELETE /templates/{templateID} removes
// it. It is not the provider's compute.Committer, so a fork on E2B still
// answers that the provider cannot checkpoint (E2B's snapshot keeps the
// sandbox's memory too, and each fork would be a team template to clean up).
func (p *Provider) Snapshots() compute.Committer { return snapshotter{p} }

type snapshotter struct{ p *Provider }

// Commit implements compute.Committer: an unnamed E2B snapshot of ref (E2B
// pauses the sandbox for it and resumes it). The image is
// SnapshotImagePrefix + E2B's template id; E2B reports no size (0).
// opts are ours: E2B's snapshot carries no labels, and its name is not
// given (E2B's names are the team's namespace, not ours).
func (s snapshotter) Commit(ctx context.Context, ref compute.Ref, _ compute.CommitOptions) (compute.CommittedImage, error) {
	const op = "snapshot"
	if err := checkRef(op, ref); err != nil {
		return compute.CommittedImage{}, err
	}
	var info e2btypes.SnapshotInfo
	if _, err := s.p.do(ctx, &call{op: op, method: http.MethodPost, path: sandboxPath(ref.ID, "/snapshots"), sandboxID: ref.ID,
		body: e2btypes.SandboxSnapshotRequest{}, ok: []int{http.StatusCreated}, out: &info}); err != nil {
		return compute.CommittedImage{}, err
	}
	id, _, _ := strings.Cut(info.SnapshotID, ":")
	if id == "" {
		return compute.CommittedImage{}, compute.Errorf(compute.KindUnavailable, op, nil, "E2B answered a snapshot without an id (%q)", info.SnapshotID)
	}
	return compute.CommittedImage{ID: id, Name: SnapshotImagePrefix + id, CreatedAt: time.Now().UTC()}, nil
}

// RemoveImage implements compute.Committer: DELETE /templates/{templateID}
// of a snapshot Commit made; one E2B does not know is not an error, and
// anything else than a snapshot's image is left alone.
func (s snapshotter) RemoveImage(ctx context.Context, image string) error {
	id, ok := strings.CutPrefix(image, SnapshotImagePrefix)
	if !ok || id == "" {
		return nil
	}
	_, err := s.p.do(ctx, &call{op: "remove snapshot", method: http.MethodDelete, path: "/templates/" + url.PathEscape(id), ok: []int{http.StatusNoContent}})
	if compute.IsNotFound(err) {
		return nil
	}
	return err
}
