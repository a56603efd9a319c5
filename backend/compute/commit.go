package compute

import (
	"context"
	"time"
)

// Committer is implemented by providers that can copy an instance's
// filesystem (image plus writable layer; never its memory or processes)
// into an image other instances start from: snapshot templates and the
// checkpoint of a fork. Callers find it with a type assertion on the
// Provider; a provider without it cannot snapshot or fork.
type Committer interface {
	// Commit copies ref's filesystem into a new image. A running instance
	// is frozen only for the copy and runs on after it; a paused one stays
	// paused. The image carries opts.Labels (and, on Docker, the
	// instance's own labels, which Create clears for a Spec.Image).
	Commit(ctx context.Context, ref Ref, opts CommitOptions) (CommittedImage, error)
	// RemoveImage deletes an image made by Commit; a missing image is not
	// an error, one still used by an instance is KindConflict.
	RemoveImage(ctx context.Context, image string) error
}

// CommitOptions name and label the image Commit makes.
type CommitOptions struct {
	// Name is the reference to give the image ("repository:tag"); "" leaves
	// it untagged, addressed by Image.ID.
	Name string
	// Labels are set on the image (owner org, record, deployment), so
	// images can be listed and swept like instances.
	Labels map[string]string
}

// CommittedImage is what Commit made.
type CommittedImage struct {
	ID        string    // the provider's image id (Docker: sha256:…)
	Name      string    // CommitOptions.Name, when one was given
	SizeBytes int64     // the whole image's size
	CreatedAt time.Time // when the copy was taken
}
