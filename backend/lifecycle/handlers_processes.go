package lifecycle

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ndjson"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// registerStreams adds the §6 routes: background processes and the
// filesystem (exec and /files GET/PUT stay in Register).
func (s *Service) registerStreams(r *mux.Router) {
	r.Handle("/sandboxes/{id}/processes", httpx.Handler(s.handleStartProcess)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{id}/processes", httpx.Handler(s.handleListProcesses)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{id}/processes/{pid}/output", httpx.Handler(s.handleProcessOutput)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{id}/processes/{pid}/stdin", httpx.Handler(s.handleStdin)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{id}/processes/{pid}/signal", httpx.Handler(s.handleSignal)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{id}/files", httpx.Handler(s.handleRemove)).Methods(http.MethodDelete)
	r.Handle("/sandboxes/{id}/fs", httpx.Handler(s.handleListFS)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{id}/fs/mkdir", httpx.Handler(s.handleMkdir)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{id}/fs/move", httpx.Handler(s.handleMove)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{id}/fs/watch", httpx.Handler(s.handleWatch)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{id}/archive", httpx.Handler(s.handleGetArchive)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{id}/archive", httpx.Handler(s.handlePutArchive)).Methods(http.MethodPut)
}

// processes is the provider's streaming side; providers without it answer
// through the buffered calls where a route allows.
func (s *Service) processes() (compute.Processes, bool) {
	ps, ok := s.prov.(compute.Processes)
	return ps, ok
}

func unsupported(err error) bool { return errors.Is(err, errors.ErrUnsupported) }

// streamExec answers /exec with Accept: application/x-ndjson.
func (s *Service) streamExec(w http.ResponseWriter, r *http.Request, rec *store.Record, req compute.ExecRequest) error {
	out := ndjson.New(w, r)
	kctx, kcancel := httpx.KeyContext(r) // the stream, and the command, end with the key
	defer kcancel()
	g := s.guardStream(kctx, rec.ID)
	defer g.stop()
	ps, ok := s.processes()
	err := errors.ErrUnsupported
	if ok {
		err = ps.ExecStream(g.ctx, rec.Ref(), req, nil, out.Event)
	}
	if unsupported(err) && !out.Started { // a provider without streams: one buffered run
		var res compute.ExecResult
		if res, err = s.prov.Exec(g.ctx, rec.Ref(), req); err == nil {
			for _, ev := range []compute.ProcessEvent{{Type: compute.EventStart}, {Type: compute.EventStdout, Data: res.Stdout},
				{Type: compute.EventStderr, Data: res.Stderr}, {Type: compute.EventExit, ExitCode: res.ExitCode}} {
				if err = out.Event(ev); err != nil {
					break
				}
			}
		}
	}
	if end, ok := g.ended(); ok && !out.Exited {
		return out.End(end) // the sandbox was paused or deleted under the stream
	}
	if kerr := httpx.KeyEnded(kctx); kerr != nil && !out.Exited {
		return out.EndKey(kerr)
	}
	if err != nil && r.Context().Err() != nil {
		return nil // the client left; the command was killed
	}
	if err != nil {
		return out.Finish(providerErr("run the command in", err))
	}
	return nil
}

// writeExecResult answers a buffered exec with {"exitCode", "stderr",
// "stdout"}, as encoding/json would write it, but encodes the output (up to
// compute.MaxExecOutputBytes per stream, from the sandbox) as it is sent:
// escapes can make it six times its size, which is not held.
// writeExecResult writes res as the document's ExecResult, encoding the
// output as it goes (no second copy of up to the output bound).
func writeExecResult(w http.ResponseWriter, res compute.ExecResult) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	_, _ = fmt.Fprintf(bw, `{"exitCode":%d,"stderr":`, res.ExitCode)
	writeJSONString(bw, res.Stderr)
	_, _ = bw.WriteString(`,"stdout":`)
	writeJSONString(bw, res.Stdout)
	if res.Truncated {
		_, _ = bw.WriteString(`,"truncated":true`)
	}
	_, _ = bw.WriteString("}\n")
	_ = bw.Flush()
}

// writeJSONString writes b as the JSON string encoding/json makes of
// string(b), a chunk at a time. Chunks end before a character's first byte,
// so no character is split (an invalid byte becomes U+FFFD either way).
func writeJSONString(w io.Writer, b []byte) {
	_, _ = w.Write([]byte{'"'})
	enc := make([]byte, 0, 6*(16<<10)+2) // reused: each chunk escaped into it
	for len(b) > 0 {
		n := min(len(b), 16<<10)
		for i := n; n < len(b) && i > n-utf8.UTFMax && i > 0; i-- {
			if utf8.RuneStart(b[i]) {
				n = i
				break
			}
		}
		enc = ndjson.AppendString(enc[:0], b[:n])
		_, _ = w.Write(enc[1 : len(enc)-1])
		b = b[n:]
	}
	_, _ = w.Write([]byte{'"'})
}

// checkCommand validates the cmd, env and cwd of exec and processes.
// maxArgBytes is Linux's bound on one argument or environment string
// (MAX_ARG_STRLEN, 32 pages, with its NUL); maxArgvEnvBytes stays well under
// the default ARG_MAX (a quarter of an 8 MiB stack), leaving room for the
// sandbox's own envVars.
const (
	maxArgBytes     = 128 << 10
	maxArgvEnvBytes = 1 << 20
)

func checkCommand(cmd []string, env map[string]string, cwd, example string) error {
	if len(cmd) == 0 || cmd[0] == "" {
		return httpx.Invalid("cmd", "is required: the program and its arguments, e.g. "+example)
	}
	// Linux refuses one argument or variable of 128 KiB or more (and an
	// argv+env over its ARG_MAX) with E2BIG: say so before the sandbox does.
	total := 0
	for i, a := range cmd {
		if len(a) >= maxArgBytes {
			return httpx.Invalid("cmd", fmt.Sprintf("argument %d is %d bytes; each argument must be under %d bytes (Linux's limit): pass large input through stdin or a file (PUT /files)", i, len(a), maxArgBytes))
		}
		total += len(a) + 1
	}
	for k, v := range env {
		if len(k)+len(v)+1 >= maxArgBytes {
			return httpx.Invalid("env", fmt.Sprintf("variable %s is %d bytes; each variable must be under %d bytes (Linux's limit)", k, len(k)+len(v)+1, maxArgBytes))
		}
		total += len(k) + len(v) + 2
	}
	if total > maxArgvEnvBytes {
		return httpx.Invalid("cmd", fmt.Sprintf("cmd and env together are %d bytes; they must stay under %d bytes: pass large input through stdin or a file (PUT /files)", total, maxArgvEnvBytes))
	}
	if err := checkEnv("env", env); err != nil {
		return err
	}
	if cwd != "" && !strings.HasPrefix(cwd, "/") {
		return httpx.Invalid("cwd", "must be an absolute path")
	}
	return nil
}

// commandEnv is the sandbox's envVars overridden by a command's env.
func commandEnv(rec *store.Record, env map[string]string) map[string]string {
	out := maps.Clone(rec.Spec.EnvVars)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, env)
	return out
}

