// Package provider defines the contract between the backend and a compute
// provider (Docker locally, E2B in production). Higher-level code (the
// reconciler, runtimes, the API) only ever talks to this interface, so a
// deployment can switch providers without touching them.
package compute

import (
	"context"
	"time"
)

// Label keys carried by every instance a provider creates. They let the
// reconciler adopt instances after a crash and remove orphans whose record is
// gone (Docker labels; E2B metadata).
const (
	LabelManaged = "dev.dreadnode.managed" // always "true"
	LabelRecord  = "dev.dreadnode.record"  // the ledger record id
	LabelOrg     = "dev.dreadnode.org"     // the owning org id
	LabelKind    = "dev.dreadnode.kind"    // runtime, task, world
	// LabelDeployment names the database a backend runs on. Providers list
	// and sweep only their own deployment's instances, so several backends
	// (tests, dev and CI) can share one Docker engine or E2B team.
	LabelDeployment = "dev.dreadnode.deployment"
)

// Network is the egress and ingress policy of an instance.
type Network struct {
	// AllowInternetAccess false cuts all egress (nil means allowed).
	AllowInternetAccess *bool    `json:"allowInternetAccess,omitempty"`
	AllowPublicTraffic  *bool    `json:"allowPublicTraffic,omitempty"`
	AllowOut            []string `json:"allowOut,omitempty"`
	DenyOut             []string `json:"denyOut,omitempty"`
}

// Spec is everything a provider needs to create one instance.
type Spec struct {
	RecordID string // our ledger record id; becomes a label / metadata entry
	OrgID    string
	Kind     string // runtime, task, world
	Template string // template id, e.g. "base"
	// Image, when set, is a local image the instance starts from instead of
	// its template's own: an image made by Committer.Commit (a snapshot or
	// a fork's checkpoint) or an org's built template (API §14–§15). The
	// template gives ports, runtime and default resources (the base
	// template's when Template names an org's own). Providers that cannot
	// start a local image refuse it (invalid).
	Image     string
	EnvVars   map[string]string
	Metadata  map[string]string
	CPUCount  int // 0 means the template default
	MemoryMB  int // 0 means the template default
	Command   []string
	Timeout   time.Duration // providers with their own TTL (E2B) get it; Docker ignores it
	AutoPause bool
	// AutoResume lets traffic resume a paused instance (E2B resumes it on
	// its side; with Docker the backend's traffic router does).
	AutoResume bool
	Network    Network
	// Volumes are mounted volumes: an org volume (VolumeID set), made
	// beforehand by VolumeProvider.CreateVolume and kept after the
	// instance, or else a volume private to the instance, removed with it.
	Volumes []Volume
	// ExposeLoopback: servers listening only on the instance's loopback are
	// reachable on its address too, as on E2B (whose envd does it; set for
	// sandboxes created through the E2B edge).
	ExposeLoopback bool
}

// Volume mounts a named volume at Path.
type Volume struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// VolumeID names the org volume mounted (API.md §14); "" mounts a
	// volume private to the instance, made with it and removed with it.
	VolumeID string `json:"volumeID,omitempty"`
}

// RecordSweeper is implemented by providers that can leave something of a
// record behind without an instance to find it by (Docker: the private
// volumes a create made before it was stopped or crashed, with no
// container left). SweepRecord removes it; nothing left is no error.
type RecordSweeper interface {
	SweepRecord(ctx context.Context, record string) error
}

// VolumeSpec is an org volume to make at the provider.
type VolumeSpec struct {
	ID    string // the volume's id; the provider names its volume from it
	OrgID string
	Name  string // the org's name for it, for labels and the operator
}

// VolumeProvider is implemented by providers that hold org volumes
// (API.md §14): named, per org, persistent until deleted, mountable by
// several instances at once (Spec.Volumes with VolumeID).
type VolumeProvider interface {
	// CreateVolume makes the volume; making one that exists is no error.
	CreateVolume(ctx context.Context, v VolumeSpec) error
	// DeleteVolume removes it; a missing one is no error, one still
	// mounted by an instance is KindConflict.
	DeleteVolume(ctx context.Context, id string) error
	// VolumeBytes is the disk use of every org volume of this deployment,
	// by volume id, as cheaply as the provider can measure it (nil with no
	// error when it cannot).
	VolumeBytes(ctx context.Context) (map[string]int64, error)
}

