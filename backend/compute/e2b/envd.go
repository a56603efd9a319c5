package e2b

import (
	"bytes"
	"context"
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

// startMain starts a Spec's Command in the background: it waits for envd's
// start event and then follows the process to its end (mains).
func (p *Provider) startMain(ctx context.Context, ref compute.Ref, recordID string, cmd []string, env map[string]string) error {
	const op = "create"
	token := parseRefData(ref.Data).EnvdAccessToken
	// The stream outlives the create: it is followed until the command
	// ends. Until the start event, the create's context and a minute bound it.
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	unhook := context.AfterFunc(ctx, stop)
	timer := time.AfterFunc(60*time.Second, stop)
	c := p.envdClient(ref, token)
	r := c.StartRequest(cmd, env, "")
	r.Msg.Tag = proto.String("main")
	stream, err := c.Start(sctx, r)
	if err == nil {
		for stream.Receive() {
			ev := stream.Msg().GetEvent()
			if ev.GetStart() != nil && unhook() && timer.Stop() {
				p.mains.follow(ref, recordID, stream, stop)
				return nil
			}
			if end := ev.GetEnd(); end != nil {
				stream.Close()
				stop()
				return compute.Errorf(compute.KindEntrypoint, op, nil,
					"the main command %q ended at once (exit code %d%s)", strings.Join(cmd, " "), end.GetExitCode(), optional(end.GetError()))
			}
		}
		err = stream.Err()
		if err == nil {
			err = errors.New("no start event")
		}
		stream.Close()
	}
	stop()
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
