package docker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// The daemon's messages lose the engine host's paths into a container's
// filesystem, whatever the storage driver, and keep the path inside it.
func TestDaemonMessageHidesHostPaths(t *testing.T) {
	id := "56d00c92e3eeb43a6ad1bab30a70801512135ab158a9ba0c3b731dc7d4cf1179"
	for in, want := range map[string]string{
		"Error response from daemon: lstat /var/lib/docker/fuse-overlayfs/" + id + "/merged/etc/hostname/x: not a directory": "lstat /etc/hostname/x: not a directory",
		"open /srv/docker/overlay2/" + id + "-init/diff/etc/x: permission denied":                                            "open /etc/x: permission denied",
		"lstat /var/lib/docker/vfs/dir/" + id + "/tmp/a: no such file":                                                       "lstat /tmp/a: no such file",
		"Could not find the file /nonexist in container dn-abc":                                                              "Could not find the file /nonexist in container dn-abc",
	} {
		if got := daemonMessage(errors.New(in)); got != want {
			t.Errorf("%q\n  became %q\n  want   %q", in, got, want)
		}
	}
}

// A path under a file is a 400-kind error naming the path, never the
// daemon's sentence with the host's path in it.
func TestPathUnderAFile(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	inst := mustCreate(t, p, testSpec())
	ctx := context.Background()
	_, _, err := p.OpenFile(ctx, inst.Ref, "/etc/hostname/x", 0, -1)
	wantKind(t, err, compute.KindInvalid)
	err2 := p.CreateFile(ctx, inst.Ref, "/etc/hostname/x", strings.NewReader("hi"), 2)
	wantKind(t, err2, compute.KindInvalid)
	for _, e := range []error{err, err2} {
		if msg := e.Error(); !strings.Contains(msg, "a parent of /etc/hostname/x is not a directory") || strings.Contains(msg, "/var/lib") {
			t.Errorf("message %q", msg)
		}
	}
}
