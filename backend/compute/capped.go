package compute

// CappedBuffer keeps the first Max bytes written to it and drops the rest
// (writes never fail). Its memory grows with what it holds and never past
// Max, so a bound on the bytes is a bound on the allocation too (a doubling
// buffer could reserve twice the bound).
type CappedBuffer struct {
	Max     int
	buf     []byte
	dropped bool
}

func (b *CappedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	p = p[:min(len(p), max(b.Max-len(b.buf), 0))]
	b.dropped = b.dropped || len(p) < n
	if len(p) == 0 {
		return n, nil
	}
	if need := len(b.buf) + len(p); need > cap(b.buf) {
		grown := make([]byte, len(b.buf), min(max(2*cap(b.buf), need, 512), b.Max))
		copy(grown, b.buf)
		b.buf = grown
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

// Bytes returns what was kept (nil when nothing was).
func (b *CappedBuffer) Bytes() []byte { return b.buf }

// Truncated reports whether bytes were dropped past Max.
func (b *CappedBuffer) Truncated() bool { return b.dropped }

// Len is the number of bytes kept.
func (b *CappedBuffer) Len() int { return len(b.buf) }

func (b *CappedBuffer) String() string { return string(b.buf) }
