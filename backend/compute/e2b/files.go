package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"path"
	"strings"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/envdpb/filesystem"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/envdpb/filesystem/filesystemconnect"
)

// The filesystem on E2B: envd's /files routes stream file contents, its
// filesystem.Filesystem service does the rest. envd has no archive route,
// so /archive is not offered on E2B.

func (p *Provider) fsClient(sandboxID string) filesystemconnect.FilesystemClient {
	return filesystemconnect.NewFilesystemClient(p.hc, strings.TrimRight(p.cfg.EnvdURL(sandboxID), "/"), envdReadMax)
}

func absE2B(op, name string) (string, error) {
	if !path.IsAbs(name) {
		return "", compute.Errorf(compute.KindInvalid, op, nil, "path must be absolute, got %q", name)
	}
	return path.Clean(name), nil
}

// fsError maps an envd filesystem answer to the user's terms.
func (p *Provider) fsError(ctx context.Context, op string, ref compute.Ref, name string, err error) error {
	msg := connectMessage(err)
	switch connect.CodeOf(err) {
	case connect.CodeNotFound:
		return compute.Errorf(compute.KindNotFound, op, err, "no such file or directory: %s", name)
	case connect.CodeInvalidArgument, connect.CodeAlreadyExists:
		return compute.Errorf(compute.KindInvalid, op, err, "%s: %s", name, msg)
	case connect.CodePermissionDenied:
		return compute.Errorf(compute.KindConflict, op, err, "permission denied: %s", name)
	}
	return p.connectError(ctx, ctx, op, ref, compute.ExecRequest{Cmd: []string{op, name}}, err, true)
}

func entryInfo(e *filesystem.EntryInfo) compute.FileInfo {
	typ := compute.FileTypeFile
	switch e.GetType() {
	case filesystem.FileType_FILE_TYPE_DIRECTORY:
		typ = compute.FileTypeDir
	case filesystem.FileType_FILE_TYPE_SYMLINK:
		typ = compute.FileTypeSymlink
	}
	return compute.FileInfo{Name: e.GetName(), Path: e.GetPath(), Type: typ, Size: e.GetSize(), Mode: e.GetMode() & 0o7777,
		ModifiedAt: e.GetModifiedTime().AsTime().UTC()}
}

func (p *Provider) stat(ctx context.Context, ref compute.Ref, token, name string) (*filesystem.EntryInfo, error) {
	res, err := p.fsClient(ref.ID).Stat(ctx, withAuth(connect.NewRequest(&filesystem.StatRequest{Path: name}), token))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetEntry(), nil
}

// OpenFile implements compute.Files: Stat for the size, then envd's
// GET /files streamed (a range is skipped to by reading).
func (p *Provider) OpenFile(ctx context.Context, ref compute.Ref, name string, offset, length int64) (io.ReadCloser, compute.FileInfo, error) {
	const op = "read file"
	name, err := absE2B(op, name)
	if err != nil {
		return nil, compute.FileInfo{}, err
	}
	var (
		rc   io.ReadCloser
		info compute.FileInfo
	)
	err = p.withToken(ctx, op, ref, func(token string) error {
		e, err := p.stat(ctx, ref, token, name)
		if err != nil {
			return p.fsError(ctx, op, ref, name, err)
		}
		if e.GetType() == filesystem.FileType_FILE_TYPE_DIRECTORY {
			return compute.Errorf(compute.KindInvalid, op, nil, "%s is a directory; list it with /fs", name)
		}
		info = entryInfo(e)
		res, err := p.envdHTTP(ctx, op, ref, token, http.MethodGet, name, nil, "")
		if err != nil {
			return err
		}
		if offset > 0 {
			if _, err := io.CopyN(io.Discard, res.Body, offset); err != nil && !errors.Is(err, io.EOF) {
				res.Body.Close()
				return compute.Errorf(compute.KindUnavailable, op, err, "reading %s from E2B sandbox %s: %v", name, ref.ID, err)
			}
		}
		var r io.Reader = res.Body
		if length >= 0 {
			r = io.LimitReader(res.Body, length)
		}
		rc = struct {
			io.Reader
			io.Closer
		}{r, res.Body}
		return nil
	})
	return rc, info, err
}

