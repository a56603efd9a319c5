package compute

import (
	"context"
	"io"
	"time"
)

// Labels (Docker) and metadata keys (E2B) every member of a group carries
// besides the Label* keys of a sandbox, so that Snapshot, Remove and a
// restarted backend find a group's members again.
const (
	LabelGroup      = "dev.dreadnode.environment" // the group id (a task environment's id)
	LabelService    = "dev.dreadnode.service"     // the service the member runs
	LabelGroupOwner = "dev.dreadnode.tasks.owner" // the backend (database) owning the group
	LabelTask       = "dev.dreadnode.task"        // the task's ref, org/name@version
)

// GroupNetworkName is the name of group id's private network (and the
// provider id of its ledger record).
func GroupNetworkName(id string) string { return "dn-" + id }

// GroupProvider runs groups: sets of services on one private network of
// their own, started in dependency and health order, each addressed by its
// service name by the others, torn down together. A group is what a task
// environment runs on. Errors worded for a user are *BuildError,
// *ServiceError (a *DeadlineError when the caller's deadline passed) and
// *ProviderError; Exec reports a service that is not running with
// ErrNotRunning.
type GroupProvider interface {
	// BuildsImages reports whether the provider runs images built from the
	// task's sources (Docker); one that does not (E2B) starts the services'
	// prebuilt templates, and its callers compute no images.
	BuildsImages() bool
	// Missing reports the images of imgs to build or absent; Build builds
	// them, returning how many it built.
	Missing(ctx context.Context, imgs map[string]*Image) ([]*Image, error)
	Build(ctx context.Context, imgs map[string]*Image) (int, error)
	// Builds is the number of image builds run so far.
	Builds() int64
	// Bring starts (or adopts) every service of g and waits until they
	// are ready. When ctx ends before that, the error is a *DeadlineError
	// (a deadline) or the context's cause.
	Bring(ctx context.Context, g *Group) (*GroupResult, error)
	// Remove deletes everything of group id (idempotent); RemoveCount
	// also says how many resources it found.
	Remove(ctx context.Context, id string) error
	RemoveCount(ctx context.Context, id string) (int, error)
	// Pause pauses every running service of the group, or none;
	// Unpause resumes the paused ones.
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
	// Exec runs argv in service's instance with a budget of timeout
	// (exceeding it: TimedOut, exit code 124), keeping up to maxOutput bytes
	// of combined output.
	Exec(ctx context.Context, id, service string, argv []string, timeout time.Duration, maxOutput int) (*GroupExecResult, error)
	// ExecStream runs argv like Exec but emits its events as they happen
	// (start, stdout, stderr, exit); the result carries no Output.
	ExecStream(ctx context.Context, id, service string, argv []string, timeout time.Duration, emit Emit) (*GroupExecResult, error)
	// Snapshot lists every member of this owner's groups by group id.
	Snapshot(ctx context.Context) (*GroupSnapshot, error)
	// LastLogs returns the last n log lines of member id.
	LastLogs(ctx context.Context, id string, n int) []string
	// Ping reports whether the runtime answers (for /readyz).
	Ping(ctx context.Context) error
	// Negotiate prepares the client before concurrent use; Watch follows
	// the runtime's events until ctx is done (it may return at once when
	// the runtime has none).
	Negotiate(ctx context.Context)
	Watch(ctx context.Context)
	Close() error
}

// GroupKeepAliver is implemented by group providers whose instances have a
// provider-side time to live (E2B): KeepAlive keeps every instance of group
// id alive at least d from now.
type GroupKeepAliver interface {
	KeepAlive(ctx context.Context, id string, d time.Duration) error
}

// GroupTarget names a group and what its resources are labelled with.
type GroupTarget struct {
	ID       string // the group id
	RecordID string // its ledger record
	OrgID    string
	TaskRef  string // org/name@version
}

// Group is one group to bring up.
type Group struct {
	GroupTarget
	// Services by name (the name other services reach it by).
	Services map[string]GroupService
	// Expose maps a service to the port whose address becomes its endpoint
	// (Docker: on the group's network, never published on the host).
	Expose map[string]int
	// Runtime is the engine runtime of every service ("" the default).
	Runtime string
	// AllowOut is what the services may reach beyond the group's own
	// network (IP addresses and CIDR blocks); empty: nothing.
	AllowOut []string
}

// Condition is what a service waits for of a dependency.
type Condition string

// Conditions of GroupService.DependsOn (compose's depends_on conditions).
const (
	ConditionStarted   Condition = "service_started"
	ConditionHealthy   Condition = "service_healthy"
	ConditionCompleted Condition = "service_completed_successfully"
)