// Status is what the provider observes of an instance.
type Status string

const (
	StatusRunning Status = "running"
	StatusPaused  Status = "paused"
	StatusExited  Status = "exited"  // main process ended; ExitCode is set
	StatusCreated Status = "created" // exists but was never started
)

// Endpoint is one reachable port of an instance.
type Endpoint struct {
	Host string `json:"host"`
	Port int    `json:"port"`
	URL  string `json:"url"`
}

// Ref addresses an instance: the provider's id plus opaque provider data that
// the backend persists on the record (e.g. E2B's envd access token).
type Ref struct {
	ID   string
	Data string
	// Record is the id of the record the instance serves (the sandbox's id
	// the user knows), for messages only: providers key on ID, and say
	// "sandbox <Record>" rather than their own id when it is set.
	Record string
	// Provider names the provider owning the instance when several serve one
	// deployment (see package multi); single providers ignore it.
	Provider string
}

// Instance is a provider's view of one instance.
type Instance struct {
	Ref      Ref
	RecordID string // from the labels / metadata; "" when not ours
	OrgID    string
	Status   Status
	ExitCode int
	// ExitReason explains an exit in the user's terms (e.g. "out of memory").
	ExitReason string
	StartedAt  time.Time
	// Endpoints maps an instance port to where it is reachable from the backend.
	Endpoints map[int]Endpoint
	CPUCount  int
	MemoryMB  int
	// EgressDrops counts the instance's packets the host's egress rules
	// dropped, by reason (policy, link_local, host, private, offline);
	// filled by List where the provider keeps such counters (Docker), nil
	// when nothing was dropped or the provider cannot tell.
	EgressDrops map[string]uint64
}

// ExecRequest runs one command inside an instance.
type ExecRequest struct {
	Cmd     []string
	Env     map[string]string
	Cwd     string
	Timeout time.Duration
}

// ExecResult is the outcome of an ExecRequest.
type ExecResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	// Truncated says output past MaxExecOutputBytes (of stdout or of
	// stderr) was read and dropped: the command ran to its end regardless.
	Truncated bool
}

// Metrics is a point-in-time resource reading.
type Metrics struct {
	CPUPercent       float64 `json:"cpuPercent"`
	CPUCount         int     `json:"cpuCount"`
	MemoryUsedBytes  uint64  `json:"memoryUsedBytes"`
	MemoryLimitBytes uint64  `json:"memoryLimitBytes"`
	DiskUsedBytes    uint64  `json:"diskUsedBytes"`
	// DiskLimitBytes is what the instance may write (0: no limit known).
	DiskLimitBytes uint64 `json:"diskLimitBytes"`
	// ImageBytes is the size of the image the instance runs (files it
	// has without writing them; 0 where the provider counts them in
	// DiskUsedBytes, as E2B does).
	ImageBytes     uint64 `json:"imageBytes"`
	NetworkRxBytes uint64 `json:"networkRxBytes"`
	NetworkTxBytes uint64 `json:"networkTxBytes"`
	Pids           uint64 `json:"pids"`
}

// Template describes an image the provider can start.
type Template struct {
	ID       string
	CPUCount int
	MemoryMB int
	Ports    []int
	// Runtime names the engine runtime its instances run on (Docker: e.g.
	// runsc for gVisor, kata); "" is the engine's default. A create on an
	// engine without it fails, naming the runtimes it has.
	Runtime string
}

