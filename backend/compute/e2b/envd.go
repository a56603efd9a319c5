package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/go-resty/resty/v2"
	"google.golang.org/protobuf/proto"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/envdpb/process"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/envdpb/process/processconnect"
)

// envd is reached at Config.EnvdURL(sandboxID) with the sandbox's
// envdAccessToken in X-Access-Token (envd.yaml AccessTokenAuth). The token
// comes from Ref.Data; when envd refuses it (the sandbox was resumed and the
// caller kept an old Ref) the current one is fetched from
// GET /sandboxes/{sandboxID} and the call is tried once more.

const accessTokenHeader = "X-Access-Token"

// withToken runs f with the Ref's token and, if envd refuses it, once more
// with the token E2B reports now.
func (p *Provider) withToken(ctx context.Context, op string, ref compute.Ref, f func(token string) error) error {
	data := parseRefData(ref.Data)
	token := data.EnvdAccessToken
	if token == "" {
		if inst, err := p.get(ctx, op, ref, false); err == nil {
			token = parseRefData(inst.Ref.Data).EnvdAccessToken
		} else {
			return err
		}
	}
	err := f(token)
	if compute.KindOf(err) != compute.KindAuth {
		return err
	}
	inst, gerr := p.get(ctx, op, ref, false)
	if gerr != nil {
		if compute.IsNotFound(gerr) {
			return gerr
		}
		return err
	}
	if inst.Status == compute.StatusPaused {
		return pausedError(op, ref.ID)
	}
	fresh := parseRefData(inst.Ref.Data).EnvdAccessToken
	if fresh == "" || fresh == token {
		return err
	}
	return f(fresh)
}

func pausedError(op, id string) error {
	return compute.Errorf(compute.KindConflict, op, nil, "E2B sandbox %s is paused; resume it first", id)
}

// diagnose explains an envd failure that may mean the sandbox itself is gone
// or paused (E2B's proxy answers 502 for both).
func (p *Provider) diagnose(ctx context.Context, op string, ref compute.Ref, err error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	inst, gerr := p.get(dctx, op, ref, true)
	switch {
	case compute.IsNotFound(gerr):
		return compute.Errorf(compute.KindNotFound, op, err, "E2B sandbox %s does not exist (it was killed or its timeout expired)", ref.ID)
	case gerr == nil && inst.Status == compute.StatusPaused:
		return pausedError(op, ref.ID)
	}
	return err
}

func (p *Provider) envdRetryHook(op string, ref compute.Ref) func(context.Context, error) (bool, error) {
	return func(ctx context.Context, cause error) (bool, error) {
		inst, err := p.get(ctx, op, ref, true)
		if compute.IsNotFound(err) {
			return false, compute.Errorf(compute.KindNotFound, op, cause, "E2B sandbox %s does not exist (it was killed or its timeout expired)", ref.ID)
		}
		if err == nil && inst.Status == compute.StatusPaused {
			return false, pausedError(op, ref.ID)
		}
		return false, nil
	}
}

func (p *Provider) envdHeaders(token string) map[string]string {
	h := map[string]string{}
	if token != "" {
		h[accessTokenHeader] = token
	}
	return h
}

func fileQuery(p string, user string) url.Values {
	q := url.Values{"path": {p}}
	if user != "" {
		q.Set("username", user)
	}
	return q
}

// ReadFile implements compute.Provider: envd GET /files?path=...
func (p *Provider) ReadFile(ctx context.Context, ref compute.Ref, filePath string) ([]byte, error) {
	const op = "read file"
	if err := checkRef(op, ref); err != nil {
		return nil, err
	}
	if filePath == "" {
		return nil, compute.Errorf(compute.KindInvalid, op, nil, "no file path given")
	}
	var out []byte
	err := p.withToken(ctx, op, ref, func(token string) error {
		res, err := p.do(ctx, &call{
			op:          op,
			method:      http.MethodGet,
			path:        strings.TrimRight(p.cfg.EnvdURL(ref.ID), "/") + "/files",
			sandboxID:   ref.ID,
			envd:        true,
			query:       fileQuery(filePath, p.cfg.User),
			header:      p.envdHeaders(token),
			ok:          []int{http.StatusOK},
			beforeRetry: p.envdRetryHook(op, ref),
			mapStatus: func(status int, e apiError) *compute.Error {
				if status == http.StatusNotFound {
					return compute.Errorf(compute.KindNotFound, op, nil, "file %s does not exist in E2B sandbox %s", filePath, ref.ID)
				}
				return nil
			},
		})
		if err != nil {
			return err
		}
		out = res.body
		return nil
	})
	if compute.KindOf(err) == compute.KindUnavailable {
		return nil, p.diagnose(ctx, op, ref, err)
	}
	return out, err
}