// GroupService is one service of a group: its image (or template) and how
// its instance runs. Nil slices and pointers are "unset" (the image's).
type GroupService struct {
	Image string // the image reference (Docker)
	// From, when set, is the image the instance runs instead of Image (a
	// forked environment's checkpoint of the service); Image's
	// configuration still makes its main command.
	From     string
	Template string // the prebuilt template (E2B)
	// DependsOn maps the services this one waits for to the condition.
	DependsOn map[string]Condition
	// Aliases are further names the service answers to on the network.
	Aliases     []string
	Env         map[string]string
	Command     []string
	Entrypoint  []string
	Hostname    string // default the service's name
	DomainName  string
	User        string
	WorkingDir  string
	Labels      map[string]string
	Tty         bool
	StdinOpen   bool
	StopSignal  string
	StopTimeout *time.Duration
	Healthcheck *Healthcheck
	Init        *bool
	ReadOnly    bool
	ExtraHosts  []string // host:ip
	ShmSize     int64
	GroupAdd    []string
	DNS         []string
	DNSSearch   []string
	DNSOptions  []string
	Tmpfs       []string // path[:options]
	CapAdd      []string
	CapDrop     []string
	// MemReservation is a soft memory floor in bytes (0: none).
	MemReservation int64
	// Limits are the service's own; a zero field takes the provider's
	// default.
	Limits GroupLimits
}

// GroupLimits caps one service (zero: the provider's default).
type GroupLimits struct {
	MemoryBytes int64
	NanoCPUs    int64
	Pids        int64
}

// Healthcheck is a service's health command; Test ["NONE"] disables the
// image's. Zero durations and Retries take the engine's defaults.
type Healthcheck struct {
	Test        []string
	Interval    time.Duration
	Timeout     time.Duration
	StartPeriod time.Duration
	Retries     int
}

// OneShots are the services some other service waits for to complete
// successfully: they may exit 0 and still be ready.
func (g *Group) OneShots() map[string]bool {
	out := map[string]bool{}
	for _, s := range g.Services {
		for dep, c := range s.DependsOn {
			if c == ConditionCompleted {
				out[dep] = true
			}
		}
	}
	return out
}

// GroupResult is what a successful Bring produced.
type GroupResult struct {
	Endpoints  map[string]Endpoint
	Containers map[string]string // service -> instance id
	// OneShots are services that may exit 0 (sorted).
	OneShots []string
	Adopted  int // instances found running and kept
}

// Image is the image one service runs.
type Image struct {
	Service string
	Ref     string // what the service runs: a content-addressed tag, or the service's image
	Build   bool   // built from the task's sources
	Hash    string // sha256 of the build inputs (Build only)
	// The build (Build only): Dockerfile is its path inside the context,
	// which WriteContext streams as a tar.
	Dockerfile   string
	Args         map[string]*string
	Target       string
	WriteContext func(w io.Writer) error
}

// GroupExecResult is the outcome of Exec.
type GroupExecResult struct {
	ExitCode  int
	Output    []byte // stdout and stderr, interleaved as written
	Truncated bool   // output beyond the limit was dropped
	TimedOut  bool
	Duration  time.Duration
}

// GroupMember is one instance of a GroupSnapshot.
type GroupMember struct {
	ID      string
	Name    string
	GroupID string
	Service string
	State   string // created, running, paused, restarting, removing, exited, dead
	Status  string // human text, e.g. "Exited (1) 3 seconds ago"
	Image   string
}

// Alive reports whether the member's instance still runs its service
// (running, paused, or being restarted by its restart policy): the states
// Docker reports and the Status values E2B's instances take.
func (m GroupMember) Alive() bool {
	switch m.State {
	case "running", "paused", "restarting":
		return true
	}
	return false
}

// GroupSnapshot is every instance and network of a provider's owner, by
// group id.
type GroupSnapshot struct {
	Containers map[string][]GroupMember
	Networks   map[string][]string // network ids
}

// Or is l with each unset field taken from def; a memory limit taken from
// def is raised to memReservation (a limit below the service's own
// reservation would be refused).
func (l GroupLimits) Or(def GroupLimits, memReservation int64) GroupLimits {
	out := def
	if l.MemoryBytes > 0 {
		out.MemoryBytes = l.MemoryBytes
	} else {
		out.MemoryBytes = max(out.MemoryBytes, memReservation)
	}
	if l.NanoCPUs > 0 {
		out.NanoCPUs = l.NanoCPUs
	}
	if l.Pids > 0 {
		out.Pids = l.Pids
	}
	return out
}
