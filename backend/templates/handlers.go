package templates

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/template"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Register adds the native routes (API.md §15, §14's snapshots): camelCase
// JSON, the org taken from the key. GET /templates/{templateID} is the
// lifecycle's (it resolves the org's templates too).
func (s *Service) Register(r *mux.Router) {
	r.Handle("/templates", httpx.Handler(s.handleCreate)).Methods(http.MethodPost)
	r.Handle("/templates", httpx.Handler(s.handleList)).Methods(http.MethodGet)
	r.Handle("/templates/{templateID}", httpx.Handler(s.handleDelete)).Methods(http.MethodDelete)
	r.Handle("/templates/{templateID}/builds", httpx.Handler(s.handleBuilds)).Methods(http.MethodGet)
	r.Handle("/templates/{templateID}/builds/{buildID}", httpx.Handler(s.handleBuild)).Methods(http.MethodGet)
	r.Handle("/templates/{templateID}/tags", httpx.Handler(s.handleTags)).Methods(http.MethodGet)
	r.Handle("/templates/{templateID}/tags", httpx.Handler(s.handleTagsSet)).Methods(http.MethodPost)
	r.Handle("/templates/{templateID}/tags/{tag}", httpx.Handler(s.handleTagDelete)).Methods(http.MethodDelete)
	r.Handle("/sandboxes/{id}/snapshots", httpx.Handler(s.handleSnapshot)).Methods(http.MethodPost)
	r.Handle("/snapshots", httpx.Handler(s.handleSnapshots)).Methods(http.MethodGet)
	r.Handle("/api/v1/org/{org}/template-quotas", httpx.OrgHandler(func(w http.ResponseWriter, r *http.Request, org string) error {
		return s.writeQuotas(w, r, org)
	})).Methods(http.MethodGet)
}

// RegisterAdmin adds PUT and GET /admin/orgs/{org}/template-quotas.
func (s *Service) RegisterAdmin(r *mux.Router) {
	r.Handle("/orgs/{org}/template-quotas", httpx.Handler(s.handleQuotasSet)).Methods(http.MethodPut)
	r.Handle("/orgs/{org}/template-quotas", httpx.Handler(func(w http.ResponseWriter, r *http.Request) error {
		return s.writeQuotas(w, r, mux.Vars(r)["org"])
	})).Methods(http.MethodGet)
}

// Step is one of E2B's build steps as JSON: the document's TemplateStep,
// which E2B's edge (backend/e2bapi) decodes too.
type Step = apitypes.TemplateStep

// ComputeSteps are steps as the build engine takes them.
func ComputeSteps(steps []Step) []compute.TemplateStep {
	out := make([]compute.TemplateStep, len(steps))
	for i, st := range steps {
		out[i] = compute.TemplateStep{Type: st.Type, Args: st.Args, FilesHash: st.FilesHash, Force: st.Force}
	}
	return out
}

// templateJSON is a template as the native routes show it.
type templateJSON struct {
	TemplateID    string    `json:"templateID"`
	Names         []string  `json:"names"`
	Kind          string    `json:"kind"`
	CPUCount      int       `json:"cpuCount"`
	MemoryMB      int       `json:"memoryMB"`
	Parent        string    `json:"parent,omitempty"`
	SourceSandbox string    `json:"sourceSandboxID,omitempty"`
	BuildID       string    `json:"buildID,omitempty"`
	BuildStatus   string    `json:"buildStatus,omitempty"`
	SizeBytes     int64     `json:"sizeBytes"`
	Tags          []tagJSON `json:"tags"`
	CreatedAt     time.Time `json:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt"`
}

type tagJSON struct {
	Tag       string    `json:"tag"`
	BuildID   string    `json:"buildID"`
	CreatedAt time.Time `json:"createdAt"`
}

type buildJSON struct {
	BuildID    string         `json:"buildID"`
	TemplateID string         `json:"templateID"`
	Status     string         `json:"status"`
	Error      string         `json:"error,omitempty"`
	ErrorStep  string         `json:"errorStep,omitempty"`
	SizeBytes  int64          `json:"sizeBytes"`
	CPUCount   int            `json:"cpuCount"`
	MemoryMB   int            `json:"memoryMB"`
	StartCmd   string         `json:"startCmd,omitempty"`
	ReadyCmd   string         `json:"readyCmd,omitempty"`
	CreatedAt  time.Time      `json:"createdAt"`
	FinishedAt *time.Time     `json:"finishedAt,omitempty"`
	Logs       []logEntryJSON `json:"logs,omitempty"`
	NextOffset int            `json:"nextLogsOffset"`
}

type logEntryJSON struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Step      string    `json:"step,omitempty"`
	Message   string    `json:"message"`
}

