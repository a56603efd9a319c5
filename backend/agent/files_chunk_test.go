package agent

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// countWrites records the size of each write.
type countWrites struct {
	sizes []int
	buf   bytes.Buffer
}

func (c *countWrites) Write(b []byte) (int, error) {
	c.sizes = append(c.sizes, len(b))
	return c.buf.Write(b)
}

// trickle yields at most 4 KiB per Read (a multipart part's pace), then
// its end: err after n bytes.
type trickle struct {
	n   int
	err error
}

func (t *trickle) Read(b []byte) (int, error) {
	if t.n == 0 {
		return 0, t.err
	}
	k := min(len(b), t.n, 4096)
	for i := range b[:k] {
		b[i] = byte(t.n - i)
	}
	t.n -= k
	return k, nil
}

// An upload read 4 KiB at a time is written in writeChunk writes (the
// last shorter), every byte kept.
func TestFileUploadWritesInChunks(t *testing.T) {
	var w countWrites
	n, err := copyInChunks(&w, &trickle{n: 2*writeChunk + 123, err: io.EOF})
	if err != nil || n != 2*writeChunk+123 || w.buf.Len() != int(n) {
		t.Fatalf("copied %d (%d kept), err %v", n, w.buf.Len(), err)
	}
	if want := []int{writeChunk, writeChunk, 123}; len(w.sizes) != 3 || w.sizes[0] != want[0] || w.sizes[1] != want[1] || w.sizes[2] != want[2] {
		t.Errorf("writes of %v, want %v", w.sizes, want)
	}
}

// A body cut short ends in io.ErrUnexpectedEOF: that is the copy's error,
// not a clean end (so the upload is dropped, not renamed into place).
func TestFileUploadCutShortIsAnError(t *testing.T) {
	for _, cut := range []error{io.ErrUnexpectedEOF, errors.New("connection reset")} {
		var w countWrites
		n, err := copyInChunks(&w, &trickle{n: writeChunk / 2, err: cut})
		if !errors.Is(err, cut) {
			t.Errorf("cut by %v: copy ended with %v after %d bytes", cut, err, n)
		}
	}
}
