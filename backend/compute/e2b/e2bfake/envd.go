package e2bfake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process/processconnect"
)

// envd, as reached through E2B's proxy at https://49983-<id>.<domain>; here at
// <URL>/envd/<id>. The proxy answers 502 for a sandbox that does not exist or
// is paused (it has no auto-resume here).

type ctxKey struct{}

// undocumentedEnvd are the proxy's statuses, absent from envd.yaml.
func undocumentedEnvd(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

func (s *Server) serveEnvd(w http.ResponseWriter, r *http.Request, body []byte, id, sub string) {
	if strings.HasPrefix(sub, "/process.Process/") || strings.HasPrefix(sub, "/filesystem.Filesystem/") {
		key := "envd " + r.Method + " " + sub
		if f, ok := s.popFault(key); ok {
			if f.DropConnection {
				s.record(key, r, 0)
				dropConnection(w)
				return
			}
			rec := httptest.NewRecorder()
			writeFault(rec, f)
			s.record(key, r, rec.Code)
			copyResponse(w, rec)
			return
		}
		if status, msg := s.proxyCheck(id); status != 0 {
			s.record(key, r, status)
			writeError(w, status, msg, "")
			return
		}
		cr := withBody(r, body, sub)
		cr = cr.WithContext(context.WithValue(cr.Context(), ctxKey{}, id))
		rec := &statusRecorder{ResponseWriter: w}
		s.procHandler.ServeHTTP(rec, cr)
		s.record(key, r, rec.status)
		return
	}
	vr := withBody(r, body, sub)
	route, in := s.validateRequest(s.envdSpec, "envd.yaml", vr, body, envdAuth)
	key := ""
	if route != nil {
		key = "envd " + route.Method + " " + route.Path
	}
	rec := httptest.NewRecorder()
	if f, ok := s.popFault(key); ok && key != "" {
		if f.DropConnection {
			s.record(key, r, 0)
			dropConnection(w)
			return
		}
		writeFault(rec, f)
	} else if status, msg := s.proxyCheck(id); status != 0 {
		writeError(rec, status, msg, "")
	} else if route == nil {
		writeError(rec, http.StatusNotFound, "no such route", "")
	} else if !s.tokenOK(id, r.Header.Get("X-Access-Token")) {
		writeError(rec, http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported", "")
	} else if s.envdUp != nil {
		s.forwardEnvd(rec, vr, id, sub)
	} else {
		switch key {
		case RouteFilesGet:
			s.getFile(rec, vr, id)
		case RouteFilesPost:
			s.postFile(rec, vr, id, body)
		default:
			writeError(rec, http.StatusInternalServerError, "the fake does not implement "+key, "")
		}
	}
	s.validateResponse(s.envdSpec, "envd.yaml", in, rec, undocumentedEnvd)
	s.record(key, r, rec.Code)
	copyResponse(w, rec)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// proxyCheck answers like E2B's proxy for a sandbox that cannot be reached.
func (s *Server) proxyCheck(id string) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
	sb, ok := s.sandboxes[id]
	switch {
	case !ok:
		return http.StatusBadGateway, fmt.Sprintf("The sandbox %s was not found", id)
	case sb.State != "running":
		return http.StatusBadGateway, fmt.Sprintf("The sandbox %s is paused", id)
	}
	return 0, ""
}

func (s *Server) tokenOK(id, token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	return ok && (!sb.Secure || token == sb.EnvdAccessToken)
}

func homeOf(user string) string {
	switch user {
	case "", "user":
		return "/home/user"
	case "root":
		return "/root"
	}
	return "/home/" + user
}

func resolve(p, user, cwd string) string {
	if !path.IsAbs(p) {
		base := cwd
		if base == "" {
			base = homeOf(user)
		}
		p = path.Join(base, p)
	}
	return path.Clean(p)
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request, id string) {
	q := r.URL.Query()
	p := resolve(q.Get("path"), q.Get("username"), "")
	s.mu.Lock()
	sb := s.sandboxes[id]
	data, ok := sb.Files[p]
	isDir := !ok && hasChildren(sb.Files, p)
	s.mu.Unlock()
	switch {
	case isDir:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", p), "")
	case !ok:
		writeError(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", p), "")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data)
	}
}

func hasChildren(files map[string][]byte, dir string) bool {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for k := range files {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

type entryInfo struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

func (s *Server) postFile(w http.ResponseWriter, r *http.Request, id string, body []byte) {
	q := r.URL.Query()
	user := q.Get("username")
	type upload struct {
		path string
		data []byte
	}
	var ups []upload
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "multipart/form-data":
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				writeError(w, http.StatusBadRequest, "invalid multipart body: "+err.Error(), "")
				return
			}
			if part.FormName() != "file" {
				continue
			}
			data, err := io.ReadAll(part)
			if err != nil {
				writeError(w, http.StatusBadRequest, "invalid multipart body: "+err.Error(), "")
				return
			}
			p := q.Get("path")
			if p == "" {
				p = part.FileName()
			}
			ups = append(ups, upload{resolve(p, user, ""), data})
		}
	case "application/octet-stream":
		if q.Get("path") == "" {
			writeError(w, http.StatusBadRequest, "the path query parameter is required with application/octet-stream", "")
			return
		}
		ups = append(ups, upload{resolve(q.Get("path"), user, ""), body})
	default:
		writeError(w, http.StatusBadRequest, "unsupported content type "+mt, "")
		return
	}
	if len(ups) == 0 {
		writeError(w, http.StatusBadRequest, "no file in the request", "")
		return
	}
	s.mu.Lock()
	sb := s.sandboxes[id]
	var out []entryInfo
	for _, u := range ups {
		if hasChildren(sb.Files, u.path) {
			s.mu.Unlock()
			writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", u.path), "")
			return
		}
		_, existed := sb.Files[u.path]
		sb.Files[u.path] = bytes.Clone(u.data)
		typ := filesystem.EventType_EVENT_TYPE_CREATE
		if existed {
			typ = filesystem.EventType_EVENT_TYPE_WRITE
		}
		s.changed(id, u.path, typ)
		out = append(out, entryInfo{Path: u.path, Name: path.Base(u.path), Type: "file"})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// SetFile writes a file into a sandbox.
func (s *Server) SetFile(id, p string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb, ok := s.sandboxes[id]; ok {
		sb.Files[resolve(p, "", "")] = bytes.Clone(data)
	}
}

// File reads a file of a sandbox.
func (s *Server) File(id, p string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return nil, false
	}
	d, ok := sb.Files[resolve(p, "", "")]
	return bytes.Clone(d), ok
}

// Exec is one command started through process.Process/Start.
type Exec struct {
	SandboxID string
	Cmd       string
	Args      []string
	Env       map[string]string // the sandbox's envVars overlaid with the request's
	Cwd       string            // "" means the user's home
	Tag       string
	Stdin     io.Reader // empty unless started with stdin
	Stdout    io.Writer
	Stderr    io.Writer
	ReadFile  func(path string) ([]byte, bool)
	WriteFile func(path string, data []byte)
}

// ExecFunc runs a command until it ends or ctx is cancelled (SIGKILL) and
// returns its exit code.
type ExecFunc func(ctx context.Context, e *Exec) int

// Signal is a signal a client sent with SendSignal.
type Signal struct {
	SandboxID string
	PID       uint32
	Signal    process.Signal
}

// Signals returns the signals received so far.
func (s *Server) Signals() []Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.signals)
}

// Running returns how many processes are still running.
func (s *Server) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.procs)
}

