package docker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// The helper's frames become events whatever the chunking of the stream.
func TestFrameWriter(t *testing.T) {
	stream := []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 'h', 'i', 2, 0, 0, 0, 1, '!', 3, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xf1}
	for chunk := 1; chunk <= len(stream); chunk++ {
		var got []string
		w := &frameWriter{pid: 9, emit: func(ev compute.ProcessEvent) error {
			got = append(got, fmt.Sprintf("%s:%d:%d:%s", ev.Type, ev.PID, ev.ExitCode, ev.Data))
			return nil
		}}
		for i := 0; i < len(stream); i += chunk {
			if _, err := w.Write(stream[i:min(i+chunk, len(stream))]); err != nil {
				t.Fatal(err)
			}
		}
		if want := []string{"start:9:0:", "stdout:0:0:hi", "stderr:0:0:!", "exit:0:-15:"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("chunks of %d: %q, want %q", chunk, got, want)
		}
	}
	if _, err := (&frameWriter{emit: func(compute.ProcessEvent) error { return nil }}).Write([]byte{7, 0, 0, 0, 0}); err == nil {
		t.Fatal("an unknown frame type was accepted")
	}
}

// A frame header the helper cannot have written (the output file lives in
// the sandbox) ends the stream with an error before anything is held: a
// length over the bound, a start or exit frame of the wrong length.
func TestFrameWriterRefusesForgedFrames(t *testing.T) {
	for name, tc := range map[string]struct {
		header []byte
		want   string
	}{
		"1 GiB":      {[]byte{1, 0x40, 0, 0, 0}, "the sandbox sent a frame of 1073741824 bytes, over the 1048576-byte bound"},
		"4 GiB":      {[]byte{2, 0xff, 0xff, 0xff, 0xff}, "a frame of 4294967295 bytes"},
		"short exit": {[]byte{3, 0, 0, 0, 1}, "an exit frame of 1 bytes"},
		"long start": {[]byte{0, 0, 0, 0, 9}, "a start frame of 9 bytes"},
		"frame type": {[]byte{9, 0, 0, 0, 0}, "unknown frame type 9"},
	} {
		emitted := 0
		w := &frameWriter{emit: func(compute.ProcessEvent) error { emitted++; return nil }}
		_, err := w.Write(tc.header)
		if err == nil || !strings.Contains(err.Error(), tc.want) || compute.KindOf(err) != compute.KindInternal || emitted != 0 {
			t.Errorf("%s: %v (emitted %d), want an internal error saying %q", name, err, emitted, tc.want)
		}
	}
	// At the bound, the frame is read.
	w := &frameWriter{emit: func(ev compute.ProcessEvent) error {
		if len(ev.Data) != compute.MaxFrameBytes {
			t.Errorf("a frame of %d bytes", len(ev.Data))
		}
		return nil
	}}
	frame := append([]byte{1, 0, 0x10, 0, 0}, make([]byte, compute.MaxFrameBytes)...)
	if _, err := w.Write(frame); err != nil {
		t.Fatal(err)
	}
}

// Lines are split whatever the chunking; a line over the bound is an error
// whether it arrives whole or in pieces.
func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{op: "watch", fn: func(l []byte) error { got = append(got, string(l)); return nil }}
	for _, c := range []string{"a", "b\ncd\n", "\ne"} {
		if _, err := w.Write([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[ab cd ]" {
		t.Fatalf("lines %q", got)
	}
	long := make([]byte, compute.MaxLineBytes/2)
	w = &lineWriter{op: "watch", fn: func([]byte) error { return nil }}
	_, err := w.Write(long)
	if err == nil {
		_, err = w.Write(append(long, 'x'))
	}
	if err == nil || !strings.Contains(err.Error(), "a line over the 65536-byte bound") || len(w.buf) > compute.MaxLineBytes {
		t.Fatalf("an endless line: %v, %d bytes held", err, len(w.buf))
	}
	w = &lineWriter{op: "watch", fn: func([]byte) error { return nil }}
	if _, err := w.Write(append(make([]byte, compute.MaxLineBytes+1), '\n')); err == nil {
		t.Fatal("a whole line over the bound was accepted")
	}
}

// A log tail keeps the last max bytes, in at most twice that memory.
func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 10}
	for i := range 100 {
		_, _ = fmt.Fprintf(tb, "%d,", i)
		if cap(tb.buf) > 64 {
			t.Fatalf("the tail holds %d bytes", cap(tb.buf))
		}
	}
	if got := string(tb.Bytes()); got != ",97,98,99," {
		t.Fatalf("tail %q", got)
	}
	_, _ = tb.Write([]byte("0123456789abcdef"))
	if got := string(tb.Bytes()); got != "6789abcdef" {
		t.Fatalf("tail %q", got)
	}
}

// A helper's traceback shows as its exception only.
func TestLastLine(t *testing.T) {
	tb := "Traceback (most recent call last):\n  File \"<string>\", line 230, in output\nValueError: invalid literal for int() with base 10: 'x'"
	if got := lastLine(tb); got != "ValueError: invalid literal for int() with base 10: 'x'" {
		t.Fatalf("%q", got)
	}
	if got := lastLine("no such process"); got != "no such process" {
		t.Fatalf("%q", got)
	}
}