// WriteFile implements compute.Provider: envd POST /files?path=... with the
// content as the multipart "file" part. envd creates parent directories and
// overwrites an existing file.
func (p *Provider) WriteFile(ctx context.Context, ref compute.Ref, filePath string, data []byte) error {
	const op = "write file"
	if err := checkRef(op, ref); err != nil {
		return err
	}
	if filePath == "" {
		return compute.Errorf(compute.KindInvalid, op, nil, "no file path given")
	}
	err := p.withToken(ctx, op, ref, func(token string) error {
		_, err := p.do(ctx, &call{
			op:        op,
			method:    http.MethodPost,
			path:      strings.TrimRight(p.cfg.EnvdURL(ref.ID), "/") + "/files",
			sandboxID: ref.ID,
			envd:      true,
			query:     fileQuery(filePath, p.cfg.User),
			header:    p.envdHeaders(token),
			prepare: func(r *resty.Request) {
				r.SetMultipartFields(&resty.MultipartField{
					Param:       "file",
					FileName:    path.Base(filePath),
					ContentType: "application/octet-stream",
					Reader:      bytes.NewReader(data),
				})
			},
			ok:          []int{http.StatusOK},
			beforeRetry: p.envdRetryHook(op, ref),
		})
		return err
	})
	if compute.KindOf(err) == compute.KindUnavailable {
		return p.diagnose(ctx, op, ref, err)
	}
	return err
}

// envdReadMax bounds each message envd sends (compute.MaxMessageBytes):
// envd is the sandbox's own process, which its root can replace, so a
// message's declared length is never allocated past it.
var envdReadMax = connect.WithReadMaxBytes(compute.MaxMessageBytes)

func (p *Provider) processClient(sandboxID string) processconnect.ProcessClient {
	return processconnect.NewProcessClient(p.hc, strings.TrimRight(p.cfg.EnvdURL(sandboxID), "/"), envdReadMax)
}

func (p *Provider) startRequest(token string, cmd []string, env map[string]string, cwd string) *connect.Request[process.StartRequest] {
	cfg := &process.ProcessConfig{Cmd: cmd[0], Args: cmd[1:], Envs: env}
	if cwd != "" {
		cfg.Cwd = proto.String(cwd)
	}
	req := connect.NewRequest(&process.StartRequest{Process: cfg, Stdin: proto.Bool(false)})
	if token != "" {
		req.Header().Set(accessTokenHeader, token)
	}
	if p.cfg.User != "" {
		// envd picks the user of a process from basic auth "<user>:".
		req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(p.cfg.User+":")))
	}
	return req
}

// Exec implements compute.Provider with envd's process.Process/Start server
// stream: stdout and stderr are collected until the end event's exit code. A
// command still running at req.Timeout is killed (SIGKILL) and reported as
// compute.KindTimeout with the output so far.
func (p *Provider) Exec(ctx context.Context, ref compute.Ref, req compute.ExecRequest) (compute.ExecResult, error) {
	const op = "exec"
	if err := checkRef(op, ref); err != nil {
		return compute.ExecResult{}, err
	}
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return compute.ExecResult{}, compute.Errorf(compute.KindInvalid, op, nil, "no command given")
	}
	var res compute.ExecResult
	err := p.withToken(ctx, op, ref, func(token string) error {
		var err error
		res, err = p.exec(ctx, ref, token, req)
		return err
	})
	return res, err
}

func (p *Provider) exec(ctx context.Context, ref compute.Ref, token string, req compute.ExecRequest) (compute.ExecResult, error) {
	const op = "exec"
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if req.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
	}
	defer cancel()
	client := p.processClient(ref.ID)
	stream, err := client.Start(runCtx, p.startRequest(token, req.Cmd, req.Env, req.Cwd))
	if err != nil {
		return compute.ExecResult{}, p.connectError(ctx, runCtx, op, ref, req, err, false)
	}
	defer stream.Close()
	var (
		pid     uint32
		started bool
		ended   bool
		end     *process.ProcessEvent_EndEvent
	)
	out, errOut := compute.CappedBuffer{Max: p.cfg.MaxExecOutput}, compute.CappedBuffer{Max: p.cfg.MaxExecOutput}
	for !ended && stream.Receive() {
		ev := stream.Msg().GetEvent()
		switch e := ev.GetEvent().(type) {
		case *process.ProcessEvent_Start:
			started, pid = true, e.Start.GetPid()
		case *process.ProcessEvent_Data:
			_, _ = out.Write(e.Data.GetStdout())
			_, _ = errOut.Write(e.Data.GetStderr())
			_, _ = out.Write(e.Data.GetPty())
		case *process.ProcessEvent_End:
			ended, end = true, e.End
		}
	}
	res := compute.ExecResult{Stdout: out.Bytes(), Stderr: errOut.Bytes()}
	if ended {
		res.ExitCode = int(end.GetExitCode())
		if !end.GetExited() && end.Error != nil && res.ExitCode == 0 {
			res.ExitCode = -1
		}
		if !end.GetExited() && end.GetError() != "" {
			res.Stderr = append(res.Stderr, []byte(end.GetError())...)
		}
		return res, nil
	}
	serr := stream.Err()
	if serr == nil {
		serr = errors.New("the output stream ended without an end event")
	}
	// The deadline may surface first on envd's side (connect sends it along
	// as Connect-Timeout-Ms), before our own context expires.
	timedOut := runCtx.Err() != nil || (req.Timeout > 0 && connect.CodeOf(serr) == connect.CodeDeadlineExceeded && ctx.Err() == nil)
	if started && timedOut {
		p.kill(ctx, ref, token, pid)
	}
	return res, p.connectError(ctx, runCtx, op, ref, req, serr, started)
}

