// Package e2bfake is an in-process fake of E2B for tests: the control plane of
// openapi.yml (sandboxes, pause/connect, timeouts, listing with X-Next-Token,
// logs, metrics) and enough of envd (envd.yaml's /files and process.proto's
// Process/Start and SendSignal over connect-go) to run commands and move
// files, all in memory on an httptest server on 127.0.0.1.
//
// The fake checks its client against E2B's published specs, loaded from
// ../shared/e2b beside the repository: every control-plane request is
// validated with kin-openapi (openapi3filter.ValidateRequest, X-API-Key
// required) and every response the fake gives with ValidateResponse, as are
// envd's /files requests and responses against envd.yaml. JSON object keys a
// schema does not declare count too (E2B would silently ignore a misspelt
// field). Violations are collected and fail the test at cleanup.
//
// Knobs: FailNext injects statuses (429, 503 with an error_code, 401, 500,
// ...) or dropped connections on a route; AddSandbox adds sandboxes the
// client did not create (foreign or orphaned ones); Kill removes a sandbox
// behind the client's back; Pause pauses one; Expire plays out a TTL.
//
// E2B's lifecycle webhooks (webhooks.go): /events/webhooks registers URLs,
// and kills and pauses (from the API, a TTL, Kill or Pause) are delivered to
// them signed as E2B documents; Deliveries lists every attempt.
package e2bfake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem/filesystemconnect"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process/processconnect"
)

// Routes, as "METHOD path-template" of openapi.yml, for FailNext and Count.
// envd routes carry an "envd " prefix.
const (
	RouteCreate       = "POST /sandboxes"
	RouteList         = "GET /v2/sandboxes"
	RouteGet          = "GET /sandboxes/{sandboxID}"
	RouteDelete       = "DELETE /sandboxes/{sandboxID}"
	RoutePause        = "POST /sandboxes/{sandboxID}/pause"
	RouteConnect      = "POST /sandboxes/{sandboxID}/connect"
	RouteTimeout      = "POST /sandboxes/{sandboxID}/timeout"
	RouteRefresh      = "POST /sandboxes/{sandboxID}/refreshes"
	RouteLogs         = "GET /v2/sandboxes/{sandboxID}/logs"
	RouteMetrics      = "GET /sandboxes/{sandboxID}/metrics"
	RouteFilesGet     = "envd GET /files"
	RouteFilesPost    = "envd POST /files"
	RouteVolumes      = "GET /volumes"
	RouteVolumeCreate = "POST /volumes"
	RouteVolumeDelete = "DELETE /volumes/{volumeID}"
	RouteSnapshot     = "POST /sandboxes/{sandboxID}/snapshots"
	RouteTemplateDel  = "DELETE /templates/{templateID}"
	RouteProcessStart = "envd POST /process.Process/Start"
	RouteProcessKill  = "envd POST /process.Process/SendSignal"
)

// EnvdVersion is the envd version the fake reports.
const EnvdVersion = "0.2.0"

// Fault is one injected answer.
type Fault struct {
	Status     int    // HTTP status to answer
	ErrorCode  string // error_code of the body, e.g. "sandbox_capacity_unavailable"
	Message    string // message of the body; a default per status otherwise
	RetryAfter string // Retry-After header, if any
	// DropConnection closes the connection without an answer (a transport
	// error for the client) instead of answering Status.
	DropConnection bool
	// AfterHandling lets the fake carry the request out first and only then
	// answer Status or drop the connection: the client's answer is lost
	// although E2B acted (e.g. a sandbox was created).
	AfterHandling bool
}

// Request is one request the fake received.
type Request struct {
	Route  string // e.g. RouteCreate; "" when it matched no operation
	Method string
	Path   string
	Query  url.Values
	Status int // what the fake answered; 0 for a dropped connection
}

// Template is a template the fake can start.
type Template struct {
	ID         string
	CPUCount   int
	MemoryMB   int
	DiskSizeMB int
}

// SandboxSpec describes a sandbox added with AddSandbox.
type SandboxSpec struct {
	TemplateID string // default "base"
	Metadata   map[string]string
	EnvVars    map[string]string
	Paused     bool
	Timeout    time.Duration // default 1h
	StartedAt  time.Time     // default now
}

