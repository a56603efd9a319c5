package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ndjson"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// MaxFileBytes bounds a file written through PUT /files on a provider
// without a streaming filesystem.
const MaxFileBytes = 64 << 20

// Register adds the §1 routes to r, whose requests are already authenticated.
func (s *Service) Register(r *mux.Router) {
	r.Handle("/sandboxes", httpx.Handler(s.handleCreate)).Methods(http.MethodPost)
	r.Handle("/sandboxes", httpx.Handler(s.handleList)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{id}", httpx.Handler(s.handleGet)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{id}", httpx.Handler(s.handleDelete)).Methods(http.MethodDelete)
	r.Handle("/sandboxes/{id}/connect", httpx.Handler(s.handleConnect)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{id}/pause", httpx.Handler(s.handlePause)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{id}/refreshes", httpx.Handler(s.handleRefresh)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{id}/timeout", httpx.Handler(s.handleTimeout)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{id}/logs", httpx.Handler(s.handleLogs)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{id}/metrics", httpx.Handler(s.handleMetrics)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{id}/fork", httpx.Handler(s.handleFork)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{id}/exec", httpx.Handler(s.handleExec)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{id}/files", httpx.Handler(s.handleReadFileStream)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{id}/files", httpx.Handler(s.handleWriteFileStream)).Methods(http.MethodPut)
	s.registerStreams(r)
	r.Handle("/observability/summary", httpx.Handler(s.handleSummary)).Methods(http.MethodGet)
	r.Handle("/templates/{templateID}", httpx.Handler(s.handleGetTemplate)).Methods(http.MethodGet)
}

// baseURL is how the client reached us, for URLs in responses.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return scheme + "://" + r.Host
}

// load reads the sandbox named in the path, 404 for unknown ids and for
// other orgs' sandboxes alike.
func (s *Service) load(r *http.Request) (*store.Record, error) {
	return s.find(r, s.db.GetOrgRecord)
}

// find reads the path's sandbox with get. Task records are not sandboxes of
// this API: they answer 404 like unknown ids and other orgs' records.
func (s *Service) find(r *http.Request, get func(ctx context.Context, org, id string) (*store.Record, error)) (*store.Record, error) {
	id := mux.Vars(r)["id"]
	rec, err := get(r.Context(), httpx.Org(r), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !sandbox.AddressedAsSandbox(rec.Kind)) {
		return nil, httpx.NotFound("sandbox", id)
	}
	return rec, err
}

func (s *Service) handleCreate(w http.ResponseWriter, r *http.Request) error {
	var body apitypes.CreateSandbox
	if err := httpx.Decode(r, &body, removedFields); err != nil {
		return err
	}
	created, err := s.Create(r.Context(), httpx.Org(r), specOf(&body), CreateOptions{IdempotencyKey: r.Header.Get("Idempotency-Key")})
	if err != nil {
		return err
	}
	rec := created.Record
	if deref(body.WaitReady) && !created.Replayed {
		if rec, err = s.WaitStarted(r.Context(), rec.ID); err != nil {
			return err
		}
	}
	out := view(rec, baseURL(r))
	out.AccessToken = created.AccessToken
	if err := s.withQueuePosition(r.Context(), rec, out); err != nil {
		return err
	}
	status := http.StatusCreated
	if created.Replayed {
		status = http.StatusOK
	}
	httpx.WriteJSON(w, status, out)
	return nil
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	phases, wanted, err := parseStates(q["state"])
	if err != nil {
		return err
	}
	limit := apitypes.ParamSandboxesLimitDefault
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < apitypes.ParamSandboxesLimitMinimum || limit > apitypes.ParamSandboxesLimitMaximum {
			return httpx.InvalidQuery("limit", fmt.Sprintf("must be an integer between %d and %d", apitypes.ParamSandboxesLimitMinimum, apitypes.ParamSandboxesLimitMaximum))
		}
	}
	desc, err := httpx.ParseOrder(q.Get("order"))
	if err != nil {
		return err
	}
	// A token is the last seq listed; newest first it is marked "d", so a
	// token of one order is refused by the other (it would skip or repeat).
	var after int64
	if v := q.Get("nextToken"); v != "" {
		num, marked := strings.CutPrefix(v, "d")
		if after, err = strconv.ParseInt(num, 10, 64); err != nil || after < 0 || marked != desc {
			return httpx.InvalidQuery("nextToken", "not a token returned in X-Next-Token for this order; restart the listing without it")
		}
	}
	meta, err := parseMetadataFilter(q["metadata"])
	if err != nil {
		return err
	}
	recs, err := s.db.ListRecords(r.Context(), store.RecordFilter{OrgID: httpx.Org(r), Phases: phases,
		Kinds: []string{sandbox.KindRuntime, sandbox.KindWorld}, Metadata: meta, AfterSeq: after, Limit: limit + 1, Desc: desc})
	if err != nil {
		return err
	}
	if len(recs) > limit {
		recs = recs[:limit]
		token := strconv.FormatInt(recs[limit-1].Seq, 10)
		if desc {
			token = "d" + token
		}
		w.Header().Set("X-Next-Token", token)
	}
	if slices.Contains(phases, sandbox.PhaseStopping) {
		recs = slices.DeleteFunc(recs, func(rec *store.Record) bool { return !wanted[rec.PublicState()] })
	}
	if slices.ContainsFunc(recs, func(rec *store.Record) bool { return rec.Phase == sandbox.PhaseQueued }) {
		// Queue positions change without a new record version: render afresh.
		base := baseURL(r)
		out := make([]*Sandbox, len(recs))
		for i, rec := range recs {
			out[i] = view(rec, base)
			if err := s.withQueuePosition(r.Context(), rec, out[i]); err != nil {
				return err
			}
		}
		httpx.WriteJSON(w, http.StatusOK, out)
		return nil
	}
	s.rendered.writeList(w, recs, baseURL(r))
	return nil
}

