package e2bapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
)

// e2bDefaultTimeout is E2B's timeout when a create names none.
const e2bDefaultTimeout = 15

// minAutoResumeTimeout is the least timeout E2B's auto-resume gives (its
// feature flag minimum-autoresume-timeout, 300 s by default).
const minAutoResumeTimeout = 300

// newSandbox is E2B's NewSandbox. Fields this backend
// cannot honour are refused naming the field rather than ignored, since
// each one is a promise (a credential, an egress rule) the sandbox would
// silently break. Any other field is ignored, as E2B's server does.
type newSandbox struct {
	e2btypes.NewSandbox
	// TemplateID shadows the generated field (the outer one is decoded) to
	// tell an absent templateID (400, required) from "" (404, as E2B
	// answers a template it does not find).
	TemplateID *string `json:"templateID"`
}

func unsupported(field, what string) error {
	return httpx.Invalid(field, "is not supported by this backend ("+what+"); drop the field")
}

// spec maps the body onto the lifecycle's Spec (README.md, "Field mapping").
func (b *newSandbox) spec(minTimeout int) (lifecycle.Spec, error) {
	if b.TemplateID == nil {
		return lifecycle.Spec{}, httpx.Invalid("templateID", "is required, e.g. \"base\"")
	}
	secure := deref(b.Secure)
	sp := lifecycle.Spec{TemplateID: *b.TemplateID, TimeoutSec: e2bDefaultTimeout, Metadata: deref(b.Metadata), EnvVars: deref(b.EnvVars),
		AutoPause: deref(b.AutoPause), AutoResume: b.AutoResume != nil && b.AutoResume.Enabled, E2BSecure: &secure}
	if b.Timeout != nil {
		if *b.Timeout < 0 {
			return sp, httpx.Invalid("timeout", "must be 0 or more seconds")
		}
		sp.TimeoutSec = int(*b.Timeout)
	}
	// E2B accepts any timeout; this deployment keeps sandboxes at least
	// minTimeout seconds (GET /sandboxes/{id} shows the endAt it got).
	sp.TimeoutSec = max(sp.TimeoutSec, minTimeout)
	sp.AutoPauseFilesystem = sp.AutoPause && b.AutoPauseMemory != nil && !*b.AutoPauseMemory
	if sp.AutoResume {
		// E2B fixes at create the timeout a resume by traffic gives.
		sp.AutoResumeTimeoutSec = min(max(sp.TimeoutSec, minAutoResumeTimeout), lifecycle.MaxTimeout)
	}
	if b.Mcp != nil && len(*b.Mcp) > 0 {
		return sp, unsupported("mcp", "E2B's MCP gateway; start MCP servers with a command instead")
	}
	if b.Iam != nil {
		return sp, unsupported("iam", "E2B's cloud IAM credentials")
	}
	if err := b.checkE2BRules(); err != nil {
		return sp, err
	}
	sp.Network.AllowInternetAccess = b.AllowInternetAccess
	if n := b.Network; n != nil {
		switch {
		case n.EgressProxy != nil:
			return sp, unsupported("network.egressProxy", "an egress proxy")
		case n.MaskRequestHost != nil:
			if err := checkMaskRequestHost(*n.MaskRequestHost); err != nil {
				return sp, err
			}
			sp.E2BMaskRequestHost = *n.MaskRequestHost
		case len(n.Rules) > 0:
			return sp, unsupported("network.rules", "per-domain request transforms")
		}
		sp.Network.AllowPublicTraffic, sp.Network.AllowOut, sp.Network.DenyOut = n.AllowPublicTraffic, n.AllowOut, n.DenyOut
	}
	for i, v := range b.VolumeMounts {
		// E2B's volumeMounts name the team's volumes (POST /volumes).
		sp.Volumes = append(sp.Volumes, compute.Volume{Name: v.Name, Path: v.Path})
		sp.OrgVolumes = append(sp.OrgVolumes, i)
	}
	return sp, nil
}