// Sandbox is a snapshot of a fake sandbox.
type Sandbox struct {
	ID                  string
	TemplateID          string
	State               string // "running" or "paused"
	Metadata            map[string]string
	EnvVars             map[string]string
	StartedAt, EndAt    time.Time
	AutoPause           bool
	AutoResume          bool
	Secure              bool
	EnvdAccessToken     string
	AllowInternetAccess *bool
	Network             json.RawMessage // as sent
	Resumes             int             // how often connect resumed it
	Files               map[string][]byte
	VolumeMounts        []VolumeMount
	// FilesystemOnly: paused with `memory: false` (connect cold-boots it).
	FilesystemOnly bool
}

// VolumeMount is a team volume mounted into a sandbox.
type VolumeMount = e2btypes.SandboxVolumeMount

type sandbox struct {
	Sandbox
	cpu, mem, disk int
	traffic        string
	logs           []e2btypes.SandboxLogEntry
	metrics        []e2btypes.SandboxMetric
	dirs           map[string]bool // made with MakeDir (parents of files are implicit)
}

// Metric is a metrics reading set with SetMetrics.
type Metric struct {
	CPUUsedPct float64
	MemUsed    int64
	DiskUsed   int64
}

// Option configures a Server.
type Option func(*Server)

// WithAPIKey sets the API key the fake accepts (default "e2b_test_key").
func WithAPIKey(k string) Option { return func(s *Server) { s.APIKey = k } }

// WithPageSize caps how many sandboxes one GET /v2/sandboxes page holds,
// whatever limit the client asks for (the server may answer fewer).
func WithPageSize(n int) Option { return func(s *Server) { s.pageSize = n } }

// WithClock replaces time.Now (TTL expiry, start times).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithTemplate adds a template.
func WithTemplate(t Template) Option { return func(s *Server) { s.templates[t.ID] = t } }

// WithExec replaces the command runner of process.Process/Start. lookup
// reports whether a command exists (envd fails to start the others); nil
// means every command exists.
func WithExec(f ExecFunc, lookup func(cmd string) bool) Option {
	return func(s *Server) { s.exec, s.lookup = f, lookup }
}

// Server is the fake. Its exported fields are read-only after New.
type Server struct {
	URL    string // control plane base URL (E2B_API_URL)
	APIKey string
	Domain string

	api, envdSpec *Spec
	srv           *httptest.Server
	procHandler   http.Handler

	mu        sync.Mutex
	now       func() time.Time
	sandboxes map[string]*sandbox
	templates map[string]Template
	// snapshots holds, per snapshot template (RouteSnapshot), the files of
	// the sandbox it was taken of; a sandbox created from it starts with them.
	snapshots  map[string]map[string][]byte
	faults     map[string][]Fault
	holds      map[string]chan struct{} // route -> closed on release (hold.go)
	latency    map[string]time.Duration // route -> added response time (hold.go)
	held       int
	requests   []Request
	violations []string
	notes      []string
	pageSize   int
	exec       ExecFunc
	lookup     func(string) bool
	envdUp     EnvdUpstream      // upstream.go; nil: the fake's own envd
	volumes    map[string]string // volume id -> name
	procs      map[uint32]*proc
	nextPID    uint32
	signals    []Signal
	watchers   map[*watcher]bool
	webhooks   map[string]*webhook // webhooks.go
	deliveries []WebhookDelivery
	sending    sync.WaitGroup // deliveries in flight
	stop       chan struct{}  // closed at cleanup: deliveries stop retrying
}