// parseMetadataFilter accepts metadata=k=v (repeatable) and E2B's encoded
// form metadata=k1%3Dv1%26k2%3Dv2.
func parseMetadataFilter(vals []string) (map[string]string, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, v := range vals {
		for _, pair := range strings.Split(v, "&") {
			if pair == "" {
				continue
			}
			k, val, ok := strings.Cut(pair, "=")
			if !ok || k == "" {
				return nil, httpx.InvalidQuery("metadata", fmt.Sprintf("filter %q must look like key=value", pair))
			}
			out[k] = val
		}
	}
	return out, CheckMetadataFilter(out)
}

// CheckMetadataFilter refuses a metadata filter no stored metadata can
// match (a key outside the keys' alphabet, a NUL, a value past the
// limit), as a 400 naming the query parameter, rather than handing the
// store a path or a value it cannot read.
func CheckMetadataFilter(m map[string]string) error {
	for k, v := range m {
		switch {
		case !metaKey.MatchString(k):
			return httpx.InvalidQuery("metadata", fmt.Sprintf("filter key %q: keys are 1-64 characters of letters, digits, '_', '.', '-', '/'", k))
		case strings.ContainsRune(v, 0):
			return httpx.InvalidQuery("metadata", fmt.Sprintf("filter value of %q must not contain NUL", k))
		case len(v) > maxMetaValue:
			return httpx.InvalidQuery("metadata", fmt.Sprintf("filter value of %q is longer than any value (at most %d characters)", k, maxMetaValue))
		}
	}
	return nil
}

// handleGet is the hot polling path: a shared cached record and its cached
// rendering, no copies.
func (s *Service) handleGet(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.find(r, s.db.PeekOrgRecord)
	if err != nil {
		return err
	}
	if rec.Phase == sandbox.PhaseQueued {
		return s.writeQueued(w, r, rec)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.rendered.get(rec, baseURL(r)))
	return nil
}