type proc struct {
	sandboxID string
	tag       string
	cmd       string
	args      []string
	cancel    context.CancelFunc
	stdin     *io.PipeWriter // nil without stdin (or once closed)
	subs      map[*outQueue]bool
	done      chan struct{} // closed when the process ended; end is set
	end       *process.ProcessEvent_EndEvent
}

func (s *Server) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		p.cancel()
	}
}

type processService struct {
	processconnect.UnimplementedProcessHandler
	s *Server
}

func (ps *processService) sandbox(ctx context.Context, h http.Header) (string, error) {
	id, _ := ctx.Value(ctxKey{}).(string)
	if !ps.s.tokenOK(id, h.Get("X-Access-Token")) {
		return "", connect.NewError(connect.CodeUnauthenticated, errors.New("unauthorized access, please provide a valid access token or method signing if supported"))
	}
	return id, nil
}

// outQueue collects a process's output for the stream handler.
type outQueue struct {
	mu     sync.Mutex
	events []*process.ProcessEvent_DataEvent
	notify chan struct{}
}

func (q *outQueue) push(ev *process.ProcessEvent_DataEvent) {
	q.mu.Lock()
	q.events = append(q.events, ev)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *outQueue) take() []*process.ProcessEvent_DataEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	ev := q.events
	q.events = nil
	return ev
}

// procWriter copies a process's output to every stream attached to it.
type procWriter struct {
	s      *Server
	p      *proc
	stderr bool
}

func (w procWriter) Write(b []byte) (int, error) {
	data := bytes.Clone(b)
	ev := &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: data}}
	if w.stderr {
		ev.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: data}
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	for q := range w.p.subs {
		q.push(ev)
	}
	return len(b), nil
}

