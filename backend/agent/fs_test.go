package agent

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem"
)

func TestFilesystemStatMakeMoveListRemove(t *testing.T) {
	a := startAgent(t)
	ctx := testCtx(t)
	dir := t.TempDir()

	mk, err := a.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: dir + "/a/b"}))
	if err != nil {
		t.Fatal(err)
	}
	if e := mk.Msg.GetEntry(); e.GetType() != filesystem.FileType_FILE_TYPE_DIRECTORY || e.GetPath() != dir+"/a/b" || e.GetName() != "b" {
		t.Fatalf("made %v", e)
	}
	if _, err := a.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: dir + "/a/b"})); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Errorf("second mkdir: %v", err)
	}
	if err := os.WriteFile(dir+"/a/b/f.txt", []byte("hello"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f.txt", dir+"/a/b/link"); err != nil {
		t.Fatal(err)
	}
	st, err := a.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: dir + "/a/b/f.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	if e := st.Msg.GetEntry(); e.GetSize() != 5 || e.GetMode() != 0o640 || e.GetType() != filesystem.FileType_FILE_TYPE_FILE ||
		e.GetPermissions() != "-rw-r-----" || e.GetOwner() == "" || time.Since(e.GetModifiedTime().AsTime()) > time.Minute {
		t.Fatalf("stat %v", e)
	}
	ln, err := a.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: dir + "/a/b/link"}))
	if err != nil || ln.Msg.GetEntry().GetType() != filesystem.FileType_FILE_TYPE_SYMLINK || ln.Msg.GetEntry().GetSymlinkTarget() != "f.txt" {
		t.Fatalf("stat of a symlink: %v %v", ln, err)
	}

	mv, err := a.fs.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: dir + "/a/b/f.txt", Destination: dir + "/c/g.txt"}))
	if err != nil || mv.Msg.GetEntry().GetPath() != dir+"/c/g.txt" {
		t.Fatalf("move: %v %v", mv, err)
	}
	if _, err := os.Stat(dir + "/a/b/f.txt"); !os.IsNotExist(err) {
		t.Errorf("source still there: %v", err)
	}

	names := func(depth uint32) []string {
		l, err := a.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: dir, Depth: depth}))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range l.Msg.GetEntries() {
			out = append(out, strings.TrimPrefix(e.GetPath(), dir+"/"))
		}
		slices.Sort(out)
		return out
	}
	if got := names(1); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("depth 1: %v", got)
	}
	if got := names(3); !slices.Equal(got, []string{"a", "a/b", "a/b/link", "c", "c/g.txt"}) {
		t.Errorf("depth 3: %v", got)
	}

	if _, err := a.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: dir + "/a"})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/a"); !os.IsNotExist(err) {
		t.Errorf("removed dir still there: %v", err)
	}

	// Client errors name the path and carry a client code.
	for name, c := range map[string]struct {
		call func() error
		code connect.Code
	}{
		"stat missing": {func() error {
			_, err := a.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: dir + "/nope"}))
			return err
		}, connect.CodeNotFound},
		"remove missing": {func() error {
			_, err := a.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: dir + "/nope"}))
			return err
		}, connect.CodeNotFound},
		"list a file": {func() error {
			_, err := a.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: dir + "/c/g.txt"}))
			return err
		}, connect.CodeInvalidArgument},
		"parent is a file": {func() error {
			_, err := a.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: dir + "/c/g.txt/x"}))
			return err
		}, connect.CodeInvalidArgument},
		"remove a device": {func() error {
			_, err := a.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "/dev/null"}))
			return err
		}, connect.CodeInvalidArgument},
		"the agent's own /proc": {func() error {
			_, err := a.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/proc/self/environ"}))
			return err
		}, connect.CodeInvalidArgument},
		"path too long": {func() error {
			_, err := a.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/" + strings.Repeat("x", 5000)}))
			return err
		}, connect.CodeInvalidArgument},
	} {
		err := c.call()
		if connect.CodeOf(err) != c.code {
			t.Errorf("%s: want %s, got %v", name, c.code, err)
		}
		if c.code != connect.CodeInvalidArgument || name != "path too long" {
			want := map[string]string{"remove a device": "/dev/null", "the agent's own /proc": "/proc/self/environ"}[name]
			if want == "" {
				want = dir
			}
			if err != nil && !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error does not name the path: %v", name, err)
			}
		}
	}
}

