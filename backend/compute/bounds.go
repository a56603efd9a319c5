package compute

// Bounds on what the backend holds of the bytes a sandbox produces.
//
// Every byte a sandbox writes is hostile: its processes, its python3, its
// /bin/sh and (on E2B) its envd are all the sandbox's own and may be
// replaced. So no length, count or marker the sandbox sends decides how much
// the backend allocates: each stream read from a sandbox holds at most the
// bound below, and a sandbox that sends more gets the stream ended with an
// error that says so (a provider_error, 502) instead of growing the backend.
// With these, one hostile stream costs the backend a fixed amount of memory
// (the largest, MaxExecOutputBytes, is for the output a caller asked to be
// buffered; every streamed route holds at most about 1 MiB).
const (
	// MaxFrameBytes bounds one frame of a Docker process's output log. The
	// in-sandbox helper writes at most 64 KiB of output per frame; a larger
	// length was written by something else (the log file lives in the
	// sandbox, where any process can rewrite it).
	MaxFrameBytes = 1 << 20

	// MaxAnswerBytes bounds a helper's answer held whole before it is
	// parsed: a started process's pid, the process list (each process's
	// cmd is at most what one request may send).
	MaxAnswerBytes = 4 << 20

	// MaxErrorBytes is what is kept of a helper's stderr for the error
	// message (the rest is dropped).
	MaxErrorBytes = 64 << 10

	// MaxLineBytes bounds one line of a line-oriented stream from the
	// sandbox (a listing entry, a watch event): a path is at most 4096
	// bytes, so a longer line is not one the helper wrote.
	MaxLineBytes = 64 << 10

	// MaxListEntries bounds the entries of one directory listing (all
	// levels of depth together). A larger listing is refused with a
	// message naming the path, so the caller lists a subdirectory or a
	// lower depth, or downloads the directory as an archive.
	MaxListEntries = 10000

	// MaxPendingBytes bounds the stdout a streamed exec holds while it waits
	// for the pid line its /bin/sh writes on stderr. A shell that never
	// writes it (replaced, or not a POSIX sh) gets the stream started with
	// pid 0 once this much output is waiting, and its output flows on.
	MaxPendingBytes = 256 << 10

	// MaxMessageBytes bounds one message of envd's Connect streams on E2B
	// (envd sends output in chunks of 32 KiB or less; a directory listing
	// is one message).
	MaxMessageBytes = 4 << 20

	// MaxExecOutputBytes bounds what a buffered exec keeps of each of
	// stdout and stderr; the rest is dropped (streamed exec keeps nothing,
	// so it is the way to read more). Four buffered execs at once hold at
	// most 32 MiB this way; the answer is encoded as it is sent.
	MaxExecOutputBytes = 4 << 20

	// MaxFileBytes bounds a file read whole into memory (the buffered
	// ReadFile; the /files route streams instead).
	MaxFileBytes = 256 << 20
)