func (ps *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	s := ps.s
	id, err := ps.sandbox(ctx, req.Header())
	if err != nil {
		return err
	}
	cfg := req.Msg.GetProcess()
	if cfg == nil || cfg.GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process config with a cmd is required"))
	}
	if s.lookup != nil && !s.lookup(cfg.GetCmd()) {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("error starting process: exec: %q: executable file not found in $PATH", cfg.GetCmd()))
	}
	s.mu.Lock()
	sb := s.sandboxes[id]
	env := maps.Clone(sb.EnvVars)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, cfg.GetEnvs())
	s.nextPID++
	pid := s.nextPID
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	q := &outQueue{notify: make(chan struct{}, 1)}
	pr := &proc{sandboxID: id, tag: req.Msg.GetTag(), cmd: cfg.GetCmd(), args: cfg.GetArgs(), cancel: cancel,
		subs: map[*outQueue]bool{q: true}, done: make(chan struct{})}
	var stdin io.Reader = strings.NewReader("")
	if req.Msg.GetStdin() {
		var r *io.PipeReader
		r, pr.stdin = io.Pipe()
		stdin = r
	}
	s.procs[pid] = pr
	run := s.exec
	s.mu.Unlock()

	e := &Exec{
		SandboxID: id, Cmd: cfg.GetCmd(), Args: cfg.GetArgs(), Env: env, Cwd: cfg.GetCwd(), Tag: req.Msg.GetTag(),
		Stdin: stdin, Stdout: procWriter{s: s, p: pr}, Stderr: procWriter{s: s, p: pr, stderr: true},
		ReadFile: func(p string) ([]byte, bool) { return s.File(id, resolve(p, "", cfg.GetCwd())) },
		WriteFile: func(p string, data []byte) {
			s.SetFile(id, resolve(p, "", cfg.GetCwd()), data)
		},
	}
	go func() {
		code := run(pctx, e)
		end := &process.ProcessEvent_EndEvent{ExitCode: int32(code), Exited: true, Status: "exit status " + strconv.Itoa(code)}
		if pctx.Err() != nil {
			msg := "signal: killed"
			end = &process.ProcessEvent_EndEvent{ExitCode: -1, Exited: false, Status: msg, Error: &msg}
		}
		s.mu.Lock()
		delete(s.procs, pid)
		pr.end = end
		if pr.stdin != nil {
			pr.stdin.Close()
		}
		s.mu.Unlock()
		cancel()
		close(pr.done)
	}()
	return ps.follow(ctx, pr, pid, q, func(ev *process.ProcessEvent) error { return stream.Send(&process.StartResponse{Event: ev}) })
}

// follow sends a process's start event, its output from now on and its end.
func (ps *processService) follow(ctx context.Context, pr *proc, pid uint32, q *outQueue, send func(*process.ProcessEvent) error) error {
	defer func() {
		ps.s.mu.Lock()
		delete(pr.subs, q)
		ps.s.mu.Unlock()
	}()
	if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: pid}}}); err != nil {
		return err
	}
	flush := func() error {
		for _, ev := range q.take() {
			if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: ev}}); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		select {
		case <-q.notify:
			if err := flush(); err != nil {
				return err
			}
		case <-pr.done:
			if err := flush(); err != nil {
				return err
			}
			return send(&process.ProcessEvent{Event: &process.ProcessEvent_End{End: pr.end}})
		case <-ctx.Done():
			// The client went away; like envd, the process runs on.
			return ctx.Err()
		}
	}
}

// selected finds the running process a selector names in sandbox id.
func (s *Server) selected(id string, sel *process.ProcessSelector) (*proc, uint32) {
	switch sel := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		if p := s.procs[sel.Pid]; p != nil && p.sandboxID == id {
			return p, sel.Pid
		}
	case *process.ProcessSelector_Tag:
		for k, p := range s.procs {
			if p.sandboxID == id && p.tag == sel.Tag {
				return p, k
			}
		}
	}
	return nil, 0
}

var errNoProcess = connect.NewError(connect.CodeNotFound, errors.New("process not found"))

func (ps *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	id, err := ps.sandbox(ctx, req.Header())
	if err != nil {
		return err
	}
	ps.s.mu.Lock()
	pr, pid := ps.s.selected(id, req.Msg.GetProcess())
	q := &outQueue{notify: make(chan struct{}, 1)}
	if pr != nil {
		pr.subs[q] = true
	}
	ps.s.mu.Unlock()
	if pr == nil {
		return errNoProcess
	}
	return ps.follow(ctx, pr, pid, q, func(ev *process.ProcessEvent) error { return stream.Send(&process.ConnectResponse{Event: ev}) })
}