// New starts a fake on 127.0.0.1 and registers its shutdown, and the check
// that no request or response violated the specs, with t.Cleanup. It fails
// the test at once when the specs cannot be loaded.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	api, err := LoadSpec("openapi.yml")
	if err != nil {
		t.Fatalf("e2bfake: %v", err)
	}
	envdSpec, err := LoadSpec("envd.yaml")
	if err != nil {
		t.Fatalf("e2bfake: %v", err)
	}
	s := &Server{
		APIKey:    "e2b_test_key",
		Domain:    "e2b.test",
		api:       api,
		envdSpec:  envdSpec,
		now:       time.Now,
		sandboxes: map[string]*sandbox{},
		templates: map[string]Template{"base": {ID: "base", CPUCount: 2, MemoryMB: 512, DiskSizeMB: 22 << 10}},
		faults:    map[string][]Fault{},
		volumes:   map[string]string{},
		procs:     map[uint32]*proc{},
		nextPID:   1000,
		webhooks:  map[string]*webhook{},
		stop:      make(chan struct{}),
	}
	for _, o := range opts {
		o(s)
	}
	if s.exec == nil {
		s.exec, s.lookup = builtinExec, builtinLookup
	}
	envdMux := http.NewServeMux()
	envdMux.Handle(processconnect.NewProcessHandler(&processService{s: s}))
	envdMux.Handle(filesystemconnect.NewFilesystemHandler(&fsService{s: s}))
	s.procHandler = envdMux
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
	t.Cleanup(func() {
		s.releaseHolds() // held requests would keep Close waiting
		close(s.stop)
		s.sending.Wait()
		// Processes end first: a client following one (a sandbox's main
		// command) holds its stream open, which Close would wait for.
		s.killAll()
		s.srv.Close()
		for _, v := range s.Violations() {
			t.Errorf("e2bfake: spec violation: %s", v)
		}
	})
	return s
}

// EnvdURL is envd's base URL for a sandbox (for the client's Config.EnvdURL).
func (s *Server) EnvdURL(sandboxID string) string {
	return s.URL + "/envd/" + sandboxID
}

// HTTPClient returns a client for the fake.
func (s *Server) HTTPClient() *http.Client { return s.srv.Client() }

// FailNext makes the next n requests to route answer f instead.
func (s *Server) FailNext(route string, n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[route] = append(s.faults[route], f)
	}
}

// ClearFaults drops faults not yet used.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = map[string][]Fault{}
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Count returns how many requests route received.
func (s *Server) Count(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Route == route {
			n++
		}
	}
	return n
}

// Violations returns the spec violations seen so far.
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.violations)
}

// TakeViolations returns and forgets the violations seen so far (for tests
// of the fake that provoke them on purpose).
func (s *Server) TakeViolations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.violations
	s.violations = nil
	return v
}

// Notes lists answers outside the spec the fake gave on purpose (a status
// E2B sends but openapi.yml does not document for the route, e.g. 429).
func (s *Server) Notes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.notes)
}

func (s *Server) violation(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
}

// AddSandbox adds a sandbox as if someone else (or a crashed backend) had
// created it, and returns its id.
func (s *Server) AddSandbox(spec SandboxSpec) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if spec.TemplateID == "" {
		spec.TemplateID = "base"
	}
	if spec.Timeout == 0 {
		spec.Timeout = time.Hour
	}
	sb := s.newSandboxLocked(spec.TemplateID, spec.Metadata, spec.EnvVars, spec.Timeout, true)
	if !spec.StartedAt.IsZero() {
		sb.StartedAt = spec.StartedAt.UTC()
		sb.EndAt = sb.StartedAt.Add(spec.Timeout)
	}
	if spec.Paused {
		sb.State = "paused"
	}
	return sb.ID
}

// Kill removes a sandbox behind the client's back; false if it did not exist.
func (s *Server) Kill(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if ok {
		s.emitLocked(sb, EventKilled)
	}
	delete(s.sandboxes, id)
	return ok
}

// Pause pauses a sandbox behind the client's back (as E2B's auto-pause
// does); false if it did not exist or was not running.
func (s *Server) Pause(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok || sb.State != "running" {
		return false
	}
	sb.State = "paused"
	s.emitLocked(sb, EventPaused)
	return true
}

// Expire plays out a sandbox's TTL now: paused with autoPause, else killed.
func (s *Server) Expire(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb, ok := s.sandboxes[id]; ok {
		s.expireLocked(sb)
	}
}

func (s *Server) expireLocked(sb *sandbox) {
	if sb.AutoPause {
		sb.State = "paused"
		sb.EndAt = s.now().UTC()
		s.emitLocked(sb, EventPaused)
		return
	}
	s.emitLocked(sb, EventKilled)
	delete(s.sandboxes, sb.ID)
}

// sweepLocked applies TTLs that have passed.
func (s *Server) sweepLocked() {
	now := s.now()
	for _, sb := range s.sandboxes {
		if sb.State == "running" && now.After(sb.EndAt) {
			s.expireLocked(sb)
		}
	}
}

