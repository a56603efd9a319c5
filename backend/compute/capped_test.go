package compute

import (
	"bytes"
	"testing"
)

// The first Max bytes are kept, the rest dropped, and the capacity never
// passes Max whatever the sizes of the writes.
func TestCappedBuffer(t *testing.T) {
	b := &CappedBuffer{Max: 100_000}
	var want []byte
	for i := range 300 {
		p := bytes.Repeat([]byte{byte(i)}, i*7)
		if n, err := b.Write(p); n != len(p) || err != nil {
			t.Fatalf("write: %d %v", n, err)
		}
		want = append(want, p...)
		if cap(b.Bytes()) > b.Max {
			t.Fatalf("capacity %d over the bound %d", cap(b.Bytes()), b.Max)
		}
	}
	if !bytes.Equal(b.Bytes(), want[:b.Max]) || b.Len() != b.Max {
		t.Fatalf("kept %d bytes, not the first %d", b.Len(), b.Max)
	}
	if (&CappedBuffer{Max: 10}).Bytes() != nil {
		t.Fatal("an empty buffer is not nil")
	}
}