func (s *Service) handleStartProcess(w http.ResponseWriter, r *http.Request) error {
	var req apitypes.StartProcess
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	if err := checkCommand(req.Cmd, req.Env, req.Cwd, `["python3", "-m", "http.server", "8080"]`); err != nil {
		return err
	}
	rec, ps, err := s.streamable(r)
	if err != nil {
		return err
	}
	env := commandEnv(rec, req.Env)
	p, err := ps.StartProcess(r.Context(), rec.Ref(), compute.ProcessRequest{Cmd: req.Cmd, Env: env, Cwd: req.Cwd, Tag: req.Tag, Stdin: req.Stdin})
	if err != nil {
		return providerErr("start the process in", err)
	}
	httpx.WriteJSON(w, http.StatusCreated, apitypes.ProcessStarted{PID: p.PID, Tag: p.Tag})
	return nil
}

// streamable is usable plus the provider's streaming side (400 without it).
func (s *Service) streamable(r *http.Request) (*store.Record, compute.Processes, error) {
	ps, ok := s.processes()
	if !ok {
		return nil, nil, httpx.NewError(http.StatusBadRequest, "unsupported", "this deployment's provider does not run background processes")
	}
	rec, err := s.usable(r)
	return rec, ps, err
}

func (s *Service) handleListProcesses(w http.ResponseWriter, r *http.Request) error {
	rec, ps, err := s.streamable(r)
	if err != nil {
		return err
	}
	list, err := ps.ListProcesses(r.Context(), rec.Ref())
	if err != nil {
		return providerErr("list the processes of", err)
	}
	out := make([]apitypes.Process, len(list))
	for i, p := range list {
		out[i] = apitypes.Process(p)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func pidOf(r *http.Request) (int, error) {
	pid, err := strconv.Atoi(mux.Vars(r)["pid"])
	if err != nil || pid <= 0 {
		return 0, httpx.InvalidPath("pid", "must be a process id returned by POST /processes")
	}
	return pid, nil
}

func (s *Service) handleProcessOutput(w http.ResponseWriter, r *http.Request) error {
	pid, err := pidOf(r)
	if err != nil {
		return err
	}
	follow := true
	if v := r.URL.Query().Get("follow"); v != "" {
		if follow, err = strconv.ParseBool(v); err != nil {
			return httpx.InvalidQuery("follow", "must be true or false")
		}
	}
	rec, ps, err := s.streamable(r)
	if err != nil {
		return err
	}
	out := ndjson.New(w, r)
	kctx, kcancel := httpx.KeyContext(r) // the stream ends with the key (the process goes on)
	defer kcancel()
	g := s.guardStream(kctx, rec.ID)
	defer g.stop()
	err = ps.ProcessOutput(g.ctx, rec.Ref(), pid, follow, out.Event)
	if end, ok := g.ended(); ok && !out.Exited {
		return out.End(end) // the sandbox was paused or deleted under the stream
	}
	if kerr := httpx.KeyEnded(kctx); kerr != nil && !out.Exited {
		return out.EndKey(kerr)
	}
	if err != nil && r.Context().Err() != nil {
		return nil
	}
	if err == nil {
		return out.Flush()
	}
	return out.Finish(providerErr("read the output of process "+strconv.Itoa(pid)+" in", err))
}

func (s *Service) handleStdin(w http.ResponseWriter, r *http.Request) error {
	pid, err := pidOf(r)
	if err != nil {
		return err
	}
	eof := false
	if v := r.URL.Query().Get("eof"); v != "" {
		if eof, err = strconv.ParseBool(v); err != nil {
			return httpx.InvalidQuery("eof", "must be true or false")
		}
	}
	rec, ps, err := s.streamable(r)
	if err != nil {
		return err
	}
	if err := ps.WriteStdin(r.Context(), rec.Ref(), pid, r.Body, eof); err != nil {
		return providerErr("write to the stdin of process "+strconv.Itoa(pid)+" in", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Service) handleSignal(w http.ResponseWriter, r *http.Request) error {
	pid, err := pidOf(r)
	if err != nil {
		return err
	}
	var req apitypes.SignalProcess
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	if !req.Signal.Valid() {
		return httpx.Invalid("signal", "must be one of SIGTERM, SIGKILL, SIGINT, SIGHUP")
	}
	rec, ps, err := s.streamable(r)
	if err != nil {
		return err
	}
	if err := ps.SignalProcess(r.Context(), rec.Ref(), pid, string(req.Signal)); err != nil {
		return providerErr("signal process "+strconv.Itoa(pid)+" in", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
