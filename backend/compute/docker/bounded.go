package docker

import (
	"bytes"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Writers that hold a bounded amount of what a sandbox sends (see
// compute's bounds.go for the sizes and why).

// answerBuffer holds a helper's answer; one longer than max ends the helper
// with an error instead of growing.
type answerBuffer struct {
	bytes.Buffer
	op  string
	max int
}

func newAnswer(op string) *answerBuffer { return &answerBuffer{op: op, max: compute.MaxAnswerBytes} }

func (b *answerBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, compute.Errorf(compute.KindInternal, b.op, nil,
			"the sandbox's answer is over the %d-byte bound: python3 or the helper's files in the sandbox were tampered with", b.max)
	}
	return b.Buffer.Write(p)
}

// head is the start of b for an error message (never the whole answer).
func head(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// lineWriter calls fn with each line written to it (without its newline).
// A line longer than compute.MaxLineBytes ends the stream with an error:
// the helper writes lines far shorter, so an endless one is not its own.
type lineWriter struct {
	op  string
	buf []byte // the incomplete last line
	fn  func(line []byte) error
}

func (w *lineWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(w.buf)+len(b) > compute.MaxLineBytes {
				return 0, w.tooLong()
			}
			w.buf = append(w.buf, b...)
			break
		}
		line := b[:i]
		if len(w.buf) > 0 {
			line = append(w.buf, line...)
		}
		if len(line) > compute.MaxLineBytes {
			return 0, w.tooLong()
		}
		if err := w.fn(line); err != nil {
			return 0, err
		}
		w.buf, b = w.buf[:0], b[i+1:]
	}
	return n, nil
}

func (w *lineWriter) tooLong() error {
	return compute.Errorf(compute.KindInternal, w.op, nil,
		"the sandbox sent a line over the %d-byte bound without a newline: python3 or the helper in the sandbox was tampered with", compute.MaxLineBytes)
}

// tailBuffer keeps the last max bytes written (a log tail: the sandbox's
// main process decides how long its lines are).
type tailBuffer struct {
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		p = p[len(p)-t.max:]
		t.buf = t.buf[:0]
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max { // keep memory at 2*max: move the tail down now and then
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return n, nil
}

// Bytes returns the last max bytes.
func (t *tailBuffer) Bytes() []byte { return t.buf[max(len(t.buf)-t.max, 0):] }