func (ps *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	id, err := ps.sandbox(ctx, req.Header())
	if err != nil {
		return nil, err
	}
	ps.s.mu.Lock()
	pr, _ := ps.s.selected(id, req.Msg.GetProcess())
	var w *io.PipeWriter
	if pr != nil {
		w = pr.stdin
	}
	ps.s.mu.Unlock()
	if pr == nil {
		return nil, errNoProcess
	}
	if w == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("stdin not enabled or closed"))
	}
	data := req.Msg.GetInput().GetStdin()
	if data == nil {
		data = req.Msg.GetInput().GetPty()
	}
	if _, err := w.Write(data); err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("error writing to stdin: %w", err))
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

// withProcess authenticates, then runs f under the lock on the process sel
// names (NotFound when there is none).
func (ps *processService) withProcess(ctx context.Context, h http.Header, sel *process.ProcessSelector, f func(id string, pr *proc, pid uint32)) error {
	id, err := ps.sandbox(ctx, h)
	if err != nil {
		return err
	}
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	pr, pid := ps.s.selected(id, sel)
	if pr == nil {
		return errNoProcess
	}
	f(id, pr, pid)
	return nil
}

func (ps *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	err := ps.withProcess(ctx, req.Header(), req.Msg.GetProcess(), func(_ string, pr *proc, _ uint32) {
		if pr.stdin != nil {
			pr.stdin.Close()
			pr.stdin = nil
		}
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

func (ps *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	err := ps.withProcess(ctx, req.Header(), req.Msg.GetProcess(), func(id string, pr *proc, pid uint32) {
		ps.s.signals = append(ps.s.signals, Signal{SandboxID: id, PID: pid, Signal: req.Msg.GetSignal()})
		pr.cancel()
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func (ps *processService) List(ctx context.Context, req *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	s := ps.s
	id, err := ps.sandbox(ctx, req.Header())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &process.ListResponse{}
	pids := make([]uint32, 0, len(s.procs))
	for pid, p := range s.procs {
		if p.sandboxID == id {
			pids = append(pids, pid)
		}
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	for _, pid := range pids {
		pr := s.procs[pid]
		info := &process.ProcessInfo{Pid: pid, Config: &process.ProcessConfig{Cmd: pr.cmd, Args: pr.args}}
		if t := pr.tag; t != "" {
			info.Tag = &t
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

var builtins = map[string]bool{"echo": true, "cat": true, "true": true, "false": true, "sleep": true, "pwd": true, "env": true, "exit": true}

func builtinLookup(cmd string) bool { return builtins[path.Base(cmd)] }

// builtinExec runs a handful of commands: echo, cat FILE..., true, false,
// sleep SECONDS, pwd, env, exit CODE; cat without files copies stdin.
func builtinExec(ctx context.Context, e *Exec) int {
	switch path.Base(e.Cmd) {
	case "echo":
		fmt.Fprintln(e.Stdout, strings.Join(e.Args, " "))
	case "cat":
		if len(e.Args) == 0 {
			if c, ok := e.Stdin.(io.Closer); ok { // a signal ends the read
				defer context.AfterFunc(ctx, func() { c.Close() })()
			}
			_, _ = io.Copy(e.Stdout, e.Stdin)
			if ctx.Err() != nil {
				return 137
			}
			return 0
		}
		code := 0
		for _, a := range e.Args {
			data, ok := e.ReadFile(a)
			if !ok {
				fmt.Fprintf(e.Stderr, "cat: %s: No such file or directory\n", a)
				code = 1
				continue
			}
			_, _ = e.Stdout.Write(data)
		}
		return code
	case "true":
	case "false":
		return 1
	case "exit":
		if len(e.Args) > 0 {
			n, _ := strconv.Atoi(e.Args[0])
			return n
		}
	case "sleep":
		d := time.Second
		if len(e.Args) > 0 {
			if f, err := strconv.ParseFloat(e.Args[0], 64); err == nil {
				d = time.Duration(f * float64(time.Second))
			}
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return 137
		case <-t.C:
		}
	case "pwd":
		cwd := e.Cwd
		if cwd == "" {
			cwd = homeOf("")
		}
		fmt.Fprintln(e.Stdout, cwd)
	case "env":
		for _, k := range slices.Sorted(maps.Keys(e.Env)) {
			fmt.Fprintf(e.Stdout, "%s=%s\n", k, e.Env[k])
		}
	default:
		fmt.Fprintf(e.Stderr, "%s: command not found\n", e.Cmd)
		return 127
	}
	return 0
}