// Sandbox returns a snapshot of a sandbox.
func (s *Server) Sandbox(id string) (Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return Sandbox{}, false
	}
	return sb.snapshot(), true
}

// Sandboxes returns snapshots of every sandbox.
func (s *Server) Sandboxes() []Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		out = append(out, sb.snapshot())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (sb *sandbox) snapshot() Sandbox {
	c := sb.Sandbox
	c.Metadata = maps.Clone(sb.Metadata)
	c.EnvVars = maps.Clone(sb.EnvVars)
	c.VolumeMounts = slices.Clone(sb.VolumeMounts)
	c.Files = map[string][]byte{}
	for k, v := range sb.Files {
		c.Files[k] = bytes.Clone(v)
	}
	return c
}

// AddLog appends a log entry to a sandbox.
func (s *Server) AddLog(id, level, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb, ok := s.sandboxes[id]; ok {
		sb.logs = append(sb.logs, e2btypes.SandboxLogEntry{Timestamp: s.now().UTC(), Level: e2btypes.LogLevel(level), Message: message, Fields: map[string]string{}})
	}
}

// SetMetrics records a metrics reading for a sandbox.
func (s *Server) SetMetrics(id string, m Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb, ok := s.sandboxes[id]; ok {
		now := s.now().UTC()
		sb.metrics = append(sb.metrics, e2btypes.SandboxMetric{
			Timestamp: now, TimestampUnix: now.Unix(), CpuCount: int32(sb.cpu), CpuUsedPct: float32(m.CPUUsedPct),
			MemUsed: m.MemUsed, MemTotal: int64(sb.mem) << 20, DiskUsed: m.DiskUsed, DiskTotal: int64(sb.disk) << 20,
		})
	}
}

func randomID(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) newSandboxLocked(template string, md, env map[string]string, ttl time.Duration, secure bool) *sandbox {
	t := s.templates[template]
	now := s.now().UTC()
	sb := &sandbox{
		Sandbox: Sandbox{
			ID:         "i" + randomID(19),
			TemplateID: template,
			State:      "running",
			Metadata:   maps.Clone(md),
			EnvVars:    maps.Clone(env),
			StartedAt:  now,
			EndAt:      now.Add(ttl),
			Secure:     secure,
			Files:      map[string][]byte{},
		},
		cpu: max(t.CPUCount, 1), mem: max(t.MemoryMB, 128), disk: t.DiskSizeMB,
		traffic: randomToken(),
	}
	if secure {
		sb.EnvdAccessToken = randomToken()
	}
	sb.logs = []e2btypes.SandboxLogEntry{{Timestamp: now, Level: e2btypes.LogLevelInfo, Message: "sandbox started", Fields: map[string]string{"templateID": template}}}
	s.sandboxes[sb.ID] = sb
	return sb
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/envd/"); ok && s.envdUp != nil {
		if id, sub, _ := strings.Cut(rest, "/"); isConnectRoute("/" + sub) {
			s.proxyConnect(w, r, id, "/"+sub)
			return
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/envd/"); ok {
		id, sub, _ := strings.Cut(rest, "/")
		s.serveEnvd(w, r, body, id, "/"+sub)
		return
	}
	if r.URL.Path == RouteWebhooks || strings.HasPrefix(r.URL.Path, RouteWebhooks+"/") {
		s.serveWebhooks(w, r, body)
		return
	}
	s.serveAPI(w, r, body)
}

// withBody returns a copy of r whose body (and GetBody) replay body, with
// the path replaced when path != "".
func withBody(r *http.Request, body []byte, path string) *http.Request {
	c := r.Clone(r.Context())
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	c.ContentLength = int64(len(body))
	if path != "" {
		u := *r.URL
		u.Path, u.RawPath = path, ""
		c.URL = &u
		c.RequestURI = u.RequestURI()
	}
	return c
}

// APIAuth accepts E2B's ApiKeyAuth (an X-API-Key header) only.
func APIAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecuritySchemeName != "ApiKeyAuth" {
		return fmt.Errorf("the client must authenticate with ApiKeyAuth, not %s", in.SecuritySchemeName)
	}
	if in.RequestValidationInput.Request.Header.Get("X-API-Key") == "" {
		return errors.New("no X-API-Key header")
	}
	return nil
}

func envdAuth(_ context.Context, _ *openapi3filter.AuthenticationInput) error {
	return nil // AccessTokenAuth or anonymous; the fake itself checks the token
}