// checkE2BRules refuses the combinations E2B's create refuses, with its
// messages (E2B's sandbox_create.go; E2B's tests compare them).
func (b *newSandbox) checkE2BRules() error {
	if b.Network != nil && b.Network.AllowPublicTraffic != nil && !*b.Network.AllowPublicTraffic && !deref(b.Secure) {
		// Without its envd token, a sandbox closed to public traffic
		// would be reachable by anyone who learnt its traffic token.
		return httpx.NewError(http.StatusBadRequest, "invalid_request",
			"You cannot create a sandbox without public access unless you enable secure envd access via 'secure' flag.")
	}
	if b.AutoPauseMemory != nil && !*b.AutoPauseMemory {
		switch {
		case !deref(b.AutoPause):
			return httpx.Invalid("autoPauseMemory", "false (a filesystem-only auto-pause) applies only to an auto-pause: set autoPause to true, or drop autoPauseMemory")
		case b.AutoResume != nil && b.AutoResume.Enabled:
			return httpx.Invalid("autoPauseMemory", "false (a filesystem-only auto-pause) cannot be combined with autoResume: a filesystem-only pause restarts the sandbox's processes, which a request must not do silently; drop one of them")
		}
	}
	return nil
}

// handleCreate creates a sandbox and, as E2B does, answers once it runs.
func (e *Edge) handleCreate(w http.ResponseWriter, r *http.Request) error {
	var body newSandbox
	if err := httpx.DecodeLenient(r, &body); err != nil {
		return err
	}
	sp, err := body.spec(e.lc.MinTimeout())
	if err != nil {
		return err
	}
	org := httpx.Org(r)
	created, err := e.lc.Create(r.Context(), org, sp, lifecycle.CreateOptions{})
	if lifecycle.IsUnknownTemplate(err) {
		// E2B's answer for a template not found (its templatecache), also
		// for another org's: nothing tells whether that org has one.
		name, _, _ := strings.Cut(sp.TemplateID, ":")
		return &domain.NotFoundError{Kind: "template", ID: sp.TemplateID, Detail: fmt.Sprintf("template '%s' not found", name)}
	}
	if err != nil {
		return err
	}
	out, err := e.started(r.Context(), created.Record.ID)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, out)
	return nil
}

// started waits until sandbox id runs and answers it as E2B's create does
// (with its envd token and traffic token); a sandbox that failed is the
// error, and one that did not start within the wait limit is deleted.
func (e *Edge) started(ctx context.Context, id string) (e2btypes.Sandbox, error) {
	rec, err := e.lc.WaitStarted(ctx, id)
	if err != nil {
		return e2btypes.Sandbox{}, err
	}
	switch {
	case rec.Phase.Starting() && ctx.Err() != nil:
		// The client left while it waited: the sandbox stays, as a native
		// create's does (it is listed; kill it or let its timeout end it).
		return e2btypes.Sandbox{}, ctx.Err()
	case rec.Phase.Starting():
		// E2B's clients take a 201 as a running sandbox; one that cannot
		// start in time is removed rather than left to start unobserved.
		if _, err := e.lc.Delete(context.WithoutCancel(ctx), rec, sandbox.KillDeleted); err != nil {
			return e2btypes.Sandbox{}, err
		}
		return e2btypes.Sandbox{}, httpx.NewError(http.StatusGatewayTimeout, "sandbox_placement_timeout", fmt.Sprintf(
			"sandbox %s did not start within the wait limit (still %s: the admission queue or the provider is full); it was deleted, retry later", rec.ID, rec.Phase))
	case rec.Phase != sandbox.PhaseRunning:
		detail := rec.Diagnostic
		if detail == "" {
			detail = "it is " + string(rec.PublicState())
		}
		return e2btypes.Sandbox{}, httpx.NewError(http.StatusInternalServerError, "sandbox_create_failed", fmt.Sprintf("sandbox %s did not start: %s", rec.ID, detail))
	}
	envdToken, err := e.lc.EnvdToken(ctx, rec) // "" without secure
	if err != nil {
		return e2btypes.Sandbox{}, err
	}
	traffic, err := e.lc.TrafficToken(ctx, rec)
	if err != nil {
		return e2btypes.Sandbox{}, err
	}
	return e.short(rec, envdToken, traffic), nil
}

// clampTimeout is a timeout E2B accepts (0 or more seconds) within this
// deployment's bounds.
func clampTimeout(field string, v, minTimeout int) (time.Duration, error) {
	if v < 0 || v > lifecycle.MaxTimeout {
		// One range on every route, create's: E2B refuses a timeout past
		// its limit rather than shortening it (its TestSandboxConnect).
		return 0, httpx.Invalid(field, fmt.Sprintf("must be between 0 and %d seconds", lifecycle.MaxTimeout))
	}
	return time.Duration(max(v, minTimeout)) * time.Second, nil
}
