package reconciler

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func tarOf(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write(bytes.Repeat([]byte("a"), int(h.Size)))
		}
	}
	_ = tw.Close()
	return buf.Bytes()
}

// What a job leaves in its output directory is hostile: names that would
// unpack outside the download's directory, devices and FIFOs are left out,
// modes lose their set-id bits, and contents past the bound are cut with the
// output saying so.
func TestBoundTarKeepsOnlySafeEntries(t *testing.T) {
	src := tarOf(t,
		&tar.Header{Typeflag: tar.TypeReg, Name: "./ok.txt", Size: 3, Mode: 0o4755},
		&tar.Header{Typeflag: tar.TypeReg, Name: "../escape", Size: 1, Mode: 0o644},
		&tar.Header{Typeflag: tar.TypeReg, Name: "/etc/abs", Size: 1, Mode: 0o644},
		&tar.Header{Typeflag: tar.TypeReg, Name: "a/../../up", Size: 1, Mode: 0o644},
		&tar.Header{Typeflag: tar.TypeChar, Name: "./dev", Devmajor: 1, Devminor: 3},
		&tar.Header{Typeflag: tar.TypeFifo, Name: "./fifo"},
		&tar.Header{Typeflag: tar.TypeSymlink, Name: "./link", Linkname: "/etc/shadow"},
		&tar.Header{Typeflag: tar.TypeDir, Name: "./dir/", Mode: 0o755},
	)
	out, err := boundTar(bytes.NewReader(src), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(out.Archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Mode&^0o777 != 0 {
			t.Errorf("%s kept mode %o", h.Name, h.Mode)
		}
		names = append(names, h.Name)
	}
	if got := strings.Join(names, " "); got != "./ok.txt ./link ./dir/" || out.Files != 3 || out.Bytes != 3 || out.Truncated {
		t.Fatalf("kept %q (%d files, %d bytes, truncated %v)", got, out.Files, out.Bytes, out.Truncated)
	}

	big := tarOf(t, &tar.Header{Typeflag: tar.TypeReg, Name: "a", Size: maxOutputBytes - 10, Mode: 0o644},
		&tar.Header{Typeflag: tar.TypeReg, Name: "b", Size: 11, Mode: 0o644})
	out, err = boundTar(bytes.NewReader(big), time.Now())
	if err != nil || out.Files != 1 || !out.Truncated {
		t.Fatalf("past the bound: %d files, truncated %v, %v", out.Files, out.Truncated, err)
	}
}