// validateRequest checks a request against spec (CheckRequest) and records
// what it finds as violations.
func (s *Server) validateRequest(spec *Spec, which string, r *http.Request, body []byte, auth openapi3filter.AuthenticationFunc) (*routers.Route, *openapi3filter.RequestValidationInput) {
	route, in, problems := CheckRequest(spec, which, r, body, auth)
	for _, p := range problems {
		s.violation("%s", p)
	}
	return route, in
}

// validateResponse checks an answer (CheckResponse) and records what it
// finds as violations and notes.
func (s *Server) validateResponse(spec *Spec, which string, in *openapi3filter.RequestValidationInput, rec *httptest.ResponseRecorder, allowed func(status int) bool) {
	problems, note := CheckResponse(spec, which, in, rec.Code, rec.Header(), rec.Body.Bytes(), allowed)
	for _, p := range problems {
		s.violation("%s", p)
	}
	if note != "" {
		s.mu.Lock()
		s.notes = append(s.notes, note)
		s.mu.Unlock()
	}
}

// UndocumentedAPI are statuses E2B answers on any control-plane route
// although openapi.yml does not list them everywhere.
func UndocumentedAPI(route string) func(int) bool {
	return func(status int) bool {
		switch status {
		case http.StatusTooManyRequests, http.StatusForbidden, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusInternalServerError:
			return true
		case http.StatusNotFound:
			// An unknown template, at create and at delete (E2B's own
			// TestSnapshotTemplateDelete expects 404 for a template it does
			// not know; openapi.yml lists 204, 401 and 500 only).
			return route == RouteCreate || route == RouteTemplateDel
		}
		return false
	}
}

func (s *Server) record(route string, r *http.Request, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Route: route, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Status: status})
}

func (s *Server) popFault(route string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.faults[route]
	if len(q) == 0 {
		return Fault{}, false
	}
	s.faults[route] = q[1:]
	return q[0], true
}

