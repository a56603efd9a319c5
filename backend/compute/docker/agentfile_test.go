package docker

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The agent's binary is hashed at load and streamed from its file when a
// volume is filled (not held in memory): the bytes written are the file's,
// and a file changed on disk since is refused rather than written under the
// old hash's volume name.
func TestAgentBinaryIsStreamedAndChecked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dn-agent")
	data := append([]byte("\x7fELF"), bytes.Repeat([]byte("agent"), 300000)...)
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := loadAgent(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := a.writeAgent(tw, "dn-agent", time.Now()); err != nil {
		t.Fatal(err)
	}
	_ = tw.Close()
	tr := tar.NewReader(&buf)
	if h, err := tr.Next(); err != nil || h.Size != int64(len(data)) {
		t.Fatalf("tar entry: %+v %v", h, err)
	}
	if got, _ := io.ReadAll(tr); !bytes.Equal(got, data) {
		t.Fatalf("the volume would get %d bytes, not the file's %d", len(got), len(data))
	}
	data[len(data)-1] ^= 1
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	err = a.writeAgent(tar.NewWriter(io.Discard), "dn-agent", time.Now())
	if err == nil || !strings.Contains(err.Error(), "changed on disk") {
		t.Fatalf("a binary changed on disk: %v, want an error saying so", err)
	}
	if _, err := loadAgent(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing binary loaded")
	}
}
