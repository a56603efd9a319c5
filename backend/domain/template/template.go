// Package template holds the words of an org's templates (API §15) and
// snapshots (§14): what a template is made by, the states of its builds,
// and the tag every template keeps. Stdlib only, like the rest of the domain.
package template

// Kind says what made a template.
type Kind string

const (
	// KindBuild is a template built from a base image and steps.
	KindBuild Kind = "build"
	// KindSnapshot is a sandbox's filesystem committed to an image.
	KindSnapshot Kind = "snapshot"
)

// Status is a build's state (E2B's TemplateBuildStatus).
type Status string

const (
	StatusWaiting  Status = "waiting"  // requested, not started
	StatusBuilding Status = "building" // the engine is building it
	StatusReady    Status = "ready"    // its image exists and sandboxes may start from it
	StatusError    Status = "error"    // it failed; reason says why
)

// Done reports whether a build in s will not change any more.
func (s Status) Done() bool { return s == StatusReady || s == StatusError }

// DefaultTag is the tag a name without one means; it always points at a
// build (a template's newest unless moved) and cannot be deleted.
const DefaultTag = "default"

// Log levels of a build's log entries (E2B's LogLevel).
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)