func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func writeFault(w http.ResponseWriter, f Fault) {
	msg := f.Message
	if msg == "" {
		msg = http.StatusText(f.Status)
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	writeError(w, f.Status, msg, f.ErrorCode)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg, code string) {
	e := e2btypes.Error{Code: int32(status), Message: msg}
	if code != "" {
		e.ErrorCode = &code
	}
	writeJSON(w, status, e)
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, body []byte) {
	vr := withBody(r, body, "")
	route, in := s.validateRequest(s.api, "openapi.yml", vr, body, APIAuth)
	key := ""
	if route != nil {
		key = route.Method + " " + route.Path
	}
	s.waitHold(r.Context(), key)
	s.waitLatency(r.Context(), key)
	if f, ok := s.popFault(key); ok && key != "" {
		if f.AfterHandling && r.Header.Get("X-API-Key") == s.APIKey {
			s.handleAPI(httptest.NewRecorder(), vr, key, in.PathParams, body)
		}
		if f.DropConnection {
			s.record(key, r, 0)
			dropConnection(w)
			return
		}
		rec := httptest.NewRecorder()
		writeFault(rec, f)
		s.finish(w, r, key, in, rec)
		return
	}
	rec := httptest.NewRecorder()
	switch {
	case route == nil:
		writeError(rec, http.StatusNotFound, "no such route", "")
	case r.Header.Get("X-API-Key") != s.APIKey:
		writeError(rec, http.StatusUnauthorized, "Invalid API key, please visit https://e2b.dev/docs/api-key for more information.", "")
	default:
		s.handleAPI(rec, vr, key, in.PathParams, body)
	}
	s.finish(w, r, key, in, rec)
}

func (s *Server) finish(w http.ResponseWriter, r *http.Request, key string, in *openapi3filter.RequestValidationInput, rec *httptest.ResponseRecorder) {
	s.validateResponse(s.api, "openapi.yml", in, rec, UndocumentedAPI(key))
	s.record(key, r, rec.Code)
	copyResponse(w, rec)
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// The wire shapes are openapi.yml's, generated (e2btypes) like the
// client's; the checker still holds both sides to the document itself.

// rawCreate is what the fake keeps of a create body as sent.
type rawCreate struct {
	Network json.RawMessage `json:"network"`
}

func (s *Server) short(sb *sandbox) e2btypes.Sandbox {
	d := s.Domain
	t := sb.traffic
	out := e2btypes.Sandbox{TemplateID: sb.TemplateID, SandboxID: sb.ID, ClientID: "fakeclient", EnvdVersion: EnvdVersion,
		TrafficAccessToken: &t, Domain: &d}
	if sb.EnvdAccessToken != "" {
		tok := sb.EnvdAccessToken
		out.EnvdAccessToken = &tok
	}
	return out
}

func (s *Server) detail(sb *sandbox) e2btypes.SandboxDetail {
	d := s.Domain
	onTimeout := e2btypes.Kill
	if sb.AutoPause {
		onTimeout = e2btypes.Pause
	}
	out := e2btypes.SandboxDetail{TemplateID: sb.TemplateID, SandboxID: sb.ID, ClientID: "fakeclient", StartedAt: sb.StartedAt, EndAt: sb.EndAt,
		EnvdVersion: EnvdVersion, AllowInternetAccess: sb.AllowInternetAccess, Domain: &d,
		CpuCount: int32(sb.cpu), MemoryMB: int32(sb.mem), DiskSizeMB: int32(sb.disk), Metadata: metadataOf(sb.Metadata), State: e2btypes.SandboxState(sb.State),
		Lifecycle: &e2btypes.SandboxLifecycle{AutoResume: sb.AutoResume, OnTimeout: onTimeout}, VolumeMounts: sb.VolumeMounts}
	if sb.EnvdAccessToken != "" {
		tok := sb.EnvdAccessToken
		out.EnvdAccessToken = &tok
	}
	if len(sb.Network) > 0 {
		var n e2btypes.SandboxNetworkConfig
		if json.Unmarshal(sb.Network, &n) == nil {
			out.Network = &n
		}
	}
	return out
}

func listed(sb *sandbox) e2btypes.ListedSandbox {
	return e2btypes.ListedSandbox{TemplateID: sb.TemplateID, SandboxID: sb.ID, ClientID: "fakeclient", StartedAt: sb.StartedAt, EndAt: sb.EndAt,
		CpuCount: int32(sb.cpu), MemoryMB: int32(sb.mem), DiskSizeMB: int32(sb.disk), Metadata: metadataOf(sb.Metadata),
		State: e2btypes.SandboxState(sb.State), EnvdVersion: EnvdVersion, VolumeMounts: sb.VolumeMounts}
}

func deref[T any](p *T) T {
	var zero T
	if p != nil {
		return *p
	}
	return zero
}

// metadataOf is metadata as E2B answers it: absent when there is none.
func metadataOf(m map[string]string) *e2btypes.SandboxMetadata {
	if len(m) == 0 {
		return nil
	}
	md := e2btypes.SandboxMetadata(m)
	return &md
}

func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request, route string, params map[string]string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
	id := params["sandboxID"]
	var sb *sandbox
	if id != "" {
		sb = s.sandboxes[id]
		if sb == nil && route != RouteCreate {
			writeError(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found", id), "")
			return
		}
	}
	now := s.now().UTC()
	switch route {
	case RouteCreate:
		var req e2btypes.NewSandbox
		var raw rawCreate
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, http.StatusBadRequest, "invalid body: "+err.Error(), "")
			return
		}
		_ = json.Unmarshal(body, &raw)
		if _, ok := s.templates[req.TemplateID]; !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("template '%s' not found", req.TemplateID), "")
			return
		}
		for _, m := range req.VolumeMounts {
			if !slices.Contains(slices.Collect(maps.Values(s.volumes)), m.Name) {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("volume '%s' not found", m.Name), "")
				return
			}
		}
		ttl := int64(15)
		if req.Timeout != nil {
			ttl = int64(*req.Timeout)
		}
		var md, env map[string]string
		if req.Metadata != nil {
			md = *req.Metadata
		}
		if req.EnvVars != nil {
			env = *req.EnvVars
		}
		sb := s.newSandboxLocked(req.TemplateID, md, env, time.Duration(ttl)*time.Second, req.Secure != nil && *req.Secure)
		sb.AutoPause = req.AutoPause != nil && *req.AutoPause
		sb.AutoResume = req.AutoResume != nil && req.AutoResume.Enabled
		sb.AllowInternetAccess = req.AllowInternetAccess
		if len(raw.Network) > 0 && string(raw.Network) != "null" {
			sb.Network = slices.Clone(raw.Network)
		}
		sb.VolumeMounts = slices.Clone(req.VolumeMounts)
		maps.Copy(sb.Files, s.snapshots[req.TemplateID])
		writeJSON(w, http.StatusCreated, s.short(sb))
	case RouteGet:
		writeJSON(w, http.StatusOK, s.detail(sb))
	case RouteDelete:
		s.emitLocked(sb, EventKilled)
		delete(s.sandboxes, id)
		w.WriteHeader(http.StatusNoContent)
	case RoutePause:
		if sb.State != "running" {
			writeError(w, http.StatusConflict, fmt.Sprintf("sandbox %q is already paused", id), "")
			return
		}
		var req e2btypes.SandboxPauseRequest
		if len(bytes.TrimSpace(body)) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				writeError(w, http.StatusBadRequest, "invalid body: "+err.Error(), "")
				return
			}
		}
		sb.State = "paused"
		sb.FilesystemOnly = req.Memory != nil && !*req.Memory
		s.emitLocked(sb, EventPaused)
		w.WriteHeader(http.StatusNoContent)
	case RouteConnect:
		var req e2btypes.ConnectSandbox
		_ = json.Unmarshal(body, &req)
		end := now.Add(time.Duration(req.Timeout) * time.Second)
		if sb.State == "paused" {
			sb.State = "running"
			sb.FilesystemOnly = false
			sb.Resumes++
			sb.EndAt = end
			if sb.Secure {
				sb.EnvdAccessToken = randomToken() // a resumed sandbox gets a new token
			}
			writeJSON(w, http.StatusCreated, s.short(sb))
			return
		}
		if end.After(sb.EndAt) { // "TTL is only extended"
			sb.EndAt = end
		}
		writeJSON(w, http.StatusOK, s.short(sb))
	case RouteTimeout:
		var req e2btypes.SandboxTimeoutRequest
		_ = json.Unmarshal(body, &req)
		sb.EndAt = now.Add(time.Duration(req.Timeout) * time.Second)
		w.WriteHeader(http.StatusNoContent)
	case RouteRefresh:
		var req e2btypes.SandboxRefreshRequest
		_ = json.Unmarshal(body, &req)
		if end := now.Add(time.Duration(deref(req.Duration)) * time.Second); end.After(sb.EndAt) {
			sb.EndAt = end
		}
		w.WriteHeader(http.StatusNoContent)
	case RouteList:
		s.listLocked(w, r)
	case RouteLogs:
		s.logsLocked(w, r, sb)
	case RouteMetrics:
		ms := sb.metrics
		if ms == nil {
			ms = []e2btypes.SandboxMetric{}
		}
		writeJSON(w, http.StatusOK, ms)
	case RouteVolumes:
		out := []e2btypes.Volume{}
		for _, vid := range slices.Sorted(maps.Keys(s.volumes)) {
			out = append(out, e2btypes.Volume{VolumeID: vid, Name: s.volumes[vid]})
		}
		writeJSON(w, http.StatusOK, out)
	case RouteVolumeCreate:
		var req e2btypes.NewVolume
		_ = json.Unmarshal(body, &req)
		for _, n := range s.volumes {
			if n == req.Name {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("volume '%s' already exists", req.Name), "")
				return
			}
		}
		vid := "vol_" + randomID(12)
		s.volumes[vid] = req.Name
		writeJSON(w, http.StatusCreated, e2btypes.VolumeAndToken{VolumeID: vid, Name: req.Name, Token: randomToken()})
	case RouteSnapshot:
		// An unnamed snapshot: a new template of the sandbox's resources
		// and files (named snapshots, E2B's namespaces, are not faked).
		var req e2btypes.SandboxSnapshotRequest
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, http.StatusBadRequest, "invalid body: "+err.Error(), "")
			return
		}
		if req.Name != nil && *req.Name != "" {
			writeError(w, http.StatusInternalServerError, "the fake does not implement named snapshots", "")
			return
		}
		tid := "s" + randomID(19)
		s.templates[tid] = Template{ID: tid, CPUCount: sb.cpu, MemoryMB: sb.mem, DiskSizeMB: sb.disk}
		if s.snapshots == nil {
			s.snapshots = map[string]map[string][]byte{}
		}
		files := make(map[string][]byte, len(sb.Files))
		for k, v := range sb.Files {
			files[k] = slices.Clone(v)
		}
		s.snapshots[tid] = files
		writeJSON(w, http.StatusCreated, e2btypes.SnapshotInfo{SnapshotID: tid + ":default", Names: []string{}})
	case RouteTemplateDel:
		tid := params["templateID"]
		if _, ok := s.templates[tid]; !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("template %q not found", tid), "")
			return
		}
		delete(s.templates, tid)
		delete(s.snapshots, tid)
		w.WriteHeader(http.StatusNoContent)
	case RouteVolumeDelete:
		vid := params["volumeID"]
		if _, ok := s.volumes[vid]; !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("volume %q not found", vid), "")
			return
		}
		delete(s.volumes, vid)
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, http.StatusInternalServerError, "the fake does not implement "+route, "")
	}
}