// kill sends SIGKILL to a process left running after its caller gave up.
func (p *Provider) kill(ctx context.Context, ref compute.Ref, token string, pid uint32) {
	if pid == 0 {
		return
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	r := connect.NewRequest(&process.SendSignalRequest{
		Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}},
		Signal:  process.Signal_SIGNAL_SIGKILL,
	})
	if token != "" {
		r.Header().Set(accessTokenHeader, token)
	}
	_, _ = p.processClient(ref.ID).SendSignal(kctx, r)
}

func (p *Provider) connectError(ctx, runCtx context.Context, op string, ref compute.Ref, req compute.ExecRequest, err error, started bool) error {
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return compute.Errorf(compute.KindTimeout, op, err, "command %q did not finish before the caller's deadline", strings.Join(req.Cmd, " "))
		}
		return compute.Errorf(compute.KindInternal, op, ctx.Err(), "command %q was cancelled", strings.Join(req.Cmd, " "))
	}
	if runCtx.Err() != nil || (req.Timeout > 0 && connect.CodeOf(err) == connect.CodeDeadlineExceeded) {
		return compute.Errorf(compute.KindTimeout, op, err, "command %q did not finish within its timeout of %s and was killed", strings.Join(req.Cmd, " "), req.Timeout)
	}
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return compute.Errorf(compute.KindAuth, op, err, "envd in E2B sandbox %s refused the access token or user: %s", ref.ID, msg)
	case connect.CodeDeadlineExceeded:
		return compute.Errorf(compute.KindTimeout, op, err, "command %q timed out: %s", strings.Join(req.Cmd, " "), msg)
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeFailedPrecondition:
		return compute.Errorf(compute.KindInvalid, op, err, "command %q could not run in E2B sandbox %s: %s", strings.Join(req.Cmd, " "), ref.ID, msg)
	case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeUnimplemented:
		// Typical of the E2B proxy answering for a sandbox that is gone or paused.
		return p.diagnose(ctx, op, ref, compute.Errorf(compute.KindUnavailable, op, err,
			"cannot reach envd in E2B sandbox %s: %s", ref.ID, msg))
	}
	if !started {
		return compute.Errorf(compute.KindInvalid, op, err, "command %q could not be started in E2B sandbox %s: %s", strings.Join(req.Cmd, " "), ref.ID, msg)
	}
	return compute.Errorf(compute.KindInternal, op, err, "command %q in E2B sandbox %s failed: %s", strings.Join(req.Cmd, " "), ref.ID, msg)
}

// startMain starts a Spec's Command in the background: it waits for envd's
// start event and then lets the process run on without a listener.
func (p *Provider) startMain(ctx context.Context, ref compute.Ref, cmd []string, env map[string]string) error {
	const op = "create"
	token := parseRefData(ref.Data).EnvdAccessToken
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	r := p.startRequest(token, cmd, env, "")
	r.Msg.Tag = proto.String("main")
	stream, err := p.processClient(ref.ID).Start(sctx, r)
	if err == nil {
		defer stream.Close()
		for stream.Receive() {
			ev := stream.Msg().GetEvent()
			if ev.GetStart() != nil {
				return nil
			}
			if end := ev.GetEnd(); end != nil {
				return compute.Errorf(compute.KindEntrypoint, op, nil,
					"the main command %q ended at once (exit code %d%s)", strings.Join(cmd, " "), end.GetExitCode(), optional(end.GetError()))
			}
		}
		err = stream.Err()
		if err == nil {
			err = errors.New("no start event")
		}
	}
	var ce *connect.Error
	msg := err.Error()
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	return compute.Errorf(compute.KindEntrypoint, op, err, "the main command %q could not be started in E2B sandbox %s: %s", strings.Join(cmd, " "), ref.ID, msg)
}

func optional(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}
