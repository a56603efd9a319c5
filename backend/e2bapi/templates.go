package e2bapi

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/template"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/templates"
)

// registerTemplates adds E2B's template, tag and snapshot routes (API §15,
// §14's snapshots) over the templates service; nil leaves them out.
func (e *Edge) registerTemplates(r *mux.Router) {
	if e.cfg.Templates == nil {
		return
	}
	h := func(f httpx.Handler) http.Handler { return f }
	r.Handle("/templates", h(e.handleTemplateRequestV1)).Methods(http.MethodPost)
	r.Handle("/v2/templates", h(e.handleTemplateRequestV2)).Methods(http.MethodPost)
	r.Handle("/v3/templates", h(e.handleTemplateRequestV3)).Methods(http.MethodPost)
	r.Handle("/templates", h(e.handleTemplateList)).Methods(http.MethodGet)
	r.Handle("/v2/templates", h(e.handleTemplateListV2)).Methods(http.MethodGet)
	r.Handle("/templates/tags", h(e.handleTagsAssign)).Methods(http.MethodPost)
	r.Handle("/templates/tags", h(e.handleTagsDelete)).Methods(http.MethodDelete)
	r.Handle("/templates/aliases/{alias}", h(e.handleTemplateAlias)).Methods(http.MethodGet)
	r.Handle("/templates/{templateID}", h(e.handleTemplateGet)).Methods(http.MethodGet)
	r.Handle("/templates/{templateID}", h(e.handleTemplateDelete)).Methods(http.MethodDelete)
	r.Handle("/templates/{templateID}/tags", h(e.handleTagsList)).Methods(http.MethodGet)
	r.Handle("/templates/{templateID}/files/{hash}", h(e.handleTemplateFiles)).Methods(http.MethodGet)
	r.Handle("/v2/templates/{templateID}/builds/{buildID}", h(e.handleBuildStart)).Methods(http.MethodPost)
	r.Handle("/templates/{templateID}/builds/{buildID}/status", h(e.handleBuildStatus)).Methods(http.MethodGet)
	r.Handle("/templates/{templateID}/builds/{buildID}/logs", h(e.handleBuildLogs)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{sandboxID}/snapshots", h(e.handleSnapshot)).Methods(http.MethodPost)
	r.Handle("/snapshots", h(e.handleSnapshotList)).Methods(http.MethodGet)
}

// registerTemplateUploads adds the upload link of COPY files, which takes
// no API key: the link's signature is its credential (as E2B's links to
// its storage).
func (e *Edge) registerTemplateUploads(r *mux.Router) {
	if e.cfg.Templates == nil {
		return
	}
	r.Handle("/templates/{templateID}/files/{hash}/upload", httpx.Handler(e.handleTemplateUpload)).Methods(http.MethodPut, http.MethodPost)
}

func (e *Edge) request(r *http.Request) (templates.Requested, error) {
	// E2B's three template requests (TemplateBuildRequest, ...V2, ...V3):
	// V3 has every field the others have that a request reads (the rest,
	// such as v1's dockerfile, are ignored, as unknown fields are).
	var b e2btypes.TemplateBuildRequestV3
	if err := httpx.DecodeLenient(r, &b); err != nil {
		return templates.Requested{}, err
	}
	if b.TeamID != nil && *b.TeamID != "" && *b.TeamID != httpx.Org(r) {
		return templates.Requested{}, httpx.Invalid("teamID", "is not the team of your API key")
	}
	name := deref(b.Name)
	if name == "" {
		name = deref(b.Alias)
	}
	return e.cfg.Templates.Request(r.Context(), httpx.Org(r), templates.Request{Name: name, Tags: b.Tags,
		CPUCount: intPtr(b.CpuCount), MemoryMB: intPtr(b.MemoryMB)})
}

// intPtr widens an optional int32 of E2B's types to the services' int.
func intPtr(p *int32) *int {
	if p == nil {
		return nil
	}
	v := int(*p)
	return &v
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func (e *Edge) handleTemplateRequestV3(w http.ResponseWriter, r *http.Request) error {
	req, err := e.request(r)
	if err != nil {
		return err
	}
	names := templates.Names(req.Template)
	httpx.WriteJSON(w, http.StatusAccepted, e2btypes.TemplateRequestResponseV3{TemplateID: req.Template.ID, BuildID: req.Build.ID,
		Names: names, Aliases: names, Tags: req.Tags, Public: false})
	return nil
}

func (e *Edge) handleTemplateRequestV1(w http.ResponseWriter, r *http.Request) error {
	return e.legacyRequest(w, r)
}

func (e *Edge) handleTemplateRequestV2(w http.ResponseWriter, r *http.Request) error {
	return e.legacyRequest(w, r)
}

func (e *Edge) legacyRequest(w http.ResponseWriter, r *http.Request) error {
	req, err := e.request(r)
	if err != nil {
		return err
	}
	t, b := req.Template, req.Build
	httpx.WriteJSON(w, http.StatusAccepted, e2btypes.TemplateLegacy{TemplateID: t.ID, BuildID: b.ID, Aliases: templates.Names(t),
		BuildCount: 1, CpuCount: int32(b.CPUCount), MemoryMB: int32(b.MemoryMB), CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		EnvdVersion: e.cfg.EnvdVersion})
	return nil
}

// templateJSON is E2B's Template for t.
func (e *Edge) templateJSON(r *http.Request, t *store.Template) (e2btypes.Template, error) {
	builds, err := e.cfg.Templates.Builds(r.Context(), t)
	if err != nil {
		return e2btypes.Template{}, err
	}
	names := templates.Names(t)
	out := e2btypes.Template{TemplateID: t.ID, Names: names, Aliases: names, BuildCount: int32(len(builds)), CpuCount: int32(t.CPUCount),
		MemoryMB: int32(t.MemoryMB), CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, EnvdVersion: e.cfg.EnvdVersion,
		BuildStatus: e2btypes.TemplateBuildStatus(template.StatusWaiting)}
	if len(builds) > 0 {
		out.BuildStatus = e2btypes.TemplateBuildStatus(builds[0].Status)
	}
	for _, b := range builds {
		if b.Status == template.StatusReady {
			out.BuildID, out.DiskSizeMB = b.ID, int32(b.SizeBytes>>20)
			break
		}
	}
	return out, nil
}

// teamMatches refuses a teamID query that is not the key's org (E2B: 400).
func teamMatches(r *http.Request) error {
	if id := r.URL.Query().Get("teamID"); id != "" && id != httpx.Org(r) {
		return httpx.InvalidQuery("teamID", "is not the team of your API key")
	}
	return nil
}

func (e *Edge) handleTemplateList(w http.ResponseWriter, r *http.Request) error {
	if err := teamMatches(r); err != nil {
		return err
	}
	page, err := e.cfg.Templates.List(r.Context(), httpx.Org(r), template.KindBuild, "", 0)
	if err != nil {
		return err
	}
	return e.writeTemplates(w, r, page.Templates)
}

func (e *Edge) writeTemplates(w http.ResponseWriter, r *http.Request, ts []*store.Template) error {
	out := make([]e2btypes.Template, 0, len(ts))
	for _, t := range ts {
		j, err := e.templateJSON(r, t)
		if err != nil {
			return err
		}
		out = append(out, j)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (e *Edge) handleTemplateListV2(w http.ResponseWriter, r *http.Request) error {
	if err := teamMatches(r); err != nil {
		return err
	}
	limit, err := pageLimit(r.URL.Query())
	if err != nil {
		return err
	}
	page, err := e.cfg.Templates.List(r.Context(), httpx.Org(r), template.KindBuild, r.URL.Query().Get("nextToken"), limit)
	if err != nil {
		return err
	}
	if page.Next != "" {
		w.Header().Set("X-Next-Token", page.Next)
	}
	return e.writeTemplates(w, r, page.Templates)
}

// pageLimit is E2B's paginationLimit (1–100, default 100).
func pageLimit(q url.Values) (int, error) {
	raw := q.Get("limit")
	if raw == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 100 {
		return 0, httpx.InvalidQuery("limit", "must be an integer from 1 to 100")
	}
	return n, nil
}

func (e *Edge) handleTemplateGet(w http.ResponseWriter, r *http.Request) error {
	t, _, err := e.cfg.Templates.Get(r.Context(), httpx.Org(r), mux.Vars(r)["templateID"])
	if err != nil {
		return err
	}
	builds, err := e.cfg.Templates.Builds(r.Context(), t)
	if err != nil {
		return err
	}
	names := templates.Names(t)
	out := e2btypes.TemplateWithBuilds{TemplateID: t.ID, Names: names, Aliases: names, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		Builds: make([]e2btypes.TemplateBuild, 0, len(builds))}
	for _, b := range builds {
		tb := e2btypes.TemplateBuild{BuildID: uuid.MustParse(b.ID), CpuCount: int32(b.CPUCount), MemoryMB: int32(b.MemoryMB),
			CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt, Status: e2btypes.TemplateBuildStatus(b.Status)}
		if !b.FinishedAt.IsZero() {
			tb.FinishedAt = &b.FinishedAt
		}
		if b.SizeBytes > 0 {
			mb := int32(b.SizeBytes >> 20)
			tb.DiskSizeMB = &mb
		}
		out.Builds = append(out.Builds, tb)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (e *Edge) handleTemplateDelete(w http.ResponseWriter, r *http.Request) error {
	if err := e.cfg.Templates.Delete(r.Context(), httpx.Org(r), mux.Vars(r)["templateID"]); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (e *Edge) handleTemplateAlias(w http.ResponseWriter, r *http.Request) error {
	t, _, err := e.cfg.Templates.Get(r.Context(), httpx.Org(r), mux.Vars(r)["alias"])
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, e2btypes.TemplateAliasResponse{TemplateID: t.ID})
	return nil
}

func (e *Edge) handleTagsList(w http.ResponseWriter, r *http.Request) error {
	tags, err := e.cfg.Templates.Tags(r.Context(), httpx.Org(r), mux.Vars(r)["templateID"])
	if err != nil {
		return err
	}
	out := make([]e2btypes.TemplateTag, 0, len(tags))
	for _, t := range tags {
		out = append(out, e2btypes.TemplateTag{Tag: t.Tag, BuildID: uuid.MustParse(t.BuildID), CreatedAt: t.CreatedAt})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (e *Edge) handleTagsAssign(w http.ResponseWriter, r *http.Request) error {
	var b e2btypes.AssignTemplateTagsRequest
	if err := httpx.DecodeLenient(r, &b); err != nil {
		return err
	}
	if b.Target == "" {
		return httpx.Invalid("target", "required: the template and tag to copy, as \"name:tag\"")
	}
	buildID, tags, err := e.cfg.Templates.AssignTags(r.Context(), httpx.Org(r), b.Target, b.Tags)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, e2btypes.AssignedTemplateTags{BuildID: uuid.MustParse(buildID), Tags: tags})
	return nil
}

func (e *Edge) handleTagsDelete(w http.ResponseWriter, r *http.Request) error {
	var b e2btypes.DeleteTemplateTagsRequest
	if err := httpx.DecodeLenient(r, &b); err != nil {
		return err
	}
	if b.Name == "" {
		return httpx.Invalid("name", "required: the template whose tags to delete")
	}
	if err := e.cfg.Templates.DeleteTags(r.Context(), httpx.Org(r), b.Name, b.Tags); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (e *Edge) handleTemplateFiles(w http.ResponseWriter, r *http.Request) error {
	v := mux.Vars(r)
	up, templateID, err := e.cfg.Templates.FileStatus(r.Context(), httpx.Org(r), v["templateID"], v["hash"])
	if err != nil {
		return err
	}
	out := e2btypes.TemplateBuildFileUpload{Present: up.Present}
	if !up.Present {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		link := scheme + "://" + r.Host + Prefix + "/templates/" + url.PathEscape(templateID) + "/files/" + url.PathEscape(v["hash"]) + "/upload?" + up.Query
		out.Url = &link
	}
	httpx.WriteJSON(w, http.StatusCreated, out)
	return nil
}

func (e *Edge) handleTemplateUpload(w http.ResponseWriter, r *http.Request) error {
	v, q := mux.Vars(r), r.URL.Query()
	r.Body = http.MaxBytesReader(w, r.Body, templates.MaxFileBytes)
	if err := e.cfg.Templates.PutFile(r.Context(), q.Get("org"), v["templateID"], v["hash"], q.Get("expires"), q.Get("signature"), r.Body); err != nil {
		var rej *domain.RejectedError
		if errors.As(err, &rej) {
			return httpx.NewError(http.StatusForbidden, "invalid_upload_link", rej.Detail)
		}
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (e *Edge) handleBuildStart(w http.ResponseWriter, r *http.Request) error {
	var b e2btypes.TemplateBuildStartV2
	if err := httpx.DecodeLenient(r, &b); err != nil {
		return err
	}
	if b.FromImageRegistry != nil {
		return httpx.Invalid("fromImageRegistry", "this backend pulls from no registry: build from an image on its Docker host (fromImage) or from a template (fromTemplate)")
	}
	v := mux.Vars(r)
	err := e.cfg.Templates.StartBuild(r.Context(), httpx.Org(r), v["templateID"], v["buildID"], templates.BuildSpec{
		FromImage: deref(b.FromImage), FromTemplate: deref(b.FromTemplate), Steps: computeSteps(b.Steps), StartCmd: b.StartCmd, ReadyCmd: b.ReadyCmd,
		Force: deref(b.Force)})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// computeSteps are E2B's template steps as the build engine takes them.
func computeSteps(steps []e2btypes.TemplateStep) []compute.TemplateStep {
	out := make([]compute.TemplateStep, len(steps))
	for i, st := range steps {
		out[i] = compute.TemplateStep{Type: st.Type, Args: st.Args, FilesHash: deref(st.FilesHash), Force: deref(st.Force)}
	}
	return out
}

func logEntries(logs []store.BuildLogEntry) []e2btypes.BuildLogEntry {
	out := make([]e2btypes.BuildLogEntry, 0, len(logs))
	for _, l := range logs {
		entry := e2btypes.BuildLogEntry{Timestamp: l.At, Level: e2btypes.LogLevel(l.Level), Message: l.Message}
		if l.Step != "" {
			step := l.Step
			entry.Step = &step
		}
		out = append(out, entry)
	}
	return out
}

func queryInt(q url.Values, name string, def, lo, hi int) (int, error) {
	raw := q.Get(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < lo || n > hi {
		return 0, httpx.InvalidQuery(name, "must be an integer from "+strconv.Itoa(lo)+" to "+strconv.Itoa(hi))
	}
	return n, nil
}

func (e *Edge) handleBuildStatus(w http.ResponseWriter, r *http.Request) error {
	q, v := r.URL.Query(), mux.Vars(r)
	offset, err := queryInt(q, "logsOffset", 0, 0, 1<<30)
	if err != nil {
		return err
	}
	limit, err := queryInt(q, "limit", 100, 0, 100)
	if err != nil {
		return err
	}
	st, err := e.cfg.Templates.BuildStatus(r.Context(), httpx.Org(r), v["templateID"], v["buildID"], offset, limit, q.Get("level"))
	if err != nil {
		return err
	}
	b := st.Build
	entries := logEntries(st.Logs)
	lines := make([]string, len(entries))
	for i, l := range entries {
		lines[i] = l.Message
	}
	out := e2btypes.TemplateBuildInfo{TemplateID: st.Template.ID, BuildID: b.ID, Status: e2btypes.TemplateBuildStatus(b.Status),
		LogEntries: entries, Logs: lines}
	if b.Status == template.StatusError {
		reason := e2btypes.BuildStatusReason{Message: b.Reason}
		if b.ReasonStep != "" {
			step := b.ReasonStep
			reason.Step = &step
		}
		out.Reason = &reason
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (e *Edge) handleBuildLogs(w http.ResponseWriter, r *http.Request) error {
	q, v := r.URL.Query(), mux.Vars(r)
	limit, err := queryInt(q, "limit", 100, 0, 100)
	if err != nil {
		return err
	}
	cursor, err := queryInt(q, "cursor", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	st, err := e.cfg.Templates.BuildStatus(r.Context(), httpx.Org(r), v["templateID"], v["buildID"], 0, 1<<30, q.Get("level"))
	if err != nil {
		return err
	}
	logs := st.Logs
	if q.Get("direction") == "backward" {
		logs = slices.Clone(logs)
		slices.Reverse(logs)
	}
	from := time.UnixMilli(int64(cursor))
	kept := logs[:0:0]
	for _, l := range logs {
		if cursor > 0 && ((q.Get("direction") == "backward" && l.At.After(from)) || (q.Get("direction") != "backward" && l.At.Before(from))) {
			continue
		}
		if len(kept) == limit {
			break
		}
		kept = append(kept, l)
	}
	httpx.WriteJSON(w, http.StatusOK, e2btypes.TemplateBuildLogsResponse{Logs: logEntries(kept)})
	return nil
}

func snapshotInfo(s templates.Snapshot) e2btypes.SnapshotInfo {
	return e2btypes.SnapshotInfo{SnapshotID: s.ID(), Names: templates.Names(s.Template)}
}

func (e *Edge) handleSnapshot(w http.ResponseWriter, r *http.Request) error {
	var b e2btypes.SandboxSnapshotRequest
	if err := httpx.DecodeLenient(r, &b); err != nil {
		return err
	}
	snap, err := e.cfg.Templates.TakeSnapshot(r.Context(), httpx.Org(r), pathID(r), deref(b.Name))
	var nf *domain.NotFoundError
	if errors.As(err, &nf) && nf.Kind == "sandbox" {
		return notFound(pathID(r), "")
	}
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, snapshotInfo(snap))
	return nil
}

func (e *Edge) handleSnapshotList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := pageLimit(q)
	if err != nil {
		return err
	}
	snaps, err := e.cfg.Templates.Snapshots(r.Context(), httpx.Org(r), templates.SnapshotFilter{SandboxID: q.Get("sandboxID"), Name: q.Get("name")})
	if err != nil {
		return err
	}
	start := 0
	if tok := q.Get("nextToken"); tok != "" {
		if start, err = strconv.Atoi(tok); err != nil || start < 0 {
			return httpx.InvalidQuery("nextToken", "not a token this API answered; start again without it")
		}
	}
	start = min(start, len(snaps))
	end := min(start+limit, len(snaps))
	if end < len(snaps) {
		w.Header().Set("X-Next-Token", strconv.Itoa(end))
	}
	out := make([]e2btypes.SnapshotInfo, 0, end-start)
	for _, s := range snaps[start:end] {
		out = append(out, snapshotInfo(s))
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}
