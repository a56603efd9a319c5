package e2bfake

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem/filesystemconnect"
)

// fsService is envd's filesystem.Filesystem over the fake's in-memory
// files: directories are the explicit ones (MakeDir) and every parent of a
// file. Times are the fake's clock; every file is 0644, every directory 0755.
type fsService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	s *Server
}

// watcher receives the changes under one directory (not recursive).
type watcher struct {
	sandboxID, dir string
	events         chan *filesystem.FilesystemEvent
}

// changed tells the watchers of p's directory; s.mu is held.
func (s *Server) changed(id, p string, typ filesystem.EventType) {
	for w := range s.watchers {
		if w.sandboxID == id && path.Dir(p) == w.dir {
			select {
			case w.events <- &filesystem.FilesystemEvent{Name: path.Base(p), Type: typ}:
			default: // a slow watcher loses events, as envd's would
			}
		}
	}
}

func (f *fsService) sandbox(ctx context.Context, h interface{ Get(string) string }) (*sandbox, string, error) {
	id, _ := ctx.Value(ctxKey{}).(string)
	if !f.s.tokenOK(id, h.Get("X-Access-Token")) {
		return nil, "", connect.NewError(connect.CodeUnauthenticated, errors.New("unauthorized access, please provide a valid access token or method signing if supported"))
	}
	f.s.mu.Lock()
	sb := f.s.sandboxes[id]
	if sb.dirs == nil {
		sb.dirs = map[string]bool{}
	}
	return sb, id, nil // the caller unlocks
}

func isDir(sb *sandbox, p string) bool {
	return p == "/" || sb.dirs[p] || hasChildren(sb.Files, p)
}

func (f *fsService) entry(sb *sandbox, p string) *filesystem.EntryInfo {
	e := &filesystem.EntryInfo{Name: path.Base(p), Path: p, Owner: "user", Group: "user", ModifiedTime: timestamppb.New(f.s.now())}
	if data, ok := sb.Files[p]; ok {
		e.Type, e.Size, e.Mode, e.Permissions = filesystem.FileType_FILE_TYPE_FILE, int64(len(data)), 0o644, "-rw-r--r--"
		return e
	}
	if isDir(sb, p) {
		e.Type, e.Mode, e.Permissions = filesystem.FileType_FILE_TYPE_DIRECTORY, 0o20000000755, "drwxr-xr-x"
		return e
	}
	return nil
}

func notFound(p string) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("path %s does not exist", p))
}

func (f *fsService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	sb, _, err := f.sandbox(ctx, req.Header())
	if err != nil {
		return nil, err
	}
	defer f.s.mu.Unlock()
	p := resolve(req.Msg.GetPath(), "", "")
	e := f.entry(sb, p)
	if e == nil {
		return nil, notFound(p)
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: e}), nil
}

func (f *fsService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	sb, _, err := f.sandbox(ctx, req.Header())
	if err != nil {
		return nil, err
	}
	defer f.s.mu.Unlock()
	dir := resolve(req.Msg.GetPath(), "", "")
	if !isDir(sb, dir) {
		if _, ok := sb.Files[dir]; ok {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s is not a directory", dir))
		}
		return nil, notFound(dir)
	}
	depth := int(max(req.Msg.GetDepth(), 1))
	seen := map[string]bool{}
	add := func(p string) {
		for q := p; q != dir && q != "/"; q = path.Dir(q) {
			rel := strings.TrimPrefix(q, strings.TrimSuffix(dir, "/")+"/")
			if strings.Count(rel, "/") < depth {
				seen[q] = true
			}
		}
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for p := range sb.Files {
		if strings.HasPrefix(p, prefix) {
			add(p)
		}
	}
	for p := range sb.dirs {
		if strings.HasPrefix(p, prefix) {
			add(p)
		}
	}
	out := &filesystem.ListDirResponse{}
	for _, p := range sortedKeys(seen) {
		out.Entries = append(out.Entries, f.entry(sb, p))
	}
	return connect.NewResponse(out), nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (f *fsService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	sb, id, err := f.sandbox(ctx, req.Header())
	if err != nil {
		return nil, err
	}
	defer f.s.mu.Unlock()
	p := resolve(req.Msg.GetPath(), "", "")
	if isDir(sb, p) {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory %s already exists", p))
	}
	for q := p; q != "/"; q = path.Dir(q) {
		if _, ok := sb.Files[q]; ok {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s is a file", q))
		}
	}
	sb.dirs[p] = true
	f.s.changed(id, p, filesystem.EventType_EVENT_TYPE_CREATE)
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: f.entry(sb, p)}), nil
}

// under lists the files and directories at or below p.
func under(sb *sandbox, p string) (files, dirs []string) {
	prefix := strings.TrimSuffix(p, "/") + "/"
	for k := range sb.Files {
		if k == p || strings.HasPrefix(k, prefix) {
			files = append(files, k)
		}
	}
	for k := range sb.dirs {
		if k == p || strings.HasPrefix(k, prefix) {
			dirs = append(dirs, k)
		}
	}
	return files, dirs
}

func (f *fsService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	sb, id, err := f.sandbox(ctx, req.Header())
	if err != nil {
		return nil, err
	}
	defer f.s.mu.Unlock()
	src, dst := resolve(req.Msg.GetSource(), "", ""), resolve(req.Msg.GetDestination(), "", "")
	files, dirs := under(sb, src)
	if len(files) == 0 && len(dirs) == 0 && !isDir(sb, src) {
		return nil, notFound(src)
	}
	for _, k := range files {
		sb.Files[dst+strings.TrimPrefix(k, src)] = sb.Files[k]
		delete(sb.Files, k)
	}
	for _, k := range dirs {
		sb.dirs[dst+strings.TrimPrefix(k, src)] = true
		delete(sb.dirs, k)
	}
	f.s.changed(id, src, filesystem.EventType_EVENT_TYPE_RENAME)
	f.s.changed(id, dst, filesystem.EventType_EVENT_TYPE_CREATE)
	return connect.NewResponse(&filesystem.MoveResponse{Entry: f.entry(sb, dst)}), nil
}

func (f *fsService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	sb, id, err := f.sandbox(ctx, req.Header())
	if err != nil {
		return nil, err
	}
	defer f.s.mu.Unlock()
	p := resolve(req.Msg.GetPath(), "", "")
	files, dirs := under(sb, p)
	if len(files) == 0 && len(dirs) == 0 {
		return nil, notFound(p)
	}
	for _, k := range files {
		delete(sb.Files, k)
	}
	for _, k := range dirs {
		delete(sb.dirs, k)
	}
	f.s.changed(id, p, filesystem.EventType_EVENT_TYPE_REMOVE)
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

func (f *fsService) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	sb, id, err := f.sandbox(ctx, req.Header())
	if err != nil {
		return err
	}
	dir := resolve(req.Msg.GetPath(), "", "")
	if !isDir(sb, dir) {
		f.s.mu.Unlock()
		return notFound(dir)
	}
	w := &watcher{sandboxID: id, dir: dir, events: make(chan *filesystem.FilesystemEvent, 256)}
	if f.s.watchers == nil {
		f.s.watchers = map[*watcher]bool{}
	}
	f.s.watchers[w] = true
	f.s.mu.Unlock()
	defer func() {
		f.s.mu.Lock()
		delete(f.s.watchers, w)
		f.s.mu.Unlock()
	}()
	if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	for {
		select {
		case ev := <-w.events:
			if err := stream.Send(&filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: ev}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}
