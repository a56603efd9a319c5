package envd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem"
)

// AbsPath checks that name is absolute and cleans it.
func AbsPath(op, name string) (string, error) {
	if !path.IsAbs(name) {
		return "", compute.Errorf(compute.KindInvalid, op, nil, "path must be absolute, got %q", name)
	}
	return path.Clean(name), nil
}

// fsError maps an envd filesystem answer to the user's terms.
func (c *Client) fsError(ctx context.Context, op string, name string, err error) error {
	msg := connectMessage(err)
	switch connect.CodeOf(err) {
	case connect.CodeNotFound:
		return compute.Errorf(compute.KindNotFound, op, err, "no such file or directory: %s", name)
	case connect.CodeInvalidArgument, connect.CodeAlreadyExists:
		return compute.Errorf(compute.KindInvalid, op, err, "%s: %s", name, msg)
	case connect.CodePermissionDenied:
		return compute.Errorf(compute.KindConflict, op, err, "permission denied: %s", name)
	}
	return c.connectError(ctx, ctx, op, compute.ExecRequest{Cmd: []string{op, name}}, time.Time{}, err, true)
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

func (c *Client) stat(ctx context.Context, name string) (*filesystem.EntryInfo, error) {
	res, err := c.files().Stat(ctx, withAuth(c, connect.NewRequest(&filesystem.StatRequest{Path: name})))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetEntry(), nil
}

// Ping checks that envd answers with the client's token (a Stat of /):
// callers that can send a body only once settle the token with it first.
func (c *Client) Ping(ctx context.Context, op string) error {
	if _, err := c.stat(ctx, "/"); err != nil {
		return c.fsError(ctx, op, "/", err)
	}
	return nil
}

// OpenFile streams a regular file (symlinks followed) from offset, length
// bytes (-1: to the end): Stat for its size, then GET /files (a range is
// skipped to by reading).
func (c *Client) OpenFile(ctx context.Context, name string, offset, length int64) (io.ReadCloser, compute.FileInfo, error) {
	const op = "read file"
	name, err := AbsPath(op, name)
	if err != nil {
		return nil, compute.FileInfo{}, err
	}
	e, err := c.stat(ctx, name)
	if err != nil {
		return nil, compute.FileInfo{}, c.fsError(ctx, op, name, err)
	}
	if e.GetType() == filesystem.FileType_FILE_TYPE_DIRECTORY {
		return nil, compute.FileInfo{}, compute.Errorf(compute.KindInvalid, op, nil, "%s is a directory; list it with /fs", name)
	}
	info := entryInfo(e)
	// The agent serves a range of a regular file itself (one seek, not
	// offset bytes read and dropped); a file whose size says 0 (/proc)
	// or an offset at or past the end is skipped to by reading.
	ranged := c.Agent && offset > 0 && offset < info.Size && e.GetType() == filesystem.FileType_FILE_TYPE_FILE
	res, err := c.filesHTTP(ctx, op, http.MethodGet, name, nil, "", func(req *http.Request) {
		// Asked for nothing, Go's transport asks for gzip, which envd
		// then spends its CPU on: the bytes cross a local network.
		req.Header.Set("Accept-Encoding", "identity")
		if ranged {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
		}
	})
	if err != nil {
		return nil, info, err
	}
	if ranged && res.StatusCode != http.StatusPartialContent {
		ranged = false // the whole file came: skip to offset below
	}
	if offset > 0 && !ranged {
		if _, err := io.CopyN(io.Discard, res.Body, offset); err != nil && !errors.Is(err, io.EOF) {
			res.Body.Close()
			return nil, info, compute.Errorf(compute.KindUnavailable, op, err, "reading %s from %s: %v", name, c.Name, err)
		}
	}
	var r io.Reader = res.Body
	if length >= 0 {
		r = io.LimitReader(res.Body, length)
	}
	return struct {
		io.Reader
		io.Closer
	}{r, res.Body}, info, nil
}

// filesHTTP sends one request to envd's /files route and returns a 200,
// 204 or 206 response (its body is the caller's to close); edit, when
// set, adjusts the request before it goes.
func (c *Client) filesHTTP(ctx context.Context, op, method, name string, body io.Reader, contentType string, edit func(*http.Request)) (*http.Response, error) {
	return c.pathHTTP(ctx, op, method, "/files", name, body, contentType, edit)
}

// pathHTTP is filesHTTP on another route that takes ?path= (the agent's
// /archive).
func (c *Client) pathHTTP(ctx context.Context, op, method, route, name string, body io.Reader, contentType string, edit func(*http.Request)) (*http.Response, error) {
	q := url.Values{"path": {name}}
	if c.User != "" {
		q.Set("username", c.User)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base()+route+"?"+q.Encode(), body)
	if err != nil {
		return nil, compute.Errorf(compute.KindInternal, op, err, "building the envd request: %v", err)
	}
	if c.Token != "" {
		req.Header.Set(TokenHeader, c.Token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if edit != nil {
		edit(req)
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, compute.Errorf(compute.KindTimeout, op, err, "%s of %s was cancelled: %v", op, name, ctx.Err())
		}
		if dial := dialError(err); dial != nil {
			// The dial's own words, not the *url.Error's (method, URL and query).
			return nil, c.unreachable(ctx, op, err, dial)
		}
		return nil, c.diagnose(ctx, op, compute.Errorf(compute.KindUnavailable, op, err, "cannot reach %s in %s: %v", c.daemon(), c.Name, err))
	}
	if res.StatusCode == http.StatusOK || res.StatusCode == http.StatusNoContent || res.StatusCode == http.StatusPartialContent {
		return res, nil
	}
	data, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	res.Body.Close()
	var e struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(data, &e)
	msg := e.Message
	if msg == "" {
		msg = strings.TrimSpace(string(data))
	}
	switch res.StatusCode {
	case http.StatusNotFound:
		return nil, compute.Errorf(compute.KindNotFound, op, nil, "no such file or directory: %s", name)
	case http.StatusBadRequest:
		if strings.HasSuffix(msg, "not a directory") {
			return nil, compute.Errorf(compute.KindInvalid, op, nil, "a parent of %s is not a directory", name)
		}
		return nil, compute.Errorf(compute.KindInvalid, op, nil, "%s: %s", name, msg)
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, compute.Errorf(compute.KindAuth, op, nil, "%s in %s refused the access token: %s", c.daemon(), c.Name, msg)
	case http.StatusInsufficientStorage, http.StatusRequestEntityTooLarge:
		return nil, compute.Errorf(compute.KindResourceLimit, op, nil, "%s has no room for %s: %s", c.Name, name, msg)
	}
	return nil, c.diagnose(ctx, op, compute.Errorf(compute.KindUnavailable, op, nil, "%s in %s answered %d: %s", c.daemon(), c.Name, res.StatusCode, msg))
}

// CreateFile writes r (size bytes; -1 or 0: unknown, sent chunked) to
// name with POST /files (envd makes the parents). To backend/agent the
// content goes as the raw application/octet-stream body, which the agent
// writes as it arrives; to E2B's envd as the multipart "file" part, the
// form every envd version takes. The body is sent once: callers that
// retry on a refused token call Ping first.
func (c *Client) CreateFile(ctx context.Context, name string, r io.Reader, size int64) error {
	const op = "write file"
	name, err := AbsPath(op, name)
	if err != nil {
		return err
	}
	if c.Agent {
		res, err := c.filesHTTP(ctx, op, http.MethodPost, name, io.NopCloser(r), "application/octet-stream", func(req *http.Request) {
			if size > 0 {
				req.ContentLength = size
			}
		})
		if err != nil {
			return err
		}
		res.Body.Close()
		return nil
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
	res, err := c.filesHTTP(ctx, op, http.MethodPost, name, pr, mw.FormDataContentType(), nil)
	pr.CloseWithError(io.ErrClosedPipe) // ends the writer whatever happened
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// PutArchive extracts tar stream r into directory dir with backend/agent's
// PUT /archive (E2B's envd has no such route): beneath dir only, as the
// sandbox's user (backend/agent/archive.go).
func (c *Client) PutArchive(ctx context.Context, dir string, r io.Reader) error {
	const op = "upload archive"
	dir, err := AbsPath(op, dir)
	if err != nil {
		return err
	}
	if !c.Agent {
		return compute.Errorf(compute.KindInvalid, op, nil, "%s has no archive upload; write files one by one", c.daemon())
	}
	res, err := c.pathHTTP(ctx, op, http.MethodPut, "/archive", dir, io.NopCloser(r), "application/x-tar", nil)
	if err != nil {
		return err
	}
	res.Body.Close()
	return nil
}

// Remove deletes a file or a directory with its contents.
func (c *Client) Remove(ctx context.Context, name string) error {
	const op = "remove"
	name, err := AbsPath(op, name)
	if err != nil {
		return err
	}
	if name == "/" {
		return compute.Errorf(compute.KindInvalid, op, nil, "refusing to remove /")
	}
	if _, err := c.files().Remove(ctx, withAuth(c, connect.NewRequest(&filesystem.RemoveRequest{Path: name}))); err != nil {
		return c.fsError(ctx, op, name, err)
	}
	return nil
}

// ListDir lists a directory to depth levels; a file path answers its own
// entry. A listing over compute.MaxListEntries (or one message's bound)
// is refused, naming the path.
func (c *Client) ListDir(ctx context.Context, name string, depth int) ([]compute.FileInfo, error) {
	const op = "list"
	name, err := AbsPath(op, name)
	if err != nil {
		return nil, err
	}
	e, err := c.stat(ctx, name)
	if err != nil {
		return nil, c.fsError(ctx, op, name, err)
	}
	if e.GetType() != filesystem.FileType_FILE_TYPE_DIRECTORY {
		return []compute.FileInfo{entryInfo(e)}, nil
	}
	res, err := c.files().ListDir(ctx, withAuth(c, connect.NewRequest(&filesystem.ListDirRequest{Path: name, Depth: uint32(max(depth, 1))})))
	if connect.CodeOf(err) != connect.CodeResourceExhausted && err != nil {
		return nil, c.fsError(ctx, op, name, err)
	}
	if err != nil || len(res.Msg.GetEntries()) > compute.MaxListEntries {
		return nil, compute.Errorf(compute.KindInvalid, op, err,
			"%s holds more than %d entries (or %d bytes of them) at depth %d, the most one listing returns: list a subdirectory or a lower depth",
			name, compute.MaxListEntries, compute.MaxMessageBytes, max(depth, 1))
	}
	out := make([]compute.FileInfo, 0, len(res.Msg.GetEntries()))
	for _, e := range res.Msg.GetEntries() {
		out = append(out, entryInfo(e))
	}
	return out, nil
}

// MakeDir creates name and its missing parents; an existing directory is
// not an error.
func (c *Client) MakeDir(ctx context.Context, name string) error {
	const op = "mkdir"
	name, err := AbsPath(op, name)
	if err != nil {
		return err
	}
	_, err = c.files().MakeDir(ctx, withAuth(c, connect.NewRequest(&filesystem.MakeDirRequest{Path: name})))
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		if e, serr := c.stat(ctx, name); serr == nil && e.GetType() == filesystem.FileType_FILE_TYPE_DIRECTORY {
			return nil
		}
		return compute.Errorf(compute.KindConflict, op, err, "%s exists and is not a directory", name)
	}
	if err != nil {
		return c.fsError(ctx, op, name, err)
	}
	return nil
}

// Move renames from to to.
func (c *Client) Move(ctx context.Context, from, to string) error {
	const op = "move"
	from, err := AbsPath(op, from)
	if err != nil {
		return err
	}
	if to, err = AbsPath(op, to); err != nil {
		return err
	}
	if _, err := c.files().Move(ctx, withAuth(c, connect.NewRequest(&filesystem.MoveRequest{Source: from, Destination: to}))); err != nil {
		return c.fsError(ctx, op, from, err)
	}
	return nil
}

// WatchDir emits the changes under dir (recursive when the daemon offers
// it) until ctx ends or emit fails. Its start event becomes {"type": "ready"}.
func (c *Client) WatchDir(ctx context.Context, dir string, recursive bool, emit func(compute.FileEvent) error) error {
	const op = "watch"
	dir, err := AbsPath(op, dir)
	if err != nil {
		return err
	}
	stream, err := c.files().WatchDir(ctx, withAuth(c, connect.NewRequest(&filesystem.WatchDirRequest{Path: dir, Recursive: recursive})))
	if err != nil {
		return c.fsError(ctx, op, dir, err)
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
		return c.fsError(ctx, op, dir, err)
	}
	return nil
}
