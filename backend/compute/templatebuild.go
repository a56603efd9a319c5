package compute

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// TemplateBuilder is implemented by providers that build template images
// (Docker: backend/compute/docker/templatebuild). The caller (the template
// service behind /e2b and the native routes) keeps the records, the files
// and the log; the builder only makes images, each step contained like a
// sandbox. Find it with a type assertion on the Provider, as NetworkChecker.
type TemplateBuilder interface {
	// BuildTemplate runs req to the end and returns the image it made. It
	// blocks; cancelling ctx stops the build and removes every container
	// and image it made. Errors are *TemplateBuildError.
	BuildTemplate(ctx context.Context, req TemplateBuild) (TemplateBuildResult, error)
	// TemplateImage reads back what a built image carries (its start and
	// ready commands), e.g. for a sandbox's start; KindNotFound when absent.
	TemplateImage(ctx context.Context, ref string) (TemplateImage, error)
	// RemoveTemplateImage removes the tag BuildTemplate made (a missing one
	// is fine); layers shared with other templates or the cache stay.
	RemoveTemplateImage(ctx context.Context, ref string) error
}

// TemplateBuild is one build request.
type TemplateBuild struct {
	TemplateID string // labels the images; part of the ref (dreadnode-template/<id>:<build>)
	BuildID    string // idem; [a-zA-Z0-9_.-]
	OrgID      string // labels the images and containers

	// Exactly one of FromImage and FromTemplate is set.
	FromImage    string // a local image ("ubuntu:22.04"): no registry, never pulled
	FromTemplate string // the Image of an earlier TemplateBuildResult: its start command is inherited

	Steps []TemplateStep

	// StartCmd runs in the background at the end of the build and at every
	// sandbox start; ReadyCmd is retried until it exits 0. nil inherits the
	// parent template's (with the dir, user and env it was defined with);
	// "" clears it.
	StartCmd *string
	ReadyCmd *string

	Force    bool // ignore the cache for every step (each step also has its own Force)
	CPUCount int  // of each RUN step and the start check; 0: 2
	MemoryMB int  // idem; 0: 1024

	// Files fetches COPY's files by their hash: the gzip'd tar E2B's SDK
	// uploaded. Nil fails every COPY step. Read at most Limits.FilesBytes.
	Files func(ctx context.Context, hash string) (io.ReadCloser, error)
	// Log receives the build's entries in order, from the build's goroutine
	// (it must not block for long). Bounded: after Limits.LogBytes one
	// warning entry says the rest of the output was dropped.
	Log func(TemplateLogEntry)

	Limits TemplateBuildLimits // zero fields take the defaults below
}

// TemplateStep is one of E2B's steps.
//
//	RUN     [cmd] or [cmd, user]                 bash -c cmd (sh when no bash), as user (default: the current USER)
//	ENV     [key, value, key, value…]            $VAR and ${VAR} expanded from the current env, nothing else
//	WORKDIR [path]                               relative to the current one; created
//	USER    [user]
//	COPY    [src, dest] or [src, dest, user] or [src, dest, user, mode]   from the tar FilesHash names; dest ending in / is a directory
type TemplateStep struct {
	Type      string
	Args      []string
	FilesHash string // COPY only
	Force     bool   // rebuild this step (and so every later one)
}

// TemplateLogEntry is one line of a build's log.
type TemplateLogEntry struct {
	Time    time.Time
	Level   string // debug, info, warn, error (E2B's LogLevel)
	Step    string // "base", "1", "2"…, "finalize" (E2B's step field); "" for the build itself
	Message string // e.g. "CACHED [builder 1/2] ENV ENV_VAR Hello, World!", "[start] [stdout]: Hello"
}

// TemplateBuildLimits bound one build. A build past one fails with a
// *TemplateBuildError whose Limit names it.
type TemplateBuildLimits struct {
	Pids       int64         // processes of a RUN step's container; 0: 1024
	StepTime   time.Duration // one RUN step; 0: 10 minutes
	BuildTime  time.Duration // the whole build (steps, start and ready); 0: 30 minutes
	ReadyTime  time.Duration // from the start command to ReadyCmd's first success; 0: 2 minutes
	LogBytes   int           // log kept from the steps' output; 0: 1 MiB
	FilesBytes int64         // one COPY's archive, uncompressed; 0: 1 GiB
}

// Limit names, in TemplateBuildError.Limit.
const (
	LimitMemory    = "memory"     // a process was OOM-killed at MemoryMB
	LimitPids      = "pids"       // fork failed at Limits.Pids processes
	LimitStepTime  = "step time"  // a RUN step ran past Limits.StepTime
	LimitBuildTime = "build time" // the build ran past Limits.BuildTime
	LimitReadyTime = "ready time" // ReadyCmd did not succeed within Limits.ReadyTime
	LimitFiles     = "files size" // a COPY archive past Limits.FilesBytes
	LimitDisk      = "disk"       // a step's writable layer past the sandboxes' disk cap
)

// TemplateImage is what a built image carries for sandboxes.
type TemplateImage struct {
	Image string       // the ref
	Start StartCommand // zero Cmd and ReadyCmd: none
}

// StartCommand is a template's start and ready commands with the context
// they were defined in: a derived template that inherits them runs them
// with its parent's directory, user and env.
type StartCommand struct {
	Cmd      string   `json:"cmd,omitempty"`
	ReadyCmd string   `json:"readyCmd,omitempty"`
	Dir      string   `json:"dir,omitempty"`
	User     string   `json:"user,omitempty"`
	Env      []string `json:"env,omitempty"` // KEY=value
}

// TemplateBuildResult is a finished build.
type TemplateBuildResult struct {
	Image     string       // the ref made for this build: dreadnode-template/<template>:<build>
	ImageID   string       // sha256:…
	SizeBytes int64        // the image's size, shared layers included
	Start     StartCommand // resolved: given, or inherited from FromTemplate
	Steps     []TemplateStepResult
}

// TemplateStepResult says how one step went.
type TemplateStepResult struct {
	Cached   bool
	Duration time.Duration
}

// TemplateBuildError is why a build failed. Kind: KindInvalid (a step or
// its args; Field names it, e.g. "steps.2.args"), KindImageMissing (the
// FROM image or template is absent), KindResourceLimit (Limit is set),
// KindEntrypoint (a RUN step or the start command exited non-zero),
// KindUnavailable (the engine), KindInternal.
type TemplateBuildError struct {
	Kind  Kind
	Step  int    // 1-based step; 0: not a step (the base, the start or ready check)
	Field string // the request field at fault, for 400s
	Limit string // one of the Limit* names when a limit was exceeded
	Msg   string // a sentence for the user, naming the limit and what to do
	Err   error
}

func (e *TemplateBuildError) Error() string {
	var b strings.Builder
	if e.Step > 0 {
		fmt.Fprintf(&b, "step %d: ", e.Step)
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *TemplateBuildError) Unwrap() error { return e.Err }
