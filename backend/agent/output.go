package agent

import "sync"

// OutputKeepBytes is how much of a process's output the agent keeps for a
// later Connect to replay: the last 1 MiB of stdout and stderr together.
const OutputKeepBytes = 1 << 20

// chunkBytes is the largest data event (envd sends 32 KiB or less).
const chunkBytes = 32 << 10

// stream says which of a process's outputs a chunk came from.
type stream uint8

const (
	stdoutStream stream = iota
	stderrStream
	// ptyStream is a PTY's output: stdout and stderr merged by the
	// terminal, sent as envd does, in the data event's pty field.
	ptyStream
)

// chunk is one piece of output; seq numbers every chunk ever written.
type chunk struct {
	seq    uint64
	stream stream
	data   []byte
}

// outputLog is a process's output: the newest chunks, at least
// OutputKeepBytes of them (older ones are dropped first), the exit once known, and a channel closed
// at every change so followers wake without polling.
//
// While the Start stream that made the process is open (its owner), no
// chunk it has not sent yet is dropped: a write that would drop one waits
// until the owner sent it (or left), so the process's pipe fills and the
// process waits, as with a plain pipe, and a caller that reads its whole
// output (a buffered exec) gets all of it however fast it comes.
type outputLog struct {
	mu        sync.Mutex
	chunks    []chunk
	bytes     int
	next      uint64 // seq of the next chunk
	ended     bool
	changed   chan struct{}
	owned     bool       // the owner is attached
	ownerNext uint64     // the seq of the next chunk the owner sends
	sent      *sync.Cond // signalled when the owner sent a chunk or left
}

// newOutputLog returns a log, owned (see outputLog) until release.
func newOutputLog() *outputLog {
	l := &outputLog{changed: make(chan struct{}), owned: true}
	l.sent = sync.NewCond(&l.mu)
	return l
}

// ack records that the owner sent every chunk before seq.
func (l *outputLog) ack(seq uint64) {
	l.mu.Lock()
	l.ownerNext = seq
	l.mu.Unlock()
	l.sent.Broadcast()
}

// release detaches the owner: from now on the oldest chunks are dropped.
func (l *outputLog) release() {
	l.mu.Lock()
	l.owned = false
	l.mu.Unlock()
	l.sent.Broadcast()
}

func (l *outputLog) write(from stream, data []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.dropsUnsent(len(data)) {
		l.sent.Wait()
	}
	l.chunks = append(l.chunks, chunk{seq: l.next, stream: from, data: data})
	l.next++
	l.bytes += len(data)
	// Keep at least OutputKeepBytes: drop the oldest only while the rest is that much.
	for len(l.chunks) > 1 && l.bytes-len(l.chunks[0].data) >= OutputKeepBytes {
		l.bytes -= len(l.chunks[0].data)
		l.chunks[0] = chunk{}
		l.chunks = l.chunks[1:]
	}
	l.wake()
}

// dropsUnsent says whether keeping n more bytes would drop a chunk the
// owner has not sent yet. Every chunk the trim below would drop is checked,
// not only the oldest: the oldest may be sent while the next is not.
func (l *outputLog) dropsUnsent(n int) bool {
	if !l.owned {
		return false
	}
	bytes := l.bytes + n
	for _, c := range l.chunks {
		if bytes-len(c.data) < OutputKeepBytes {
			return false
		}
		if c.seq >= l.ownerNext {
			return true
		}
		bytes -= len(c.data)
	}
	return false
}

// size is the output kept, in bytes.
func (l *outputLog) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes
}

// discard drops every chunk kept (of an ended process, past
// EndedOutputBytes) and returns how many bytes that freed; later chunks
// keep their seq, so a follower skips what was dropped.
func (l *outputLog) discard() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.bytes
	l.chunks, l.bytes = nil, 0
	return n
}

func (l *outputLog) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	l.wake()
}

func (l *outputLog) wake() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// since returns the kept chunks from seq on (those dropped meanwhile are
// skipped), whether the output is complete, and a channel closed at the
// next change.
func (l *outputLog) since(seq uint64) ([]chunk, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []chunk
	for _, c := range l.chunks {
		if c.seq >= seq {
			out = append(out, c)
		}
	}
	return out, l.ended, l.changed
}