func (s *Service) describe(r *http.Request, t *store.Template) (templateJSON, error) {
	out := templateJSON{TemplateID: t.ID, Names: Names(t), Kind: string(t.Kind), CPUCount: t.CPUCount, MemoryMB: t.MemoryMB,
		Parent: t.Parent, SourceSandbox: t.SourceSandbox, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Tags: []tagJSON{}}
	builds, err := s.db.Builds(r.Context(), t.ID)
	if err != nil {
		return out, err
	}
	if len(builds) > 0 {
		out.BuildStatus = string(builds[0].Status)
	}
	for _, b := range builds {
		out.SizeBytes += b.SizeBytes
		if b.Status == template.StatusReady && out.BuildID == "" {
			out.BuildID = b.ID
		}
	}
	tags, err := s.db.Tags(r.Context(), t.ID)
	for _, tg := range tags {
		out.Tags = append(out.Tags, tagJSON{Tag: tg.Tag, BuildID: tg.BuildID, CreatedAt: tg.CreatedAt})
	}
	return out, err
}

func buildOf(b *store.TemplateBuild, logs []store.BuildLogEntry, offset int) buildJSON {
	out := buildJSON{BuildID: b.ID, TemplateID: b.TemplateID, Status: string(b.Status), Error: b.Reason, ErrorStep: b.ReasonStep,
		SizeBytes: b.SizeBytes, CPUCount: b.CPUCount, MemoryMB: b.MemoryMB, StartCmd: b.StartCmd, ReadyCmd: b.ReadyCmd, CreatedAt: b.CreatedAt,
		NextOffset: offset}
	if !b.FinishedAt.IsZero() {
		out.FinishedAt = &b.FinishedAt
	}
	for _, l := range logs {
		out.Logs = append(out.Logs, logEntryJSON{Timestamp: l.At, Level: l.Level, Step: l.Step, Message: l.Message})
		out.NextOffset = l.N + 1
	}
	return out
}

func (s *Service) handleCreate(w http.ResponseWriter, r *http.Request) error {
	var b apitypes.TemplateBuildRequest
	if err := httpx.Decode(r, &b, nil); err != nil {
		return err
	}
	if (b.FromImage == "") == (b.FromTemplate == "") {
		return httpx.Invalid("fromImage", "give exactly one of fromImage (an image on the backend's Docker host) and fromTemplate (one of your templates)")
	}
	req, err := s.Request(r.Context(), httpx.Org(r), Request{Name: b.Name, Tags: b.Tags, CPUCount: intOf(b.CPUCount), MemoryMB: intOf(b.MemoryMB)})
	if err != nil {
		return err
	}
	err = s.StartBuild(r.Context(), httpx.Org(r), req.Template.ID, req.Build.ID, BuildSpec{FromImage: b.FromImage, FromTemplate: b.FromTemplate,
		Steps: ComputeSteps(b.Steps), StartCmd: b.StartCmd, ReadyCmd: b.ReadyCmd, Force: b.Force})
	if err != nil {
		// The build never started: it leaves no record behind.
		_ = s.db.DeleteBuild(r.Context(), httpx.Org(r), req.Build.ID)
		return err
	}
	cur, err := s.db.Build(r.Context(), httpx.Org(r), req.Build.ID)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusAccepted, map[string]any{"templateID": req.Template.ID, "names": Names(req.Template), "tags": req.Tags,
		"build": buildOf(cur, nil, 0)})
	return nil
}

// intOf is p as the service's *int (the document's int64: the same range on
// the 64-bit hosts the backend runs on).
func intOf(p *int64) *int {
	if p == nil {
		return nil
	}
	n := int(*p)
	return &n
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	kind := template.Kind(q.Get("kind"))
	if kind != "" && kind != template.KindBuild && kind != template.KindSnapshot {
		return httpx.InvalidQuery("kind", "must be build or snapshot")
	}
	limit := 100
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 1000 {
			return httpx.InvalidQuery("limit", "must be an integer from 1 to 1000")
		}
		limit = n
	}
	page, err := s.List(r.Context(), httpx.Org(r), kind, q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]templateJSON, 0, len(page.Templates))
	for _, t := range page.Templates {
		j, err := s.describe(r, t)
		if err != nil {
			return err
		}
		items = append(items, j)
	}
	out := map[string]any{"items": items}
	if page.Next != "" {
		out["nextCursor"] = page.Next
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Service) handleDelete(w http.ResponseWriter, r *http.Request) error {
	if err := s.Delete(r.Context(), httpx.Org(r), mux.Vars(r)["templateID"]); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Service) handleBuilds(w http.ResponseWriter, r *http.Request) error {
	t, _, err := s.Get(r.Context(), httpx.Org(r), mux.Vars(r)["templateID"])
	if err != nil {
		return err
	}
	builds, err := s.db.Builds(r.Context(), t.ID)
	if err != nil {
		return err
	}
	items := make([]buildJSON, 0, len(builds))
	for _, b := range builds {
		items = append(items, buildOf(b, nil, 0))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
	return nil
}

func (s *Service) handleBuild(w http.ResponseWriter, r *http.Request) error {
	v := mux.Vars(r)
	offset := 0
	if raw := r.URL.Query().Get("logsOffset"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 {
			return httpx.InvalidQuery("logsOffset", "must be an integer of 0 or more (a previous answer's nextLogsOffset)")
		}
		offset = n
	}
	st, err := s.BuildStatus(r.Context(), httpx.Org(r), v["templateID"], v["buildID"], offset, 100, "")
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, buildOf(st.Build, st.Logs, offset))
	return nil
}