func (s *Service) handleDelete(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.load(r)
	if err != nil {
		return err
	}
	if rec.RuntimeID != "" && !rec.Phase.Terminal() {
		return errOwned(rec)
	}
	if _, err := s.Delete(r.Context(), rec, sandbox.KillDeleted); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Service) handlePause(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.load(r)
	if err != nil {
		return err
	}
	if rec.RuntimeID != "" {
		return errOwned(rec)
	}
	var req apitypes.PauseSandbox
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	if _, err := s.PauseAs(r.Context(), rec, sandbox.PauseKindOf(req.Memory)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Service) handleConnect(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.load(r)
	if err != nil {
		return err
	}
	var req apitypes.ConnectSandbox
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	// The timeout's bounds are the document's (ConnectSandbox), checked by Decode.
	cur, token, resumed, err := s.Connect(r.Context(), rec, req.Timeout)
	if err != nil {
		return err
	}
	out := view(cur, baseURL(r))
	out.AccessToken = token
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	httpx.WriteJSON(w, status, out)
	return nil
}

func (s *Service) handleRefresh(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.load(r)
	if err != nil {
		return err
	}
	var req apitypes.RefreshSandbox
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	d := DefaultTimeout // the duration's bounds are the document's, checked by Decode
	if req.Duration != nil {
		d = *req.Duration
	}
	if rec.RuntimeID != "" {
		return errOwned(rec)
	}
	if _, err := s.SetEnd(r.Context(), rec, time.Duration(d)*time.Second, true); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Service) handleTimeout(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.load(r)
	if err != nil {
		return err
	}
	var req apitypes.SetSandboxTimeout
	if err := httpx.Decode(r, &req, map[string]string{"timeoutMs": removedFields["timeoutMs"]}); err != nil {
		return err
	}
	// The document requires and bounds timeout (checked by Decode where the
	// app installs the check), so 0 is a body without it: told so rather
	// than that 0 is out of range.
	if req.Timeout == 0 {
		return httpx.Invalid("timeout", "is required (seconds from now)")
	}
	if rec.RuntimeID != "" {
		return errOwned(rec)
	}
	if _, err := s.SetEnd(r.Context(), rec, time.Duration(req.Timeout)*time.Second, false); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Service) handleLogs(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.load(r)
	if err != nil {
		return err
	}
	ls, err := s.Logs(r.Context(), rec)
	if err != nil {
		return err
	}
	lines := make([]apitypes.LogLine, 0, len(ls))
	for _, l := range ls {
		lines = append(lines, apitypes.LogLine{Line: l})
	}
	httpx.WriteJSON(w, http.StatusOK, apitypes.SandboxLogs{SandboxID: rec.ID, Logs: lines})
	return nil
}

func (s *Service) handleMetrics(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.load(r)
	if err != nil {
		return err
	}
	m, err := s.Metrics(r.Context(), rec)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, apitypes.SandboxMetrics{SandboxID: rec.ID, Timestamp: s.now(), Metrics: apitypes.ResourceMetrics{
		CPUPercent: m.CPUPercent, CPUCount: int64(m.CPUCount),
		MemoryUsedBytes: int64(m.MemoryUsedBytes), MemoryLimitBytes: int64(m.MemoryLimitBytes),
		DiskUsedBytes: int64(m.DiskUsedBytes), DiskLimitBytes: int64(m.DiskLimitBytes), ImageBytes: int64(m.ImageBytes),
		NetworkRxBytes: int64(m.NetworkRxBytes), NetworkTxBytes: int64(m.NetworkTxBytes), Pids: int64(m.Pids),
	}})
	return nil
}

// usable loads a running sandbox for exec/files after checking its access
// token: 401 without one, 403 with a wrong one, 409 when not running.
func (s *Service) usable(r *http.Request) (*store.Record, error) {
	rec, err := s.load(r)
	if err != nil {
		return nil, err
	}
	if err := checkAccess(r, rec); err != nil {
		return nil, err
	}
	switch rec.Phase {
	case sandbox.PhaseRunning:
		return rec, nil
	case sandbox.PhasePaused, sandbox.PhasePausing, sandbox.PhaseResuming:
		return nil, httpx.Conflict(fmt.Sprintf("sandbox %s is paused; POST /sandboxes/%s/connect to resume it first", rec.ID, rec.ID))
	case sandbox.PhaseQueued, sandbox.PhasePending, sandbox.PhaseCreating:
		return nil, httpx.Conflict(fmt.Sprintf("sandbox %s is still starting; create it with waitReady or poll until it is running", rec.ID))
	case sandbox.PhaseStopping, sandbox.PhaseDeleted, sandbox.PhaseCompleted, sandbox.PhaseFailed:
		// as below the switch; named so that a value added to the enum is decided here
	}
	return nil, httpx.Conflict(fmt.Sprintf("sandbox %s is %s", rec.ID, rec.Phase.PublicState()))
}

