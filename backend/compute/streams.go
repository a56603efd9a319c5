package compute

import (
	"context"
	"io"
	"time"
)

// Event types of a process's output stream (API.md §6).
const (
	EventStart  = "start"
	EventStdout = "stdout"
	EventStderr = "stderr"
	EventExit   = "exit"
)

// ProcessEvent is one event of a process's output stream, in order: start,
// stdout/stderr chunks, exit.
type ProcessEvent struct {
	Type     string
	PID      int
	Data     []byte // stdout / stderr only
	ExitCode int    // exit only
}

// Emit receives the events of a stream. An error ends the stream (and, for
// a foreground command, kills it).
type Emit func(ProcessEvent) error

// ProcessRequest starts a background process.
type ProcessRequest struct {
	Cmd   []string
	Env   map[string]string
	Cwd   string
	Tag   string
	Stdin bool // keep stdin open for WriteStdin; otherwise it reads /dev/null
}

// Process describes a background process.
type Process struct {
	PID       int       `json:"pid"`
	Tag       string    `json:"tag"`
	Cmd       []string  `json:"cmd"`
	Running   bool      `json:"running"`
	ExitCode  *int      `json:"exitCode"`
	StartedAt time.Time `json:"startedAt"`
}

// Processes is implemented by providers that stream commands and run
// background processes. A process's output is kept where any backend can read
// it again (inside the sandbox), at least its last MiB.
type Processes interface {
	// ExecStream runs req in the foreground and emits its events as they
	// happen. stdin (nil for none) is copied to the command, then closed. The
	// command is killed when ctx ends, req.Timeout passes (KindTimeout) or
	// emit fails.
	ExecStream(ctx context.Context, ref Ref, req ExecRequest, stdin io.Reader, emit Emit) error
	// StartProcess starts a process that outlives the call.
	StartProcess(ctx context.Context, ref Ref, req ProcessRequest) (Process, error)
	ListProcesses(ctx context.Context, ref Ref) ([]Process, error)
	// ProcessOutput emits what the process printed so far and, with follow,
	// what it prints until it exits; the exit event ends a finished stream.
	// An unknown pid is KindNotFound.
	ProcessOutput(ctx context.Context, ref Ref, pid int, follow bool, emit Emit) error
	// WriteStdin copies data to the process's stdin and closes it with eof.
	// A process without open stdin is KindConflict.
	WriteStdin(ctx context.Context, ref Ref, pid int, data io.Reader, eof bool) error
	// SignalProcess sends sig ("SIGTERM", "SIGKILL", "SIGINT", "SIGHUP") to
	// the process and its process group.
	SignalProcess(ctx context.Context, ref Ref, pid int, sig string) error
}

// File types of FileInfo.
const (
	FileTypeFile    = "file"
	FileTypeDir     = "dir"
	FileTypeSymlink = "symlink"
)

// FileInfo is one entry of a listing.
type FileInfo struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"`
	Type       string    `json:"type"`
	Size       int64     `json:"size"`
	Mode       uint32    `json:"mode"` // permission bits, e.g. 420 (0644)
	ModifiedAt time.Time `json:"modifiedAt"`
}

// File event types of WatchDir.
const (
	FileCreate = "create"
	FileWrite  = "write"
	FileRemove = "remove"
	FileRename = "rename"
)

// FileEvent is one change under a watched directory.
type FileEvent struct {
	Type string `json:"type"`
	Path string `json:"path"`
}

// Files is implemented by providers with a streaming filesystem API. Paths
// are absolute; a missing path is KindNotFound, a relative one KindInvalid.
type Files interface {
	// OpenFile streams a regular file (symlinks followed) from offset,
	// length bytes (-1: to the end). info describes the whole file.
	OpenFile(ctx context.Context, ref Ref, path string, offset, length int64) (rc io.ReadCloser, info FileInfo, err error)
	// CreateFile writes r to path (size bytes, -1 when unknown), replacing a
	// file and creating missing parent directories.
	CreateFile(ctx context.Context, ref Ref, path string, r io.Reader, size int64) error
	// Remove deletes a file or a directory with its contents.
	Remove(ctx context.Context, ref Ref, path string) error
	// ListDir lists a directory to depth levels (1: its entries); a file
	// path lists the file itself.
	ListDir(ctx context.Context, ref Ref, path string, depth int) ([]FileInfo, error)
	// MakeDir creates path and its missing parents; an existing directory is
	// not an error.
	MakeDir(ctx context.Context, ref Ref, path string) error
	Move(ctx context.Context, ref Ref, from, to string) error
	// ReadArchive streams the contents of a directory as a tar (entry names
	// relative to it).
	ReadArchive(ctx context.Context, ref Ref, dir string) (io.ReadCloser, error)
	// WriteArchive extracts a tar stream into dir, creating it.
	WriteArchive(ctx context.Context, ref Ref, dir string, r io.Reader) error
	// WatchDir emits the changes of a directory's entries until ctx ends or
	// emit fails.
	WatchDir(ctx context.Context, ref Ref, dir string, emit func(FileEvent) error) error
}