func (s *Service) handleTags(w http.ResponseWriter, r *http.Request) error {
	tags, err := s.Tags(r.Context(), httpx.Org(r), mux.Vars(r)["templateID"])
	if err != nil {
		return err
	}
	out := make([]tagJSON, 0, len(tags))
	for _, tg := range tags {
		out = append(out, tagJSON{Tag: tg.Tag, BuildID: tg.BuildID, CreatedAt: tg.CreatedAt})
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"items": out})
	return nil
}

func (s *Service) handleTagsSet(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Tags []string `json:"tags"`
		From string   `json:"from"`
	}
	if err := httpx.Decode(r, &b, nil); err != nil {
		return err
	}
	from := b.From
	if from == "" {
		from = template.DefaultTag
	}
	buildID, tags, err := s.AssignTags(r.Context(), httpx.Org(r), mux.Vars(r)["templateID"]+":"+from, b.Tags)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, map[string]any{"buildID": buildID, "tags": tags})
	return nil
}

func (s *Service) handleTagDelete(w http.ResponseWriter, r *http.Request) error {
	v := mux.Vars(r)
	if err := s.DeleteTags(r.Context(), httpx.Org(r), v["templateID"], []string{v["tag"]}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// snapshotJSON is a snapshot as the native routes show it.
type snapshotJSON struct {
	SnapshotID      string    `json:"snapshotID"`
	TemplateID      string    `json:"templateID"`
	BuildID         string    `json:"buildID"`
	Names           []string  `json:"names"`
	Tag             string    `json:"tag"`
	SizeBytes       int64     `json:"sizeBytes"`
	Parent          string    `json:"parent"`
	SourceSandboxID string    `json:"sourceSandboxID"`
	CreatedAt       time.Time `json:"createdAt"`
}

func snapshotOf(sn Snapshot) snapshotJSON {
	return snapshotJSON{SnapshotID: sn.ID(), TemplateID: sn.Template.ID, BuildID: sn.Build.ID, Names: Names(sn.Template), Tag: sn.Tag,
		SizeBytes: sn.Build.SizeBytes, Parent: sn.Template.Parent, SourceSandboxID: sn.Template.SourceSandbox, CreatedAt: sn.Build.CreatedAt}
}

func (s *Service) handleSnapshot(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Name string `json:"name"`
	}
	if r.ContentLength != 0 {
		if err := httpx.Decode(r, &b, nil); err != nil {
			return err
		}
	}
	sn, err := s.TakeSnapshot(r.Context(), httpx.Org(r), mux.Vars(r)["id"], b.Name)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, snapshotOf(sn))
	return nil
}

func (s *Service) handleSnapshots(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	snaps, err := s.Snapshots(r.Context(), httpx.Org(r), SnapshotFilter{SandboxID: q.Get("sandboxID"), Name: q.Get("name")})
	if err != nil {
		return err
	}
	items := make([]snapshotJSON, 0, len(snaps))
	for _, sn := range snaps {
		items = append(items, snapshotOf(sn))
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
	return nil
}

// quotasJSON is an org's template quotas and use.
type quotasJSON struct {
	MaxTemplates     *int   `json:"max_templates"`
	MaxTemplateBytes *int64 `json:"max_template_bytes"`
}

func (s *Service) writeQuotas(w http.ResponseWriter, r *http.Request, org string) error {
	q, err := s.db.TemplateQuotasOf(r.Context(), org)
	if err != nil {
		return err
	}
	page, err := s.db.TemplatePage(r.Context(), org, "", time.Time{}, "", 0)
	if err != nil {
		return err
	}
	bytes, err := store.TemplateBytes(r.Context(), s.db.Reader(), org)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"quotas": quotasJSON(q), "usage": map[string]any{"templates": len(page), "template_bytes": bytes}})
	return nil
}

func (s *Service) handleQuotasSet(w http.ResponseWriter, r *http.Request) error {
	org := mux.Vars(r)["org"]
	var q quotasJSON
	if err := httpx.Decode(r, &q, nil); err != nil {
		return err
	}
	if q.MaxTemplates != nil && *q.MaxTemplates < 0 {
		return httpx.Invalid("max_templates", "must be 0 or more; omit it (or send null) for unlimited")
	}
	if q.MaxTemplateBytes != nil && *q.MaxTemplateBytes < 0 {
		return httpx.Invalid("max_template_bytes", "must be 0 or more; omit it (or send null) for unlimited")
	}
	if _, err := s.db.OrgByName(r.Context(), org); errors.Is(err, store.ErrNotFound) {
		return httpx.NotFound("organization", org)
	} else if err != nil {
		return err
	}
	if err := s.db.SetTemplateQuotas(r.Context(), org, store.TemplateQuotas(q)); err != nil {
		return err
	}
	return s.writeQuotas(w, r, org)
}
