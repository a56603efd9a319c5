package agent

import "sync"

// OutputKeepBytes is how much of a process's output the agent keeps for a
// later Connect to replay: the last 1 MiB of stdout and stderr together.
const OutputKeepBytes = 1 << 20

// chunkBytes is the largest data event (envd sends 32 KiB or less).
const chunkBytes = 32 << 10

// chunk is one piece of output; seq numbers every chunk ever written.
type chunk struct {
	seq    uint64
	stderr bool
	data   []byte
}

// outputLog is a process's output: the newest chunks up to OutputKeepBytes
// (older ones are dropped first), the exit once known, and a channel closed
// at every change so followers wake without polling.
type outputLog struct {
	mu      sync.Mutex
	chunks  []chunk
	bytes   int
	next    uint64 // seq of the next chunk
	ended   bool
	changed chan struct{}
}

func newOutputLog() *outputLog { return &outputLog{changed: make(chan struct{})} }

func (l *outputLog) write(stderr bool, data []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.chunks = append(l.chunks, chunk{seq: l.next, stderr: stderr, data: data})
	l.next++
	l.bytes += len(data)
	for l.bytes > OutputKeepBytes && len(l.chunks) > 1 {
		l.bytes -= len(l.chunks[0].data)
		l.chunks[0] = chunk{}
		l.chunks = l.chunks[1:]
	}
	l.wake()
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