func TestListDirIsBounded(t *testing.T) {
	a := startAgent(t)
	dir := t.TempDir()
	for i := 0; i <= MaxListEntries; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.fs.ListDir(testCtx(t), connect.NewRequest(&filesystem.ListDirRequest{Path: dir}))
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), dir) {
		t.Fatalf("listing %d entries: %v", MaxListEntries+1, err)
	}
}

func TestWatchDirRecursive(t *testing.T) {
	a := startAgent(t)
	dir := t.TempDir()
	st, err := a.fs.WatchDir(testCtx(t), connect.NewRequest(&filesystem.WatchDirRequest{Path: dir, Recursive: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() || st.Msg().GetStart() == nil {
		t.Fatalf("no start event: %v", st.Err())
	}
	// The watch is in place once start arrived.
	if err := os.MkdirAll(dir+"/sub/deeper", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/sub/deeper/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for !seen["create sub/deeper/f"] && st.Receive() {
		if ev := st.Msg().GetFilesystem(); ev != nil {
			seen[strings.ToLower(strings.TrimPrefix(ev.GetType().String(), "EVENT_TYPE_"))+" "+ev.GetName()] = true
		}
	}
	for _, want := range []string{"create sub", "create sub/deeper", "create sub/deeper/f"} {
		if !seen[want] {
			t.Errorf("no %q in %v (%v)", want, seen, st.Err())
		}
	}

	// The polling variant: CreateWatcher, GetWatcherEvents, RemoveWatcher.
	ctx := testCtx(t)
	cw, err := a.fs.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: dir, Recursive: true}))
	if err != nil {
		t.Fatal(err)
	}
	id := cw.Msg.GetWatcherId()
	if err := os.WriteFile(dir+"/sub/deeper/g", []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		evs, err := a.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			return err
		}
		for _, ev := range evs.Msg.GetEvents() {
			if ev.GetName() == "sub/deeper/g" && ev.GetType() == filesystem.EventType_EVENT_TYPE_CREATE {
				return nil
			}
		}
		return fmt.Errorf("no create of sub/deeper/g yet")
	})
	if _, err := a.fs.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := a.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: id})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("events of a removed watcher: %v", err)
	}
	ws, err := a.fs.WatchDir(ctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: dir + "/missing"}))
	if err == nil {
		for ws.Receive() {
			t.Error("watching a missing directory sent an event")
		}
		err = ws.Err()
	}
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("watching a missing directory: %v", err)
	}
}

// An upload written through a temporary file shows to a watcher as its
// own file appearing, first event and all (E2B's TestWatcher): the
// temporary file is the agent's, not the user's. Seen failing before: the
// first event named ".test.txt.dn-upload-…".
func TestWatchSeesAnUploadAsItsFile(t *testing.T) {
	a := startAgent(t)
	dir := t.TempDir()
	st, err := a.fs.WatchDir(testCtx(t), connect.NewRequest(&filesystem.WatchDirRequest{Path: dir}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() || st.Msg().GetStart() == nil {
		t.Fatalf("no start event: %v", st.Err())
	}
	res := a.do(t, http.MethodPost, "/files", url.Values{"path": {dir + "/test.txt"}}, "application/octet-stream", strings.NewReader("hello world"))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("upload: %d", res.StatusCode)
	}
	var names []string
	for st.Receive() {
		if ev := st.Msg().GetFilesystem(); ev != nil {
			names = append(names, ev.GetType().String()+" "+ev.GetName())
			if ev.GetName() == "test.txt" {
				break
			}
		}
	}
	if len(names) == 0 || names[0] != "EVENT_TYPE_CREATE test.txt" {
		t.Errorf("events %q: want the first to be the creation of test.txt", names)
	}
}
