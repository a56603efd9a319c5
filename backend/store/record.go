package store

import (
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// PublicState is the lifecycle API's view of the record (see
// sandbox.PublicState): a record stopping because its main process exited
// already shows where it is going.
func (r *Record) PublicState() sandbox.State {
	return sandbox.PublicState(r.Phase, r.KillReason)
}

// TimelineEntry records when a record entered a phase and why. Entries
// written before causes were recorded have none.
type TimelineEntry struct {
	Phase string        `json:"phase"`
	At    time.Time     `json:"at"`
	Cause sandbox.Cause `json:"cause,omitempty"`
}

// Spec is the part of a create request kept to (re)create the instance.
type Spec struct {
	EnvVars map[string]string `json:"envVars,omitempty"`
	Command []string          `json:"command,omitempty"`
	Network compute.Network   `json:"network"`
	Volumes []compute.Volume  `json:"volumeMounts,omitempty"`
	// E2BSecure is set on a sandbox created through the E2B edge (/e2b):
	// its create's `secure`. nil is a native sandbox, whose every port
	// (envd's included) takes the sandbox's access token; false opens envd's
	// port to any request, as E2B's envd does without a token; true makes
	// envd's port take the derived envd token (lifecycle.EnvdToken).
	E2BSecure *bool `json:"e2bSecure,omitempty"`
	// E2BMaskRequestHost is an /e2b create's network.maskRequestHost: the
	// Host the router sends on the sandbox's ports but envd's ("${PORT}"
	// stands for the port), as E2B's proxy does; "" keeps the Host.
	E2BMaskRequestHost string `json:"e2bMaskRequestHost,omitempty"`
	// AutoResumeTimeoutSec, when set (by the E2B edge, for a sandbox
	// created with autoResume), is the timeout a resume by traffic gives:
	// E2B's rule, fixed at create from the create's timeout, whatever a
	// later timeout call set (lifecycle.autoResume).
	AutoResumeTimeoutSec int `json:"autoResumeTimeoutSec,omitempty"`
	// Image is the local image of an org's own template or snapshot (API
	// §14–§15) the sandbox starts from, resolved at create; "" for the
	// provider's templates.
	Image string `json:"image,omitempty"`
}

// Record is one compute allocation: the row both the lifecycle (§1) and the
// ledger (§2) APIs project.
type Record struct {
	Seq             int64
	ID              string
	OrgID           string
	Kind            string
	Provider        string
	ProviderID      string
	ProviderData    string
	Phase           sandbox.Phase
	TemplateID      string
	Spec            Spec
	Metadata        map[string]string
	CPUCount        int
	MemoryMB        int
	AutoPause       bool
	AutoResume      bool
	TimeoutSec      int
	AccessTokenHash string
	CreatedAt       time.Time
	StartedAt       time.Time // first time running
	LastStartedAt   time.Time // last time running began (start or resume)
	LastPausedAt    time.Time
	KilledAt        time.Time
	EndAt           time.Time // TTL expiry
	PhaseDeadline   time.Time // a transitional phase past this fails
	KillReason      string
	Diagnostic      string
	ExitCode        *int
	Timeline        []TimelineEntry
	Endpoints       map[int]compute.Endpoint
	// What settlement billed, in millionths of a credit, and the running
	// time that paid for. They live in the record's accruals row and a
	// charge does not raise Version, so a cached copy (GetRecord,
	// ListRecords) holds the figures of its version; WithBilled reads the
	// current ones. Only settlement writes them (ErrBilledBySettlement).
	BilledMicro   int64
	BilledNs      int64
	RuntimeNs     int64     // running time accumulated before RunningSince
	RunningSince  time.Time // set while the instance accrues running time
	Sessions      int       // number of times it started or resumed
	RuntimeID     string    // the runtime owning this record, if any
	EnvironmentID string    // the task environment backed by this record, if any
	Version       int64
}

// Ref is the provider address of the record's instance.
func (r *Record) Ref() compute.Ref {
	return compute.Ref{ID: r.ProviderID, Data: r.ProviderData, Provider: r.Provider, Record: r.ID}
}

// RuntimeAt is the total time the record spent running up to now. Running
// time never accrues past endAt: from then on the sandbox should have
// stopped, and however late the engine removes it, the user does not pay
// for our lateness.
func (r *Record) RuntimeAt(now time.Time) time.Duration {
	return runtimeAt(r.RuntimeNs, r.RunningSince, r.EndAt, now)
}

func runtimeAt(runtimeNs int64, since, endAt, now time.Time) time.Duration {
	d := time.Duration(runtimeNs)
	if !endAt.IsZero() && endAt.Before(now) {
		now = endAt
	}
	if !since.IsZero() && now.After(since) {
		d += now.Sub(since)
	}
	return d
}

// StopAt ends the record's billable running time at the moment its stop was
// decided (endAt for a TTL expiry, the request for a delete, the kill at zero
// credits) and persists that moment as KilledAt, so what the engine then
// takes to remove the instance is never billed, and every view counts the
// record as ended from that moment on.
func (r *Record) StopAt(at time.Time) {
	r.MarkStopped(at)
	if r.KilledAt.IsZero() {
		r.KilledAt = at
	}
}

// MarkRunning records that the instance began running (start or resume) at now.
func (r *Record) MarkRunning(now time.Time) {
	if r.StartedAt.IsZero() {
		r.StartedAt = now
	}
	r.LastStartedAt = now
	if r.RunningSince.IsZero() {
		r.RunningSince = now
	}
	r.Sessions++
}

// MarkStopped folds the running time since RunningSince into RuntimeNs; call
// it when a running record pauses or ends.
func (r *Record) MarkStopped(now time.Time) {
	r.RuntimeNs = int64(r.RuntimeAt(now))
	r.RunningSince = time.Time{}
}

// MarkKilled ends the record's compute at now with reason.
func (r *Record) MarkKilled(now time.Time, reason string) {
	r.MarkStopped(now)
	if r.KilledAt.IsZero() {
		r.KilledAt = now
	}
	if r.KillReason == "" {
		r.KillReason = reason
	}
}

// Clone returns a deep copy, so cached records are never shared mutable state.
func (r *Record) Clone() *Record {
	c := *r
	c.Metadata = cloneMap(r.Metadata)
	c.Spec.EnvVars = cloneMap(r.Spec.EnvVars)
	c.Spec.Command = append([]string(nil), r.Spec.Command...)
	c.Timeline = append([]TimelineEntry(nil), r.Timeline...)
	if r.Endpoints != nil {
		c.Endpoints = make(map[int]compute.Endpoint, len(r.Endpoints))
		for k, v := range r.Endpoints {
			c.Endpoints[k] = v
		}
	}
	if r.ExitCode != nil {
		v := *r.ExitCode
		c.ExitCode = &v
	}
	return &c
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
