package compute

// Bounds on what the backend holds of the bytes a sandbox produces.
//
// Every byte a sandbox writes is hostile: its processes, its /bin/sh, its
// agent's answers (on Docker; the agent sits on a read-only volume, but
// the sandbox's root may still talk in its place) and (on E2B) its envd
// are all the sandbox's own and may be replaced. So no length, count or marker the sandbox sends decides how much
// the backend allocates: each stream read from a sandbox holds at most the
// bound below, and a sandbox that sends more gets the stream ended with an
// error that says so (a provider_error, 502) instead of growing the backend.
// With these, one hostile stream costs the backend a fixed amount of memory
// (the largest, MaxExecOutputBytes, is for the output a caller asked to be
// buffered; every streamed route holds at most about 1 MiB).
const (
	// MaxListEntries bounds the entries of one directory listing (all
	// levels of depth together). A larger listing is refused with a
	// message naming the path, so the caller lists a subdirectory or a
	// lower depth, or downloads the directory as an archive.
	MaxListEntries = 10000

	// MaxMessageBytes bounds one message of envd's Connect streams (E2B's
	// envd, the agent in Docker sandboxes and task services; both send output in chunks of 32
	// KiB or less; a directory listing is one message).
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
