package e2bapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
)

func (e *Edge) handleGet(w http.ResponseWriter, r *http.Request) error {
	rec, err := e.load(r.Context(), r)
	if err != nil {
		return err
	}
	out := e.detail(rec)
	if tok, err := e.lc.EnvdToken(r.Context(), rec); err != nil {
		return err
	} else if tok != "" {
		out.EnvdAccessToken = &tok
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (e *Edge) handleDelete(w http.ResponseWriter, r *http.Request) error {
	rec, err := e.load(r.Context(), r)
	if err != nil {
		return err
	}
	if err := lifecycle.Owned(rec); err != nil {
		return err
	}
	if _, err := e.lc.Delete(r.Context(), rec, sandbox.KillDeleted); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handlePause answers 204, or 409 when the sandbox is not running (E2B's
// answer to pausing a paused sandbox).
func (e *Edge) handlePause(w http.ResponseWriter, r *http.Request) error {
	rec, err := e.load(r.Context(), r)
	if err != nil {
		return err
	}
	if err := lifecycle.Owned(rec); err != nil {
		return err
	}
	var body e2btypes.SandboxPauseRequest
	if err := httpx.DecodeLenient(r, &body); err != nil {
		return err
	}
	kind := sandbox.PauseKindOf(body.Memory)
	refused := httpx.Conflict(fmt.Sprintf("sandbox %s is %s; only a running sandbox can be paused", rec.ID, rec.Phase.PublicState()))
	switch rec.Phase {
	case sandbox.PhaseRunning:
	case sandbox.PhasePausing:
		return e.pausedBy(w, r, rec.ID, refused)
	default:
		return refused
	}
	// The sandbox ran when this request read it. A pause that loses the race
	// to another (E2B's tests send five at once) answers as the winner's
	// ends; a record that still reads running after the race (a read before
	// the winner's write was seen) is tried again, a few times.
	for attempt := 0; ; attempt++ {
		_, err := e.lc.PauseAs(r.Context(), rec, kind)
		if err == nil {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		var conflict *domain.ConflictError
		if !errors.As(err, &conflict) {
			return err
		}
		cur, werr := e.lc.WaitPaused(r.Context(), rec.ID)
		switch {
		case werr != nil:
			return werr
		case cur.Phase == sandbox.PhasePaused:
			w.WriteHeader(http.StatusNoContent)
			return nil
		case cur.Phase == sandbox.PhaseRunning && attempt < 3:
			rec = cur
			continue
		}
		return err
	}
}

// pausedBy answers a pause that found another one in flight as E2B does
// (its tests pause one sandbox five times at once and expect five 204s):
// 204 once the sandbox is paused, refused otherwise. A sandbox already
// paused when asked stays a 409.
func (e *Edge) pausedBy(w http.ResponseWriter, r *http.Request, id string, refused error) error {
	cur, err := e.lc.WaitPaused(r.Context(), id)
	if err != nil {
		return err
	}
	if cur.Phase != sandbox.PhasePaused {
		return refused
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleConnect is E2B's connect: resume a paused sandbox (201), or return
// a running one (200), its end moved to at least now+timeout.
func (e *Edge) handleConnect(w http.ResponseWriter, r *http.Request) error {
	timeout, err := requiredTimeout(r)
	if err != nil {
		return err
	}
	return e.connect(w, r, timeout, false)
}

// requiredTimeout reads the body's required timeout (connect, timeout).
// Not E2B's ConnectSandbox or SandboxTimeoutRequest: their timeout is a
// plain int32, which cannot tell an absent timeout (400, required) from 0.
func requiredTimeout(r *http.Request) (int, error) {
	var body struct {
		Timeout *int `json:"timeout"`
	}
	if err := httpx.DecodeLenient(r, &body); err != nil {
		return 0, err
	}
	if body.Timeout == nil {
		return 0, httpx.Invalid("timeout", "is required (seconds from now)")
	}
	return *body.Timeout, nil
}

// handleResume is E2B's deprecated resume: like connect, but a sandbox
// that is not paused is a 409.
func (e *Edge) handleResume(w http.ResponseWriter, r *http.Request) error {
	var body e2btypes.ResumedSandbox
	if err := httpx.DecodeLenient(r, &body); err != nil {
		return err
	}
	timeout := e2bDefaultTimeout
	if body.Timeout != nil {
		timeout = int(*body.Timeout)
	}
	return e.connect(w, r, timeout, true)
}

func (e *Edge) connect(w http.ResponseWriter, r *http.Request, timeout int, pausedOnly bool) error {
	d, err := clampTimeout("timeout", timeout, e.lc.MinTimeout())
	if err != nil {
		return err
	}
	rec, err := e.load(r.Context(), r)
	if err != nil {
		return err
	}
	// A resume that finds another in flight waits for it and answers as it
	// does (E2B's tests resume one sandbox five times at once, and expect
	// 201 from each).
	// A pausing sandbox already shows as paused (an auto-pause at its
	// timeout, E2B's TestSandboxAutoPausePauseResume): Connect pauses it
	// first, then resumes it.
	if pausedOnly && rec.Phase != sandbox.PhasePaused && rec.Phase != sandbox.PhaseResuming && rec.Phase != sandbox.PhasePausing {
		return httpx.Conflict(fmt.Sprintf("sandbox %s is %s, not paused; connect returns a running sandbox", rec.ID, rec.Phase.PublicState()))
	}
	secs := int(d / time.Second)
	cur, _, resumed, err := e.lc.Connect(r.Context(), rec, &secs)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	// envdAccessToken and trafficAccessToken are derived, so the ones
	// create answered (E2B's connect and resume keep both).
	envdToken, err := e.lc.EnvdToken(r.Context(), cur)
	if err != nil {
		return err
	}
	traffic, err := e.lc.TrafficToken(r.Context(), cur)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, status, e.short(cur, envdToken, traffic))
	return nil
}

// handleTimeout sets the end to now+timeout (E2B: "overwrites the TTL").
func (e *Edge) handleTimeout(w http.ResponseWriter, r *http.Request) error {
	timeout, err := requiredTimeout(r)
	if err != nil {
		return err
	}
	return e.setEnd(w, r, "timeout", timeout, false)
}

// handleRefresh extends the end to at least now+duration.
func (e *Edge) handleRefresh(w http.ResponseWriter, r *http.Request) error {
	var body e2btypes.SandboxRefreshRequest
	if err := httpx.DecodeLenient(r, &body); err != nil {
		return err
	}
	d := e2bDefaultTimeout
	if body.Duration != nil {
		if *body.Duration > 3600 {
			return httpx.Invalid("duration", "must be between 0 and 3600 seconds")
		}
		d = *body.Duration
	}
	return e.setEnd(w, r, "duration", d, true)
}

func (e *Edge) setEnd(w http.ResponseWriter, r *http.Request, field string, secs int, extend bool) error {
	d, err := clampTimeout(field, secs, e.lc.MinTimeout())
	if err != nil {
		return err
	}
	rec, err := e.load(r.Context(), r)
	if err != nil {
		return err
	}
	if err := lifecycle.Owned(rec); err != nil {
		return err
	}
	// E2B moves the end of a running sandbox only (409 while it pauses,
	// its TestSandboxSetTimeoutPausingSandbox).
	if _, err := e.lc.SetRunningEnd(r.Context(), rec, d, extend); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