// envdHTTP sends one request to envd's /files route and returns a 200
// response (its body is the caller's to close).
func (p *Provider) envdHTTP(ctx context.Context, op string, ref compute.Ref, token, method, name string, body io.Reader, contentType string) (*http.Response, error) {
	u := strings.TrimRight(p.cfg.EnvdURL(ref.ID), "/") + "/files?" + fileQuery(name, p.cfg.User).Encode()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, compute.Errorf(compute.KindInternal, op, err, "building the envd request: %v", err)
	}
	if token != "" {
		req.Header.Set(accessTokenHeader, token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := p.hc.Do(req)
	if err != nil {
		return nil, p.diagnose(ctx, op, ref, compute.Errorf(compute.KindUnavailable, op, err, "cannot reach envd in E2B sandbox %s: %v", ref.ID, err))
	}
	if res.StatusCode == http.StatusOK {
		return res, nil
	}
	data, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	res.Body.Close()
	var e apiError
	_ = json.Unmarshal(data, &e)
	msg := e.Message
	if msg == "" {
		msg = strings.TrimSpace(string(data))
	}
	switch res.StatusCode {
	case http.StatusNotFound:
		return nil, compute.Errorf(compute.KindNotFound, op, nil, "no such file or directory: %s", name)
	case http.StatusBadRequest:
		return nil, compute.Errorf(compute.KindInvalid, op, nil, "%s: %s", name, msg)
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, compute.Errorf(compute.KindAuth, op, nil, "envd in E2B sandbox %s refused the access token: %s", ref.ID, msg)
	case http.StatusInsufficientStorage, http.StatusRequestEntityTooLarge:
		return nil, compute.Errorf(compute.KindResourceLimit, op, nil, "E2B sandbox %s has no room for %s: %s", ref.ID, name, msg)
	}
	return nil, p.diagnose(ctx, op, ref, compute.Errorf(compute.KindUnavailable, op, nil, "envd in E2B sandbox %s answered %d: %s", ref.ID, res.StatusCode, msg))
}

// CreateFile implements compute.Files: envd's POST /files with the content
// streamed as the multipart "file" part (envd makes the parents).
func (p *Provider) CreateFile(ctx context.Context, ref compute.Ref, name string, r io.Reader, size int64) error {
	const op = "write file"
	name, err := absE2B(op, name)
	if err != nil {
		return err
	}
	// The body can be sent once only: settle the token first (a Stat
	// retries with a fresh one after a resume).
	var token string
	err = p.withToken(ctx, op, ref, func(t string) error {
		if _, err := p.stat(ctx, ref, t, "/"); err != nil {
			return p.fsError(ctx, op, ref, "/", err)
		}
		token = t
		return nil
	})
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", path.Base(name))
		if err == nil {
			_, err = io.Copy(part, r)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	res, err := p.envdHTTP(ctx, op, ref, token, http.MethodPost, name, pr, mw.FormDataContentType())
	pr.CloseWithError(io.ErrClosedPipe) // ends the writer whatever happened
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// Remove implements compute.Files.
func (p *Provider) Remove(ctx context.Context, ref compute.Ref, name string) error {
	const op = "remove"
	name, err := absE2B(op, name)
	if err != nil {
		return err
	}
	if name == "/" {
		return compute.Errorf(compute.KindInvalid, op, nil, "refusing to remove /")
	}
	return p.withToken(ctx, op, ref, func(token string) error {
		if _, err := p.fsClient(ref.ID).Remove(ctx, withAuth(connect.NewRequest(&filesystem.RemoveRequest{Path: name}), token)); err != nil {
			return p.fsError(ctx, op, ref, name, err)
		}
		return nil
	})
}

// ListDir implements compute.Files: a file path answers its own entry.
func (p *Provider) ListDir(ctx context.Context, ref compute.Ref, name string, depth int) ([]compute.FileInfo, error) {
	const op = "list"
	name, err := absE2B(op, name)
	if err != nil {
		return nil, err
	}
	var out []compute.FileInfo
	err = p.withToken(ctx, op, ref, func(token string) error {
		e, err := p.stat(ctx, ref, token, name)
		if err != nil {
			return p.fsError(ctx, op, ref, name, err)
		}
		if e.GetType() != filesystem.FileType_FILE_TYPE_DIRECTORY {
			out = []compute.FileInfo{entryInfo(e)}
			return nil
		}
		res, err := p.fsClient(ref.ID).ListDir(ctx, withAuth(connect.NewRequest(&filesystem.ListDirRequest{Path: name, Depth: uint32(max(depth, 1))}), token))
		if connect.CodeOf(err) != connect.CodeResourceExhausted && err != nil {
			return p.fsError(ctx, op, ref, name, err)
		}
		if err != nil || len(res.Msg.GetEntries()) > compute.MaxListEntries {
			return compute.Errorf(compute.KindInvalid, op, err,
				"%s holds more than %d entries (or %d bytes of them) at depth %d, the most one listing returns: list a subdirectory or a lower depth",
				name, compute.MaxListEntries, compute.MaxMessageBytes, max(depth, 1))
		}
		out = make([]compute.FileInfo, 0, len(res.Msg.GetEntries()))
		for _, e := range res.Msg.GetEntries() {
			out = append(out, entryInfo(e))
		}
		return nil
	})
	return out, err
}

// MakeDir implements compute.Files; an existing directory is not an error.
func (p *Provider) MakeDir(ctx context.Context, ref compute.Ref, name string) error {
	const op = "mkdir"
	name, err := absE2B(op, name)
	if err != nil {
		return err
	}
	return p.withToken(ctx, op, ref, func(token string) error {
		_, err := p.fsClient(ref.ID).MakeDir(ctx, withAuth(connect.NewRequest(&filesystem.MakeDirRequest{Path: name}), token))
		if connect.CodeOf(err) == connect.CodeAlreadyExists {
			if e, serr := p.stat(ctx, ref, token, name); serr == nil && e.GetType() == filesystem.FileType_FILE_TYPE_DIRECTORY {
				return nil
			}
			return compute.Errorf(compute.KindConflict, op, err, "%s exists and is not a directory", name)
		}
		if err != nil {
			return p.fsError(ctx, op, ref, name, err)
		}
		return nil
	})
}

// Move implements compute.Files.
func (p *Provider) Move(ctx context.Context, ref compute.Ref, from, to string) error {
	const op = "move"
	from, err := absE2B(op, from)
	if err != nil {
		return err
	}
	if to, err = absE2B(op, to); err != nil {
		return err
	}
	return p.withToken(ctx, op, ref, func(token string) error {
		if _, err := p.fsClient(ref.ID).Move(ctx, withAuth(connect.NewRequest(&filesystem.MoveRequest{Source: from, Destination: to}), token)); err != nil {
			return p.fsError(ctx, op, ref, from, err)
		}
		return nil
	})
}

var errNoArchive = compute.Errorf(compute.KindInvalid, "archive", errors.ErrUnsupported,
	"E2B's envd has no archive route; download files one by one with /files, or run tar with /exec")

// ReadArchive implements compute.Files: not offered on E2B.
func (p *Provider) ReadArchive(context.Context, compute.Ref, string) (io.ReadCloser, error) {
	return nil, errNoArchive
}

// WriteArchive implements compute.Files: not offered on E2B.
func (p *Provider) WriteArchive(context.Context, compute.Ref, string, io.Reader) error {
	return errNoArchive
}

// WatchDir implements compute.Files with envd's WatchDir stream (not
// recursive). Its start event becomes {"type": "ready"}.
func (p *Provider) WatchDir(ctx context.Context, ref compute.Ref, dir string, emit func(compute.FileEvent) error) error {
	const op = "watch"
	dir, err := absE2B(op, dir)
	if err != nil {
		return err
	}
	return p.withToken(ctx, op, ref, func(token string) error {
		stream, err := p.fsClient(ref.ID).WatchDir(ctx, withAuth(connect.NewRequest(&filesystem.WatchDirRequest{Path: dir}), token))
		if err != nil {
			return p.fsError(ctx, op, ref, dir, err)
		}
		defer stream.Close()
		types := map[filesystem.EventType]string{filesystem.EventType_EVENT_TYPE_CREATE: compute.FileCreate,
			filesystem.EventType_EVENT_TYPE_WRITE: compute.FileWrite, filesystem.EventType_EVENT_TYPE_REMOVE: compute.FileRemove,
			filesystem.EventType_EVENT_TYPE_RENAME: compute.FileRename}
		for stream.Receive() {
			var ev compute.FileEvent
			switch e := stream.Msg().GetEvent().(type) {
			case *filesystem.WatchDirResponse_Start:
				ev = compute.FileEvent{Type: "ready"}
			case *filesystem.WatchDirResponse_Filesystem:
				typ, ok := types[e.Filesystem.GetType()]
				if !ok {
					continue
				}
				ev = compute.FileEvent{Type: typ, Path: path.Join(dir, e.Filesystem.GetName())}
			default:
				continue
			}
			if err := emit(ev); err != nil {
				return err
			}
		}
		if err := stream.Err(); err != nil && ctx.Err() == nil {
			return p.fsError(ctx, op, ref, dir, err)
		}
		return nil
	})
}

var _ compute.Files = (*Provider)(nil)