// Provider is implemented by the Docker and E2B providers. Every method must be
// safe for concurrent use, and Create must be idempotent per Spec.RecordID: a
// second Create for the same record (after a crash) adopts the existing
// instance instead of making another.
type Provider interface {
	Name() string // "docker" or "e2b"
	// Ping reports whether the provider answers (for /readyz).
	Ping(ctx context.Context) error
	// Templates lists the templates this provider can start.
	Templates(ctx context.Context) ([]Template, error)
	Create(ctx context.Context, spec Spec) (Instance, error)
	// Get returns ErrNotFound (wrapped in *Error) when the instance is gone.
	Get(ctx context.Context, ref Ref) (Instance, error)
	// List returns every instance carrying LabelManaged, ours or orphaned.
	List(ctx context.Context) ([]Instance, error)
	Pause(ctx context.Context, ref Ref) error
	// PauseFilesystem pauses keeping only the filesystem (E2B's pause
	// `memory: false`): the instance stops and its memory is freed; Resume
	// starts it again, its processes from the template's command. Pausing
	// an instance that is not running is KindConflict.
	PauseFilesystem(ctx context.Context, ref Ref) error
	// Resume returns the instance as running, with possibly new Ref.Data.
	Resume(ctx context.Context, ref Ref) (Instance, error)
	// Delete removes the instance and its volumes; a missing instance is not an error.
	Delete(ctx context.Context, ref Ref) error
	// SetTimeout moves a provider-side TTL (E2B); providers without one return nil.
	SetTimeout(ctx context.Context, ref Ref, d time.Duration) error
	Exec(ctx context.Context, ref Ref, req ExecRequest) (ExecResult, error)
	ReadFile(ctx context.Context, ref Ref, path string) ([]byte, error)
	WriteFile(ctx context.Context, ref Ref, path string, data []byte) error
	Logs(ctx context.Context, ref Ref) (string, error)
	Metrics(ctx context.Context, ref Ref) (Metrics, error)
}

// NetworkChecker is implemented by providers that enforce only part of
// Network: CheckNetwork names the first field of n they cannot enforce for
// template and why ("" when all of it holds), so the API refuses the
// request (400) before any record exists, rather than failing it later.
type NetworkChecker interface {
	CheckNetwork(template string, n Network) (field, reason string)
}

// HelperSweeper is implemented by providers that start helper instances
// no record owns (Docker's route helper and agent-volume filler): the
// reconciler's orphan sweep calls SweepHelpers each period to remove those
// whose owner is gone, which List, being for sandboxes, never shows.
type HelperSweeper interface {
	SweepHelpers(ctx context.Context) error
}

// Event reports a change the provider observed without being asked (e.g. a
// container's main process exited). The reconciler re-reads the record.
type Event struct {
	RecordID string
	Ref      Ref
	Status   Status
}

// Watcher is implemented by providers that can push events; the reconciler
// still sweeps, so a missed event only delays a transition.
type Watcher interface {
	Watch(ctx context.Context) <-chan Event
}

// Labels of the images the backend makes from sandboxes: a fork's
// checkpoint (its id; the records forked from it name it) and a snapshot's
// build (its id in the template builds). The services that make them use
// these keys, and the reconciler's image sweep reads them.
const (
	LabelCheckpoint    = "dev.dreadnode.checkpoint"
	LabelSnapshotBuild = "dev.dreadnode.build"
)

// OwnedImage is a local image the deployment made: a fork's checkpoint, a
// snapshot, or a template build's tagged image.
type OwnedImage struct {
	ID      string
	Created time.Time
	// Checkpoint is the fork checkpoint it holds (LabelCheckpoint), "" if none.
	Checkpoint string
	// SnapshotBuild is the snapshot build it is (LabelSnapshotBuild), "" if none.
	SnapshotBuild string
	// TemplateTags are the template-build tags on it (a build's image, as
	// its record names it).
	TemplateTags []string
}

// ImageSweeper is implemented by providers that keep local images the
// backend made (Docker). The reconciler's sweep lists them and removes
// those no record owns any longer (a backend that died between a commit
// and its record, or before a fork's checkpoint was released); an image a
// container still uses is refused by RemoveImage (KindConflict) and kept.
type ImageSweeper interface {
	OwnedImages(ctx context.Context) ([]OwnedImage, error)
	RemoveImage(ctx context.Context, ref string) error
}
