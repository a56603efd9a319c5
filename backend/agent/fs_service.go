package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem"
)

// MaxListEntries bounds one ListDir answer (all levels together): it is one
// message, so a directory of a million files would be one allocation.
const MaxListEntries = 10000

// maxPathBytes is Linux's PATH_MAX: a longer path cannot name a file.
const maxPathBytes = 4096

// Filesystem implements filesystemconnect.FilesystemHandler.
type Filesystem struct{ watchers *watchers }

func newFilesystem() *Filesystem { return &Filesystem{watchers: newWatchers()} }

func (f *Filesystem) close() { f.watchers.closeAll() }

// path resolves a request path (relative paths start at the user's home)
// and refuses one no file can have.
func requestPath(h interface{ Get(string) string }, p, field string) (string, error) {
	if len(p) > maxPathBytes {
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s is %d bytes long, over the %d-byte limit of a path", field, len(p), maxPathBytes))
	}
	for i := 0; i < len(p); i++ {
		if p[i] == 0 {
			return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s contains a NUL byte", field))
		}
	}
	p = filepath.Clean(lookupUser(basicUser(h)).resolve(p))
	if msg := agentOwn(p); msg != "" {
		return "", connect.NewError(connect.CodeInvalidArgument, errors.New(msg))
	}
	return p, nil
}

// agentOwn refuses the agent's own /proc entry (/proc/self,
// /proc/thread-self, /proc/<the agent's pid>): asked by a client, it reads
// the agent (its environment, its descriptors), never the caller's
// process, which is what the caller meant.
func agentOwn(p string) string {
	for _, own := range []string{"/proc/self", "/proc/thread-self", "/proc/" + strconv.Itoa(os.Getpid())} {
		if p == own || strings.HasPrefix(p, own+"/") {
			return fmt.Sprintf("path %s names the sandbox agent's own /proc entry, not a process of yours: use /proc/<pid>/... with a pid from GET /processes", p)
		}
	}
	return ""
}

// fsError maps an OS error to a Connect code naming the path.
func fsError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("path %s does not exist", path))
	case errors.Is(err, fs.ErrExist):
		return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("path %s already exists", path))
	case errors.Is(err, syscall.ENOTDIR):
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("a parent of %s is not a directory", path))
	case errors.Is(err, syscall.ELOOP):
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s has too many levels of symbolic links", path))
	case errors.Is(err, fs.ErrPermission):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("permission denied on %s", path))
	case errors.Is(err, syscall.ENAMETOOLONG):
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s has a name too long", path))
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EXDEV), errors.Is(err, syscall.EINVAL):
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%s: %v", path, errors.Unwrap(err)))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("%s %s: %v", pe.Op, path, pe.Err))
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("%s: %v", path, err))
}

func (f *Filesystem) Stat(_ context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	p, err := requestPath(req.Header(), req.Msg.GetPath(), "path")
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, fsError(p, err)
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: entryInfo(p, fi)}), nil
}

// MakeDir makes the directory and its parents; one that exists already is
// AlreadyExists, as in envd.
func (f *Filesystem) MakeDir(_ context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	p, err := requestPath(req.Header(), req.Msg.GetPath(), "path")
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(p); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory %s already exists", p))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s exists and is not a directory", p))
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return nil, fsError(p, err)
	}
	u := requestUser(req.Header())
	chownNew(p, u)
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, fsError(p, err)
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: entryInfo(p, fi)}), nil
}

// Move renames source to destination, making the destination's parents.
func (f *Filesystem) Move(_ context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	src, err := requestPath(req.Header(), req.Msg.GetSource(), "source")
	if err != nil {
		return nil, err
	}
	dst, err := requestPath(req.Header(), req.Msg.GetDestination(), "destination")
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(src); err != nil {
		return nil, fsError(src, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, fsError(filepath.Dir(dst), err)
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, fsError(dst, err)
	}
	fi, err := os.Lstat(dst)
	if err != nil {
		return nil, fsError(dst, err)
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: entryInfo(dst, fi)}), nil
}

// ListDir lists depth levels below path (default 1), symlinks not followed.
func (f *Filesystem) ListDir(_ context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	p, err := requestPath(req.Header(), req.Msg.GetPath(), "path")
	if err != nil {
		return nil, err
	}
	depth := int(req.Msg.GetDepth())
	if depth == 0 {
		depth = 1
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fsError(p, err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s is not a directory", p))
	}
	out := &filesystem.ListDirResponse{}
	if err := list(p, depth, &out.Entries); err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

func list(dir string, depth int, out *[]*filesystem.EntryInfo) error {
	f, err := os.Open(dir)
	if err != nil {
		return fsError(dir, err)
	}
	defer f.Close()
	for {
		des, err := f.ReadDir(256)
		for _, de := range des {
			if len(*out) >= MaxListEntries {
				return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
					"%s holds more than %d entries at this depth; list a subdirectory or a lower depth", dir, MaxListEntries))
			}
			full := filepath.Join(dir, de.Name())
			fi, err := de.Info()
			if err != nil {
				continue // removed meanwhile
			}
			*out = append(*out, entryInfo(full, fi))
			if depth > 1 && fi.IsDir() {
				if err := list(full, depth-1, out); err != nil && connect.CodeOf(err) == connect.CodeResourceExhausted {
					return err
				}
			}
		}
		if err != nil {
			return nil
		}
	}
}

// Remove removes a file or a directory with its contents.
func (f *Filesystem) Remove(_ context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	p, err := requestPath(req.Header(), req.Msg.GetPath(), "path")
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, fsError(p, err)
	}
	if fi.Mode()&os.ModeDevice != 0 {
		// Removing /dev/null or /dev/zero breaks every program in the
		// sandbox that uses it; no client means that.
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s is a device; the files API does not remove devices", p))
	}
	if p == "/" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("refusing to remove /"))
	}
	if err := os.RemoveAll(p); err != nil {
		return nil, fsError(p, err)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

// chownNew gives what the agent made to the requesting user.
func chownNew(p string, u identity) {
	if u.credential() != nil {
		_ = os.Lchown(p, int(u.uid), int(u.gid))
	}
}