func checkAccess(r *http.Request, rec *store.Record) error {
	tok := r.Header.Get("X-Access-Token")
	if tok == "" {
		return httpx.NewError(http.StatusUnauthorized, "missing_access_token", "send the sandbox's accessToken (from create or connect) in the X-Access-Token header")
	}
	if !ids.Matches(tok, rec.AccessTokenHash) {
		return httpx.NewError(http.StatusForbidden, "invalid_access_token", "the X-Access-Token does not match this sandbox; connect returns a fresh token")
	}
	return nil
}

func (s *Service) handleExec(w http.ResponseWriter, r *http.Request) error {
	var req apitypes.ExecSandbox
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	if err := checkCommand(req.Cmd, req.Env, req.Cwd, `["ls", "-la"]`); err != nil {
		return err
	}
	timeout := apitypes.ExecSandboxTimeoutMsDefault // bounded by the document, checked by Decode
	if req.TimeoutMs != nil {
		timeout = *req.TimeoutMs
	}
	rec, err := s.usable(r)
	if err != nil {
		return err
	}
	env := commandEnv(rec, req.Env)
	if ndjson.Wanted(r) {
		return s.streamExec(w, r, rec, compute.ExecRequest{Cmd: req.Cmd, Env: env, Cwd: req.Cwd, Timeout: time.Duration(timeout) * time.Millisecond})
	}
	res, err := s.prov.Exec(r.Context(), rec.Ref(), compute.ExecRequest{Cmd: req.Cmd, Env: env, Cwd: req.Cwd,
		Timeout: time.Duration(timeout) * time.Millisecond})
	if err != nil {
		return providerErr("run the command in", err)
	}
	writeExecResult(w, res)
	return nil
}

func filePath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" || !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return "", httpx.InvalidQuery("path", "the query parameter path must be an absolute file path, e.g. ?path=/tmp/a.txt")
	}
	if msg := pathTooLong(p); msg != "" {
		return "", httpx.InvalidQuery("path", msg)
	}
	return p, nil
}

// handleGetTemplate answers whether a template exists, so clients can check
// a templateID before creating (the Terraform provider does at plan).
func (s *Service) handleGetTemplate(w http.ResponseWriter, r *http.Request) error {
	id := mux.Vars(r)["templateID"]
	t, _, err := s.resolve(r.Context(), httpx.Org(r), id)
	var unknown *unknownTemplateError
	if errors.As(err, &unknown) {
		return &domain.NotFoundError{Kind: "template", ID: id, Detail: unknown.Msg}
	}
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, apitypes.Template{TemplateID: t.ID, CPUCount: int64(t.CPUCount), MemoryMB: int64(t.MemoryMB)})
	return nil
}

// parseStates returns the phases to read for the public states asked (the
// live ones when none is), and those states (a stopping record is shown as
// deleted, completed or failed, so records read through PhaseStopping are
// filtered by their public state).
func parseStates(vals []string) ([]sandbox.Phase, map[sandbox.State]bool, error) {
	if len(vals) == 0 {
		for _, st := range sandbox.LiveStates {
			vals = append(vals, string(st))
		}
	}
	var phases []sandbox.Phase
	wanted := map[sandbox.State]bool{}
	for _, v := range vals {
		for _, st := range strings.Split(v, ",") {
			st = strings.TrimSpace(st)
			if st == "" {
				continue
			}
			ps, ok := sandbox.PhasesOf(sandbox.State(st))
			if !ok {
				return nil, nil, httpx.InvalidQuery("state", fmt.Sprintf("unknown state %q; use starting, running, paused, completed, failed or deleted", st))
			}
			wanted[sandbox.State(st)] = true
			for _, p := range ps {
				if !slices.Contains(phases, p) {
					phases = append(phases, p)
				}
			}
		}
	}
	return phases, wanted, nil
}

// writeQueued answers the detail of a queued sandbox, with its position.
func (s *Service) writeQueued(w http.ResponseWriter, r *http.Request, rec *store.Record) error {
	out := view(rec, baseURL(r))
	if err := s.withQueuePosition(r.Context(), rec, out); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// writeList answers a JSON array of the records' views, each from the cache
// of renderings GET by id uses (a list re-renders only what changed).
func (c *renderCache) writeList(w http.ResponseWriter, recs []*store.Record, base string) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, r := range recs {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(bytes.TrimRight(c.get(r, base), "\n"))
	}
	buf.WriteString("]\n")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}
