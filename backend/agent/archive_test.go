package agent

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

type tarEntry struct {
	name, link, body string
	typ              byte
}

func tarOf(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ == tar.TypeDir {
			h.Mode = 0o755
		}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			_, _ = tw.Write([]byte(e.body))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// An archive extracts beneath its target only: a symlink the archive makes
// (or the sandbox planted) that leads out of the target is never written
// through, nor is a name that climbs out. The fuzz of issue 34 wrote
// /etc/evil with `ln -> /etc` then `ln/evil`; here "outside" stands for
// /etc (this test runs on the host). Seen failing without RESOLVE_BENEATH
// (outside/evil was written and the upload answered 204).
func TestArchiveExtractsBeneathItsTargetOnly(t *testing.T) {
	a := startAgent(t)
	root := t.TempDir()
	target, outside := filepath.Join(root, "target"), filepath.Join(root, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(body []byte) (int, string) {
		res := a.do(t, http.MethodPut, "/archive", url.Values{"path": {target}}, "application/x-tar", bytes.NewReader(body))
		msg, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(msg)
	}

	code, msg := put(tarOf(t,
		tarEntry{name: "./a.txt", typ: tar.TypeReg, body: "alpha"},
		tarEntry{name: "./deep/er/b.txt", typ: tar.TypeReg, body: "bravo"},
		tarEntry{name: "./in", typ: tar.TypeSymlink, link: "deep"},
		tarEntry{name: "./in/c.txt", typ: tar.TypeReg, body: "charlie"}, // through a link that stays beneath: fine
		tarEntry{name: "./hard", typ: tar.TypeLink, link: "a.txt"},
	))
	if code != http.StatusNoContent {
		t.Fatalf("a plain archive: %d %s", code, msg)
	}
	for name, want := range map[string]string{"a.txt": "alpha", "deep/er/b.txt": "bravo", "deep/c.txt": "charlie", "hard": "alpha"} {
		if got, err := os.ReadFile(filepath.Join(target, name)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}

	if err := os.Symlink(outside, filepath.Join(target, "planted")); err != nil { // the sandbox's own
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		tar  []byte
	}{
		{"a symlink of the archive out of the target", tarOf(t,
			tarEntry{name: "ln", typ: tar.TypeSymlink, link: outside},
			tarEntry{name: "ln/evil", typ: tar.TypeReg, body: "x"})},
		{"a relative symlink climbing out", tarOf(t,
			tarEntry{name: "up", typ: tar.TypeSymlink, link: "../outside"},
			tarEntry{name: "up/evil", typ: tar.TypeReg, body: "x"})},
		{"a symlink the sandbox planted", tarOf(t, tarEntry{name: "planted/evil", typ: tar.TypeReg, body: "x"})},
		{"a name climbing out", tarOf(t, tarEntry{name: "../outside/evil", typ: tar.TypeReg, body: "x"})},
		{"a hard link to a file outside", tarOf(t, tarEntry{name: "h", typ: tar.TypeLink, link: "../outside/secret"})},
		{"a device", tarOf(t, tarEntry{name: "null", typ: tar.TypeChar})},
	} {
		code, msg := put(c.tar)
		if code != http.StatusBadRequest || !strings.Contains(msg, "entry") {
			t.Errorf("%s: %d %s; want 400 naming the entry", c.what, code, msg)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("the extraction wrote outside its target: %v", entries)
	}

	// A file over a planted symlink replaces the link; it is not written
	// through it.
	if code, msg := put(tarOf(t, tarEntry{name: "planted", typ: tar.TypeReg, body: "mine"})); code != http.StatusNoContent {
		t.Fatalf("a file over a planted symlink: %d %s", code, msg)
	}
	if fi, err := os.Lstat(filepath.Join(target, "planted")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("planted is %v, %v; want the archive's regular file", fi, err)
	}
	if code, _ := put([]byte("not a tar at all, but long enough to be read as a header block ....")); code != http.StatusBadRequest {
		t.Fatalf("a body that is no tar: %d, want 400", code)
	}
}

// The archive is written as the sandbox's user: its files belong to that
// user, and a directory the user may not write refuses it (the kernel's
// check, as for the user's own processes). Seen failing without becomeFS
// (files owned by root, the write into the root-only directory succeeded).
func TestArchiveIsWrittenAsTheSandboxUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (the agent runs as root in the sandbox and writes as the sandbox's user)")
	}
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} { // the user must reach the target
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	u := identity{name: "sandbox", uid: 4242, gid: 4242}
	target := filepath.Join(root, "target")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(target, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(target, "rootonly"), 0o755); err != nil { // root's, inside the target
		t.Fatal(err)
	}
	err := extractAs(u, target, bytes.NewReader(tarOf(t, tarEntry{name: "mine/f.txt", typ: tar.TypeReg, body: "x"})))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(target, "mine", "f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 4242 || st.Gid != 4242 {
		t.Fatalf("the extracted file belongs to %d:%d, want the sandbox user's 4242:4242", st.Uid, st.Gid)
	}
	err = extractAs(u, target, bytes.NewReader(tarOf(t, tarEntry{name: "rootonly/f.txt", typ: tar.TypeReg, body: "x"})))
	if !os.IsPermission(err) {
		t.Fatalf("a write into root's directory as the sandbox user: %v; want permission denied", err)
	}
	if os.Geteuid() != 0 {
		t.Fatal("the test's own thread lost root: the identity leaked out of its thread")
	}
}