// Volumes returns the names of the team volumes.
func (s *Server) Volumes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Values(s.volumes))
}

func (s *Server) listLocked(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var filter url.Values
	if m := q.Get("metadata"); m != "" {
		var err error
		if filter, err = url.ParseQuery(m); err != nil {
			writeError(w, http.StatusBadRequest, "invalid metadata filter: "+err.Error(), "")
			return
		}
	}
	states := map[string]bool{"running": true, "paused": true}
	if st := q.Get("state"); st != "" {
		states = map[string]bool{}
		for _, x := range strings.Split(st, ",") {
			states[x] = true
		}
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		limit, _ = strconv.Atoi(l)
	}
	if s.pageSize > 0 && limit > s.pageSize {
		limit = s.pageSize
	}
	asc := q.Get("order") == "asc"
	var all []*sandbox
	running := 0
	for _, sb := range s.sandboxes {
		if !states[sb.State] {
			continue
		}
		ok := true
		for k, vs := range filter {
			if len(vs) == 0 || sb.Metadata[k] != vs[0] {
				ok = false
			}
		}
		if !ok {
			continue
		}
		if sb.State == "running" {
			running++
		}
		all = append(all, sb)
	}
	less := func(a, b *sandbox) bool {
		if !a.StartedAt.Equal(b.StartedAt) {
			return a.StartedAt.Before(b.StartedAt) == asc
		}
		return a.ID < b.ID
	}
	sort.Slice(all, func(i, j int) bool { return less(all[i], all[j]) })
	start := 0
	if tok := q.Get("nextToken"); tok != "" {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		after, id, ok := strings.Cut(string(raw), "|")
		ns, nerr := strconv.ParseInt(after, 10, 64)
		if err != nil || !ok || nerr != nil {
			writeError(w, http.StatusBadRequest, "invalid nextToken", "")
			return
		}
		cur := &sandbox{Sandbox: Sandbox{ID: id, StartedAt: time.Unix(0, ns).UTC()}}
		start = sort.Search(len(all), func(i int) bool { return less(cur, all[i]) })
	}
	end := min(start+limit, len(all))
	page := make([]e2btypes.ListedSandbox, 0, end-start)
	for _, sb := range all[start:end] {
		page = append(page, listed(sb))
	}
	if end < len(all) {
		last := all[end-1]
		w.Header().Set("X-Next-Token", base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%d|%s", last.StartedAt.UnixNano(), last.ID))))
	}
	if states["running"] {
		w.Header().Set("X-Total-Running", strconv.Itoa(running))
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) logsLocked(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	q := r.URL.Query()
	limit := 1000
	if l := q.Get("limit"); l != "" {
		limit, _ = strconv.Atoi(l)
	}
	var cursor int64
	if c := q.Get("cursor"); c != "" {
		cursor, _ = strconv.ParseInt(c, 10, 64)
	}
	entries := slices.Clone(sb.logs)
	backward := q.Get("direction") == "backward"
	if backward {
		slices.Reverse(entries)
	}
	out := []e2btypes.SandboxLogEntry{}
	for _, e := range entries {
		ms := e.Timestamp.UnixMilli()
		if q.Has("cursor") && ((!backward && ms < cursor) || (backward && ms > cursor)) {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": out})
}

// Templates returns the ids of the team's templates (snapshots included).
func (s *Server) Templates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.templates))
}
