package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// The wire types are E2B's, generated from its openapi.yml (e2btypes).

// detailOfListed is a listed sandbox as the fields its detail shares.
func detailOfListed(l e2btypes.ListedSandbox) e2btypes.SandboxDetail {
	return e2btypes.SandboxDetail{Alias: l.Alias, CpuCount: l.CpuCount, MemoryMB: l.MemoryMB, DiskSizeMB: l.DiskSizeMB, EndAt: l.EndAt,
		EnvdVersion: l.EnvdVersion, Metadata: l.Metadata, SandboxID: l.SandboxID, StartedAt: l.StartedAt, State: l.State,
		TemplateID: l.TemplateID, VolumeMounts: l.VolumeMounts}
}

// metadataOf is a sandbox's metadata (nil when it has none).
func metadataOf(m *e2btypes.SandboxMetadata) map[string]string {
	if m == nil {
		return nil
	}
	return *m
}

func deref[T any](p *T) T {
	var zero T
	if p != nil {
		return *p
	}
	return zero
}

// refData is what we keep in compute.Ref.Data: a small JSON object.
type refData struct {
	EnvdAccessToken    string `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string `json:"trafficAccessToken,omitempty"`
	// Timeout is the TTL in seconds the sandbox was created with; Resume
	// asks for it again.
	Timeout int64 `json:"timeout,omitempty"`
	// Volumes are the names of the E2B volumes made for this sandbox; Delete
	// removes them with it.
	Volumes []string `json:"volumes,omitempty"`
}

func parseRefData(s string) refData {
	var d refData
	if strings.TrimSpace(s) != "" {
		_ = json.Unmarshal([]byte(s), &d) // unknown/old data: start from nothing
	}
	return d
}

func (d refData) String() string {
	b, _ := json.Marshal(d)
	return string(b)
}

func checkRef(op string, ref compute.Ref) error {
	if ref.ID == "" {
		return compute.Errorf(compute.KindInvalid, op, nil, "no E2B sandbox id given")
	}
	if strings.ContainsAny(ref.ID, "/?#% ") {
		return compute.Errorf(compute.KindInvalid, op, nil, "%q is not an E2B sandbox id", ref.ID)
	}
	return nil
}

func sandboxPath(id string, suffix string) string {
	return "/sandboxes/" + url.PathEscape(id) + suffix
}

// ourMetadata is the metadata a Spec's instance carries: the user's entries
// plus our labels, which win.
func (p *Provider) ourMetadata(spec compute.Spec) map[string]string {
	md := maps.Clone(spec.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	md[compute.LabelManaged] = "true"
	md[compute.LabelDeployment] = p.cfg.Scope
	if spec.RecordID != "" {
		md[compute.LabelRecord] = spec.RecordID
	}
	if spec.OrgID != "" {
		md[compute.LabelOrg] = spec.OrgID
	}
	if spec.Kind != "" {
		md[compute.LabelKind] = spec.Kind
	}
	return md
}

// ours reports whether metadata marks a sandbox of this deployment.
func (p *Provider) ours(md map[string]string) bool {
	return md[compute.LabelManaged] == "true" && md[compute.LabelDeployment] == p.cfg.Scope
}

// metadataQuery encodes the metadata filter of GET /v2/sandboxes: "k=v&k2=v2"
// with each key and value URL-encoded (the query encoding then escapes the
// whole string once more).
func metadataQuery(md map[string]string) string {
	parts := make([]string, 0, len(md))
	for _, k := range slices.Sorted(maps.Keys(md)) {
		parts = append(parts, url.QueryEscape(k)+"="+url.QueryEscape(md[k]))
	}
	return strings.Join(parts, "&")
}

func (p *Provider) instanceFromDetail(d e2btypes.SandboxDetail, data refData) compute.Instance {
	if tok := deref(d.EnvdAccessToken); tok != "" {
		data.EnvdAccessToken = tok
	}
	if vols := p.ourVolumes(d.VolumeMounts); len(vols) > 0 {
		data.Volumes = vols
	}
	md := metadataOf(d.Metadata)
	inst := compute.Instance{
		Ref:       compute.Ref{ID: d.SandboxID, Data: data.String()},
		RecordID:  md[compute.LabelRecord],
		OrgID:     md[compute.LabelOrg],
		StartedAt: d.StartedAt.UTC(),
		CPUCount:  int(d.CpuCount),
		MemoryMB:  int(d.MemoryMB),
	}
	switch d.State {
	case e2btypes.Paused:
		inst.Status = compute.StatusPaused
	default: // running; E2B has no other state
		inst.Status = compute.StatusRunning
	}
	if t, ok := p.templateByE2BID(d.TemplateID, deref(d.Alias)); ok {
		inst.Endpoints = p.endpoints(d.SandboxID, t.Ports)
	}
	p.mains.apply(&inst)
	return inst
}

// Create implements compute.Provider. It is idempotent per Spec.RecordID: a
// sandbox already carrying the record id is adopted instead of creating
// another, both before the first attempt and before retrying an attempt
// whose answer was lost.
func (p *Provider) Create(ctx context.Context, spec compute.Spec) (compute.Instance, error) {
	const op = "create"
	if spec.Template == "" {
		return compute.Instance{}, compute.Errorf(compute.KindInvalid, op, nil, "no template given")
	}
	snapshot, isSnapshot := strings.CutPrefix(spec.Image, SnapshotImagePrefix)
	if spec.Image != "" && (!isSnapshot || snapshot == "") {
		return compute.Instance{}, compute.Errorf(compute.KindInvalid, op, nil,
			"template %s is a local image of this backend, which E2B cannot start; start it on the Docker provider", spec.Template)
	}
	e2bTemplate, tmpl, known := p.resolveTemplate(spec.Template)
	if isSnapshot {
		// One of the org's snapshots, held by E2B (Snapshots): it has the
		// resources of the sandbox it was taken of, which the record's are.
		e2bTemplate = snapshot
	} else if err := checkResources(spec, tmpl, known); err != nil {
		return compute.Instance{}, err
	}
	timeout := p.cfg.DefaultTimeout
	if spec.Timeout > 0 {
		timeout = spec.Timeout
	}
	ttl, secure := int32(seconds(timeout+p.cfg.TTLGrace)), true
	md := e2btypes.SandboxMetadata(p.ourMetadata(spec))
	body := e2btypes.NewSandbox{
		TemplateID:          e2bTemplate,
		Timeout:             &ttl,
		AutoPause:           &spec.AutoPause,
		Secure:              &secure,
		AllowInternetAccess: spec.Network.AllowInternetAccess,
		Metadata:            &md,
	}
	if spec.EnvVars != nil {
		env := e2btypes.EnvVars(spec.EnvVars)
		body.EnvVars = &env
	}
	if spec.AutoResume {
		body.AutoResume = &e2btypes.SandboxAutoResumeConfig{Enabled: true}
	}
	if n := spec.Network; n.AllowPublicTraffic != nil || len(n.AllowOut) > 0 || len(n.DenyOut) > 0 {
		body.Network = &e2btypes.SandboxNetworkConfig{AllowPublicTraffic: n.AllowPublicTraffic, AllowOut: n.AllowOut, DenyOut: n.DenyOut}
	}
	data := refData{Timeout: int64(ttl)}

	if spec.RecordID != "" {
		inst, found, err := p.findByRecord(ctx, op, spec.RecordID, data)
		if err != nil {
			return compute.Instance{}, err
		}
		if found {
			return inst, nil
		}
	}

	mounts, madeVolumes, err := p.ensureVolumes(ctx, spec)
	if err != nil {
		return compute.Instance{}, err
	}
	body.VolumeMounts = mounts
	for _, m := range mounts {
		data.Volumes = append(data.Volumes, m.Name)
	}

	var created e2btypes.Sandbox
	var adopted *compute.Instance
	c := &call{
		op:     op,
		method: http.MethodPost,
		path:   "/sandboxes",
		body:   body,
		ok:     []int{http.StatusCreated},
		out:    &created,
		mapStatus: func(status int, e apiError) *compute.Error {
			return createStatus(e2bTemplate, status, e)
		},
	}
	if spec.RecordID != "" {
		c.beforeRetry = func(ctx context.Context, cause error) (bool, error) {
			var te *transientError
			if !errors.As(cause, &te) || !te.ambiguous() {
				return false, nil // 429/503: E2B made nothing
			}
			inst, found, err := p.findByRecordOnce(ctx, op, spec.RecordID, data)
			if err != nil || !found {
				return false, nil // cannot tell: retry the create
			}
			adopted = &inst
			return true, nil
		}
	}
	if _, err := p.do(ctx, c); err != nil {
		if !transient(err) {
			// E2B made no sandbox: do not keep the volumes made for it. (After
			// a transient failure a sandbox may exist; the retried create
			// finds the volumes by name.)
			_ = p.deleteVolumes(context.WithoutCancel(ctx), op, madeVolumes)
		}
		return compute.Instance{}, err
	}
	if adopted != nil {
		return *adopted, nil
	}
	data.EnvdAccessToken = deref(created.EnvdAccessToken)
	if created.TrafficAccessToken != nil {
		data.TrafficAccessToken = *created.TrafficAccessToken
	}
	inst := compute.Instance{
		Ref:       compute.Ref{ID: created.SandboxID, Data: data.String()},
		RecordID:  spec.RecordID,
		OrgID:     spec.OrgID,
		Status:    compute.StatusRunning,
		StartedAt: time.Now().UTC(),
		CPUCount:  tmpl.CPUCount,
		MemoryMB:  tmpl.MemoryMB,
		Endpoints: p.endpoints(created.SandboxID, tmpl.Ports),
	}
	if len(spec.Command) > 0 {
		if err := p.startMain(ctx, inst.Ref, spec.RecordID, spec.Command, spec.EnvVars); err != nil {
			// The main process is the point of the instance: do not leave a
			// sandbox behind that nobody asked for in this shape.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = p.Delete(dctx, inst.Ref)
			return compute.Instance{}, err
		}
	}
	return inst, nil
}

// checkResources refuses CPU/memory requests E2B cannot honour: its
// NewSandbox has no such fields, the template fixes them.
func checkResources(spec compute.Spec, t compute.Template, known bool) error {
	if spec.CPUCount == 0 && spec.MemoryMB == 0 {
		return nil
	}
	if known && (spec.CPUCount == 0 || spec.CPUCount == t.CPUCount) && (spec.MemoryMB == 0 || spec.MemoryMB == t.MemoryMB) {
		return nil
	}
	return compute.Errorf(compute.KindInvalid, "create", nil,
		"E2B sets CPU and memory per template: template %q has %s, and %d CPUs / %d MB were asked for; build an E2B template with those resources instead",
		spec.Template, describeResources(t, known), spec.CPUCount, spec.MemoryMB)
}

func describeResources(t compute.Template, known bool) string {
	if !known || (t.CPUCount == 0 && t.MemoryMB == 0) {
		return "resources unknown to this backend"
	}
	return fmt.Sprintf("%d CPUs / %d MB", t.CPUCount, t.MemoryMB)
}

// createStatus refines the meaning of a failed POST /sandboxes.
func createStatus(template string, status int, e apiError) *compute.Error {
	msg := strings.ToLower(e.Message)
	switch {
	case status == http.StatusNotFound:
		// Not in openapi.yml, but what E2B answers for an unknown template.
		return compute.Errorf(compute.KindImageMissing, "create", nil,
			"E2B has no template %q (404: %s)", template, e.detail())
	case status == http.StatusForbidden && strings.Contains(msg, "template"):
		return compute.Errorf(compute.KindImageMissing, "create", nil,
			"the team of E2B_API_KEY may not use template %q (403: %s)", template, e.detail())
	case status == http.StatusBadRequest && strings.Contains(msg, "template") && strings.Contains(msg, "not found"):
		return compute.Errorf(compute.KindImageMissing, "create", nil,
			"E2B has no template %q (400: %s)", template, e.detail())
	case status == http.StatusBadRequest && (strings.Contains(msg, "network") || strings.Contains(msg, "allowout") ||
		strings.Contains(msg, "denyout") || strings.Contains(msg, "egress") || strings.Contains(msg, "internet")):
		return compute.Errorf(compute.KindNetwork, "create", nil, "E2B refused the network policy: %s", e.detail())
	case status == http.StatusBadRequest && (strings.Contains(msg, "timeout") || strings.Contains(msg, "limit")):
		return compute.Errorf(compute.KindResourceLimit, "create", nil, "E2B refused the sandbox: %s", e.detail())
	}
	return nil
}

// findByRecord looks for a sandbox carrying our record id (with retries).
func (p *Provider) findByRecord(ctx context.Context, op, recordID string, data refData) (compute.Instance, bool, error) {
	return p.findByRecordWith(ctx, op, recordID, data, false)
}

// findByRecordOnce is findByRecord without retries (used inside a retry loop).
func (p *Provider) findByRecordOnce(ctx context.Context, op, recordID string, data refData) (compute.Instance, bool, error) {
	return p.findByRecordWith(ctx, op, recordID, data, true)
}

func (p *Provider) findByRecordWith(ctx context.Context, op, recordID string, data refData, once bool) (compute.Instance, bool, error) {
	var page []e2btypes.ListedSandbox
	_, err := p.do(ctx, &call{
		op:     op,
		method: http.MethodGet,
		path:   "/v2/sandboxes",
		query: url.Values{
			"metadata": {metadataQuery(map[string]string{compute.LabelManaged: "true", compute.LabelDeployment: p.cfg.Scope, compute.LabelRecord: recordID})},
			"state":    {"running,paused"},
			"limit":    {"100"},
		},
		ok:   []int{http.StatusOK},
		out:  &page,
		once: once,
	})
	if err != nil {
		return compute.Instance{}, false, err
	}
	for _, d := range page {
		if md := metadataOf(d.Metadata); md[compute.LabelRecord] != recordID || !p.ours(md) {
			continue
		}
		// The listing has no access token; the detail does.
		inst, err := p.get(ctx, op, compute.Ref{ID: d.SandboxID, Data: data.String()}, once)
		if compute.IsNotFound(err) {
			continue // killed meanwhile
		}
		if err != nil {
			return compute.Instance{}, false, err
		}
		return inst, true, nil
	}
	return compute.Instance{}, false, nil
}

// Get implements compute.Provider: GET /sandboxes/{sandboxID}. A sandbox E2B
// no longer knows (killed, expired) is compute.KindNotFound. The returned
// Ref.Data carries the current envd access token.
func (p *Provider) Get(ctx context.Context, ref compute.Ref) (compute.Instance, error) {
	return p.get(ctx, "get", ref, false)
}

func (p *Provider) get(ctx context.Context, op string, ref compute.Ref, once bool) (compute.Instance, error) {
	if err := checkRef(op, ref); err != nil {
		return compute.Instance{}, err
	}
	var d e2btypes.SandboxDetail
	_, err := p.do(ctx, &call{
		op:        op,
		method:    http.MethodGet,
		path:      sandboxPath(ref.ID, ""),
		sandboxID: ref.ID,
		ok:        []int{http.StatusOK},
		out:       &d,
		once:      once,
	})
	if err != nil {
		return compute.Instance{}, err
	}
	if d.SandboxID == "" {
		d.SandboxID = ref.ID
	}
	return p.instanceFromDetail(d, parseRefData(ref.Data)), nil
}

// List implements compute.Provider: every running or paused sandbox carrying
// our managed label, paging GET /v2/sandboxes through X-Next-Token. Ref.Data
// of listed instances has no access token (the listing does not carry one);
// Get or Resume fetch it.
func (p *Provider) List(ctx context.Context) ([]compute.Instance, error) {
	var out []compute.Instance
	seen := map[string]bool{}
	token := ""
	for page := 0; ; page++ {
		if page >= 10000 {
			return out, compute.Errorf(compute.KindInternal, "list", nil, "E2B kept answering with more pages after %d; stopped", page)
		}
		q := url.Values{
			"metadata": {metadataQuery(map[string]string{compute.LabelManaged: "true", compute.LabelDeployment: p.cfg.Scope})},
			"state":    {"running,paused"},
			"limit":    {strconv.Itoa(p.cfg.ListPageSize)},
		}
		if token != "" {
			q.Set("nextToken", token)
		}
		var items []e2btypes.ListedSandbox
		res, err := p.do(ctx, &call{op: "list", method: http.MethodGet, path: "/v2/sandboxes", query: q, ok: []int{http.StatusOK}, out: &items})
		if err != nil {
			return nil, err
		}
		for _, d := range items {
			if !p.ours(metadataOf(d.Metadata)) || seen[d.SandboxID] {
				continue // the server filters already; stay safe if it does not
			}
			seen[d.SandboxID] = true
			out = append(out, p.instanceFromDetail(detailOfListed(d), refData{}))
		}
		next := res.header.Get("X-Next-Token")
		if next == "" || next == token {
			return out, nil
		}
		token = next
	}
}

// Pause implements compute.Provider: POST /sandboxes/{sandboxID}/pause.
// Pausing a paused sandbox is compute.KindConflict (E2B's 409).
func (p *Provider) Pause(ctx context.Context, ref compute.Ref) error {
	return p.pause(ctx, ref, nil)
}

// PauseFilesystem implements compute.Provider: E2B's pause with
// `memory: false` (a filesystem-only snapshot; connect cold-boots it).
func (p *Provider) PauseFilesystem(ctx context.Context, ref compute.Ref) error {
	memory := false
	return p.pause(ctx, ref, &e2btypes.SandboxPauseRequest{Memory: &memory})
}

func (p *Provider) pause(ctx context.Context, ref compute.Ref, body *e2btypes.SandboxPauseRequest) error {
	const op = "pause"
	if err := checkRef(op, ref); err != nil {
		return err
	}
	var b any
	if body != nil {
		b = body
	}
	_, err := p.do(ctx, &call{
		op:        op,
		method:    http.MethodPost,
		path:      sandboxPath(ref.ID, "/pause"),
		body:      b,
		sandboxID: ref.ID,
		ok:        []int{http.StatusNoContent},
		mapStatus: func(status int, e apiError) *compute.Error {
			if status == http.StatusConflict {
				return compute.Errorf(compute.KindConflict, op, nil,
					"E2B sandbox %s cannot be paused: it is not running (already paused or being paused; E2B: %s)", ref.ID, e.detail())
			}
			return nil
		},
	})
	return err
}

// Resume implements compute.Provider through POST /sandboxes/{sandboxID}/connect:
// E2B resumes a paused sandbox (201) or just answers for a running one (200),
// extending its TTL to at least the timeout it was created with. The returned
// Ref.Data carries the fresh envd access token.
func (p *Provider) Resume(ctx context.Context, ref compute.Ref) (compute.Instance, error) {
	inst, _, err := p.Connect(ctx, ref)
	return inst, err
}

// Connect is Resume that also reports whether E2B had to resume the sandbox
// (true: it was paused, 201) or found it running (false, 200).
func (p *Provider) Connect(ctx context.Context, ref compute.Ref) (compute.Instance, bool, error) {
	const op = "resume"
	if err := checkRef(op, ref); err != nil {
		return compute.Instance{}, false, err
	}
	data := parseRefData(ref.Data)
	ttl := data.Timeout
	if ttl <= 0 {
		ttl = seconds(p.cfg.DefaultTimeout)
	}
	var s e2btypes.Sandbox
	res, err := p.do(ctx, &call{
		op:        op,
		method:    http.MethodPost,
		path:      sandboxPath(ref.ID, "/connect"),
		sandboxID: ref.ID,
		body:      e2btypes.ConnectSandbox{Timeout: int32(ttl)},
		ok:        []int{http.StatusOK, http.StatusCreated},
		out:       &s,
		mapStatus: func(status int, e apiError) *compute.Error {
			if status == http.StatusConflict {
				return compute.Errorf(compute.KindConflict, op, nil,
					"E2B sandbox %s cannot be resumed now (E2B: %s)", ref.ID, e.detail())
			}
			return nil
		},
	})
	if err != nil {
		return compute.Instance{}, false, err
	}
	if tok := deref(s.EnvdAccessToken); tok != "" {
		data.EnvdAccessToken = tok
	}
	if s.TrafficAccessToken != nil {
		data.TrafficAccessToken = *s.TrafficAccessToken
	}
	ref = compute.Ref{ID: ref.ID, Data: data.String()}
	resumed := res.status == http.StatusCreated
	// connect answers with the short Sandbox object; the detail has the
	// metadata, start time and resources.
	inst, err := p.get(ctx, op, ref, false)
	if err != nil {
		if compute.IsNotFound(err) {
			return compute.Instance{}, resumed, err
		}
		inst = compute.Instance{Ref: ref, Status: compute.StatusRunning}
		if t, ok := p.templateByE2BID(s.TemplateID, deref(s.Alias)); ok {
			inst.CPUCount, inst.MemoryMB = t.CPUCount, t.MemoryMB
			inst.Endpoints = p.endpoints(ref.ID, t.Ports)
		}
	}
	inst.Ref = ref
	inst.Status = compute.StatusRunning // connect leaves it running
	return inst, resumed, nil
}

// Delete implements compute.Provider: DELETE /sandboxes/{sandboxID}, then
// the volumes made for it. A sandbox E2B does not know is not an error.
func (p *Provider) Delete(ctx context.Context, ref compute.Ref) error {
	const op = "delete"
	if err := checkRef(op, ref); err != nil {
		return err
	}
	_, err := p.do(ctx, &call{
		op:        op,
		method:    http.MethodDelete,
		path:      sandboxPath(ref.ID, ""),
		sandboxID: ref.ID,
		ok:        []int{http.StatusNoContent},
	})
	if err != nil && !compute.IsNotFound(err) {
		return err
	}
	p.mains.forget(ref.ID)
	return p.deleteVolumes(ctx, op, parseRefData(ref.Data).Volumes)
}

// transient reports whether err is a retryable failure that exhausted its
// retries (the request may or may not have been carried out).
func transient(err error) bool {
	var te *transientError
	return errors.As(err, &te) || compute.KindOf(err) == compute.KindTimeout
}

// SetTimeout implements compute.Provider: POST /sandboxes/{sandboxID}/timeout,
// E2B kills (or, with autoPause, pauses) the sandbox d (plus Config.TTLGrace)
// from now.
func (p *Provider) SetTimeout(ctx context.Context, ref compute.Ref, d time.Duration) error {
	const op = "set timeout"
	if err := checkRef(op, ref); err != nil {
		return err
	}
	if d < 0 {
		return compute.Errorf(compute.KindInvalid, op, nil, "a timeout cannot be negative (%s)", d)
	}
	_, err := p.do(ctx, &call{
		op:        op,
		method:    http.MethodPost,
		path:      sandboxPath(ref.ID, "/timeout"),
		sandboxID: ref.ID,
		body:      e2btypes.SandboxTimeoutRequest{Timeout: int32(seconds(d + p.cfg.TTLGrace))},
		ok:        []int{http.StatusNoContent},
	})
	return err
}

// Refresh extends the sandbox's TTL by d (POST /sandboxes/{sandboxID}/refreshes);
// E2B accepts at most one hour.
func (p *Provider) Refresh(ctx context.Context, ref compute.Ref, d time.Duration) error {
	const op = "refresh"
	if err := checkRef(op, ref); err != nil {
		return err
	}
	if d < 0 || d > time.Hour {
		return compute.Errorf(compute.KindInvalid, op, nil, "E2B extends a sandbox's life by 0 to 3600 seconds at a time, not %s", d)
	}
	dur := int(seconds(d))
	_, err := p.do(ctx, &call{
		op:        op,
		method:    http.MethodPost,
		path:      sandboxPath(ref.ID, "/refreshes"),
		sandboxID: ref.ID,
		body:      e2btypes.SandboxRefreshRequest{Duration: &dur},
		ok:        []int{http.StatusNoContent},
	})
	return err
}

// maxLogPages bounds Logs at 10 pages of 1000 entries.
const maxLogPages = 10

// Logs implements compute.Provider through GET /v2/sandboxes/{sandboxID}/logs,
// oldest first, one "<RFC 3339 time> <LEVEL> <message>" line per entry.
func (p *Provider) Logs(ctx context.Context, ref compute.Ref) (string, error) {
	const op = "logs"
	if err := checkRef(op, ref); err != nil {
		return "", err
	}
	var b strings.Builder
	cursor := int64(-1)
	for page := 0; page < maxLogPages; page++ {
		q := url.Values{"direction": {"forward"}, "limit": {"1000"}}
		if cursor >= 0 {
			q.Set("cursor", strconv.FormatInt(cursor, 10))
		}
		var lr e2btypes.SandboxLogsV2Response
		_, err := p.do(ctx, &call{
			op:        op,
			method:    http.MethodGet,
			path:      "/v2" + sandboxPath(ref.ID, "/logs"),
			sandboxID: ref.ID,
			query:     q,
			ok:        []int{http.StatusOK},
			out:       &lr,
		})
		if err != nil {
			return "", err
		}
		for _, e := range lr.Logs {
			fmt.Fprintf(&b, "%s %s %s\n", e.Timestamp.UTC().Format(time.RFC3339Nano), strings.ToUpper(string(e.Level)), e.Message)
		}
		if len(lr.Logs) < 1000 {
			break
		}
		// The cursor is a start time in milliseconds: continue after the
		// last entry's millisecond.
		next := lr.Logs[len(lr.Logs)-1].Timestamp.UnixMilli() + 1
		if next <= cursor {
			break
		}
		cursor = next
	}
	// E2B's logs are envd's; the main command's output is the sandbox's own
	// (as Docker's container log is the main process's).
	b.WriteString(p.mains.output(ref.ID))
	return b.String(), nil
}

// Metrics implements compute.Provider with the newest entry of
// GET /sandboxes/{sandboxID}/metrics. E2B reports CPU, memory and disk; it
// has no network or process counters, which stay zero. A sandbox that has not
// reported yet gives zero readings.
func (p *Provider) Metrics(ctx context.Context, ref compute.Ref) (compute.Metrics, error) {
	const op = "metrics"
	if err := checkRef(op, ref); err != nil {
		return compute.Metrics{}, err
	}
	var ms []e2btypes.SandboxMetric
	_, err := p.do(ctx, &call{
		op:        op,
		method:    http.MethodGet,
		path:      sandboxPath(ref.ID, "/metrics"),
		sandboxID: ref.ID,
		ok:        []int{http.StatusOK},
		out:       &ms,
	})
	if err != nil {
		return compute.Metrics{}, err
	}
	if len(ms) == 0 {
		return compute.Metrics{}, nil
	}
	last := ms[0]
	for _, m := range ms[1:] {
		if m.TimestampUnix >= last.TimestampUnix {
			last = m
		}
	}
	return compute.Metrics{
		CPUPercent:       float64(last.CpuUsedPct),
		CPUCount:         int(last.CpuCount),
		MemoryUsedBytes:  uint64(max(last.MemUsed, 0)),
		MemoryLimitBytes: uint64(max(last.MemTotal, 0)),
		DiskUsedBytes:    uint64(max(last.DiskUsed, 0)),
		DiskLimitBytes:   uint64(max(last.DiskTotal, 0)),
	}, nil
}
