// Package templatebuild builds template images on the Docker engine, step
// by step, each step contained like a sandbox: it is the engine behind
// compute.TemplateBuilder, which the Docker provider implements with it.
//
// Where it sits: the port (compute.TemplateBuilder and its types) is in
// package compute, which every layer may import, so the HTTP edge's
// services (the E2B edge may not import backend/compute/...) and the task
// service reach builds through the Provider they already hold. The engine
// needs the provider's Docker client and the network sandboxes join (whose
// egress baseline the provider installs), so it lives under
// compute/docker, taking those as a Host rather than importing package
// docker (which imports it).
//
// Containment of every RUN step (and of the start/ready check): a
// container from the previous step's image on the sandboxes' network
// (inter-container traffic off, the egress baseline: no link-local, no
// host, no private ranges), hardening.Apply's capabilities and
// no-new-privileges, the build's memory (no swap), CPU and pids limits, the
// sandboxes' disk cap where the storage driver has one, a time limit, and
// its output bounded. The step's changes become its layer: the exited
// container's overlay upper directory, written as a layer tar and loaded
// over the parent (upper.go, load.go), or a ContainerCommit on other
// storage drivers. The engine's ImageBuild, whose RUN steps run on the
// default bridge with no limits, is never used here. ENV, WORKDIR, USER,
// COPY and the start label run no container (COPY's layer is the tar it
// writes).
//
// Cache: each step's image is labelled with a key hashing the parent
// image's id, the step and its files' hash; a later build with the same
// key reuses the image ("CACHED [builder i/n] …" in the log). Force (the
// build's or a step's) skips the lookup. ENV, WORKDIR and USER steps are
// folded into the next step's image.
//
// Cleanup: every container and image a build makes is labelled with the
// build (LabelBuild) and removed when the build fails or is cancelled;
// Sweep removes what a crashed backend left.
package templatebuild

import (
	"context"

	"github.com/docker/docker/client"
)

// Labels of the containers and images a build makes.
const (
	LabelBuild = "dev.dreadnode.templatebuild"       // the build id, on everything a build makes
	LabelRun   = "dev.dreadnode.templatebuild.run"   // one Build call's nonce: its cleanup finds all it made
	LabelKey   = "dev.dreadnode.templatebuild.key"   // a step image's cache key
	LabelStart = "dev.dreadnode.templatebuild.start" // the final image's compute.StartCommand (JSON)
	// LabelWorkdir is the WORKDIR a template's steps (or its parent
	// template's) set: where a sandbox's processes start by default (E2B's
	// envd takes its template's workdir). Absent when no step set one: the
	// user's home then, as on E2B.
	LabelWorkdir = "dev.dreadnode.templatebuild.workdir"
)

// RefRepo is the repository of every built template's ref.
const RefRepo = "dreadnode-template"

// Host is what the engine takes from the Docker provider.
type Host struct {
	Client *client.Client
	// Network returns the id of the network sandboxes join, with the
	// egress baseline attached (an error when it cannot be filtered).
	Network func(ctx context.Context) (string, error)
	// Labels are added to every container and image (the deployment's).
	Labels map[string]string
	// StorageOpt caps a step's writable layer (nil: the driver cannot).
	StorageOpt func(ctx context.Context) map[string]string
}

// Builder runs builds. It is safe for concurrent use.
type Builder struct {
	h Host
}

// New returns a Builder over h.
func New(h Host) *Builder { return &Builder{h: h} }
