package docker

// Writers that hold a bounded amount of what a sandbox sends (see
// compute's bounds.go for the sizes and why).

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
