package app

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/docker/docker/api/types/image"
	"google.golang.org/protobuf/proto"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem/filesystemconnect"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process/processconnect"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

// Test images built locally (no registry), labelled and kept for reuse.
const (
	flowBusybox = "dn-test-flow-busybox:latest"
	flowNoShell = "dn-test-flow-noshell:winsize" // its program reads a PTY's size (tagged anew when it changed)
)

// flowProgram is the no-shell image's only program: it prints what it is
// told, echoes stdin, or prints a banner and waits.
const flowProgram = `package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	switch {
	case len(os.Args) == 5 && os.Args[1] == "say":
		fmt.Fprint(os.Stdout, os.Args[2])
		fmt.Fprint(os.Stderr, os.Args[3])
		code, _ := strconv.Atoi(os.Args[4])
		os.Exit(code)
	case len(os.Args) == 2 && os.Args[1] == "cat":
		_, _ = io.Copy(os.Stdout, os.Stdin)
	case len(os.Args) == 2 && os.Args[1] == "winsize":
		// A line read from the terminal, then its size, as stty size prints it.
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		var ws [4]uint16
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws))); e != 0 {
			fmt.Println("TIOCGWINSZ:", e)
			os.Exit(1)
		}
		fmt.Println(ws[0], ws[1])
	case len(os.Args) == 2 && os.Args[1] == "banner":
		fmt.Println("ready")
		time.Sleep(time.Hour)
	default:
		time.Sleep(time.Hour)
	}
}
`

// flowImage says how each step's process is started in one image.
type flowImage struct {
	template string
	say      func(out, errOut string, code int) (string, []string)
	cat      []string // echoes stdin
	banner   []string // prints "ready\n", then waits
	winsize  []string // reads a line, prints its terminal's "rows cols"
}

func shellImage(template, stty string) flowImage {
	return flowImage{template: template,
		winsize: []string{"/bin/sh", "-c", "read line; " + stty + " size"},
		say: func(out, errOut string, code int) (string, []string) {
			return "/bin/sh", []string{"-c", fmt.Sprintf("printf %%s %s; printf %%s %s >&2; exit %d", out, errOut, code)}
		},
		cat:    []string{"/bin/cat"},
		banner: []string{"/bin/sh", "-c", "echo ready; exec sleep 600"}}
}

var flowImages = []flowImage{
	shellImage("base", "stty"),
	shellImage("flow-busybox", "/bin/busybox stty"),
	{template: "flow-noshell",
		say: func(out, errOut string, code int) (string, []string) {
			return "/app", []string{"say", out, errOut, fmt.Sprint(code)}
		},
		cat:     []string{"/app", "cat"},
		banner:  []string{"/app", "banner"},
		winsize: []string{"/app", "winsize"}},
}

var flowImagesOnce struct {
	sync.Once
	err error
}

// ensureFlowImages builds the busybox and no-shell images once per test
// binary (kept, labelled, for the next run).
func ensureFlowImages(t *testing.T) {
	t.Helper()
	flowImagesOnce.Do(func() { flowImagesOnce.err = buildFlowImages(t, t.TempDir()) })
	if flowImagesOnce.err != nil {
		t.Fatal(flowImagesOnce.err)
	}
}

func buildFlowImages(t *testing.T, dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli := dockertest.Client(t)
	// busybox: Debian's static busybox (package busybox-static) FROM scratch.
	if _, err := cli.ImageInspect(ctx, flowBusybox); err != nil {
		bb, err := exec.LookPath("busybox")
		if err != nil {
			return fmt.Errorf("the busybox test image needs a static busybox on this machine: apt-get install busybox-static (%v)", err)
		}
		if f, err := elf.Open(bb); err != nil {
			return err
		} else {
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					f.Close()
					return fmt.Errorf("%s is dynamically linked; the busybox test image needs a static one: apt-get install busybox-static", bb)
				}
			}
			f.Close()
		}
		bin, err := os.ReadFile(bb)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		_ = tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755})
		_ = tw.WriteHeader(&tar.Header{Name: "bin/busybox", Mode: 0o755, Size: int64(len(bin))})
		_, _ = tw.Write(bin)
		for _, n := range []string{"sh", "cat", "sleep", "ls", "printf", "echo"} {
			_ = tw.WriteHeader(&tar.Header{Name: "bin/" + n, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
		}
		_ = tw.Close()
		if err := importImage(ctx, t, &buf, flowBusybox, `CMD ["/bin/sleep","infinity"]`); err != nil {
			return err
		}
	}
	// no shell: one static Go program FROM scratch.
	if _, err := cli.ImageInspect(ctx, flowNoShell); err != nil {
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(flowProgram), 0o644); err != nil {
			return err
		}
		build := exec.Command("go", "build", "-o", "app", "main.go")
		build.Dir = dir
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=", "GO111MODULE=off")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building the no-shell program: %v\n%s", err, out)
		}
		bin, err := os.ReadFile(filepath.Join(dir, "app"))
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		_ = tw.WriteHeader(&tar.Header{Name: "app", Mode: 0o755, Size: int64(len(bin))})
		_, _ = tw.Write(bin)
		_ = tw.Close()
		if err := importImage(ctx, t, &buf, flowNoShell, `CMD ["/app"]`); err != nil {
			return err
		}
	}
	return nil
}

func importImage(ctx context.Context, t *testing.T, layer io.Reader, ref, cmd string) error {
	cli := dockertest.Client(t)
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: layer, SourceName: "-"}, ref,
		image.ImportOptions{Changes: []string{cmd, `LABEL dev.dreadnode.test="e2bflow"`}})
	if err != nil {
		return fmt.Errorf("importing %s: %w", ref, err)
	}
	_, _ = io.Copy(io.Discard, rc)
	return rc.Close()
}

// tokenTransport adds the sandbox's envd token to every request, as E2B's
// SDK does.
type tokenTransport struct {
	base  http.RoundTripper
	token *string
}

func (tr tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Access-Token", *tr.token)
	return tr.base.RoundTrip(r)
}

// TestE2BFlow drives E2B's documented flows as its SDK does — /e2b create,
// envd's Connect services and /files through the host router — in
// dreadnode/base, a busybox image and an image with no shell.
func TestE2BFlow(t *testing.T) {
	t.Parallel()
	ensureFlowImages(t)
	ta := newTestApp(t, nil)
	dp, ok := ta.app.Provider.(*docker.Provider)
	if !ok {
		t.Fatalf("provider is %T, want the Docker provider", ta.app.Provider)
	}
	dp.RegisterTemplate(compute.Template{ID: "flow-busybox", CPUCount: 1, MemoryMB: 256}, flowBusybox)
	dp.RegisterTemplate(compute.Template{ID: "flow-noshell", CPUCount: 1, MemoryMB: 256}, flowNoShell)
	for _, img := range flowImages {
		t.Run(img.template, func(t *testing.T) {
			t.Parallel()
			e2bFlow(t, ta, img)
		})
	}
}

func e2bFlow(t *testing.T, ta *testApp, img flowImage) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// create
	r := ta.req("POST", "/e2b/sandboxes", map[string]any{"templateID": img.template, "timeout": 300, "secure": true})
	if r.code != http.StatusCreated {
		t.Fatalf("POST /e2b/sandboxes: %s", r.body)
	}
	m := r.json(t)
	id, tok, domain := fmt.Sprint(m["sandboxID"]), fmt.Sprint(m["envdAccessToken"]), fmt.Sprint(m["domain"])
	hc := hostClient(ta, nil)
	hc.Transport = tokenTransport{base: hc.Transport, token: &tok}
	hc.Timeout = 0 // streams; each call has its own context
	envd := "http://49983-" + id + "." + domain
	pc := processconnect.NewProcessClient(hc, envd)
	fc := filesystemconnect.NewFilesystemClient(hc, envd)

	// The agent answers (it starts beside the image's command).
	poll.Until(t, time.Minute, 200*time.Millisecond, func() error {
		res, err := hc.Get(envd + "/health")
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			return fmt.Errorf("/health: %d", res.StatusCode)
		}
		return nil
	})

	// A command with streamed output: stdout and stderr apart, the exit code.
	cmd, args := img.say("out1", "err1", 3)
	st, err := pc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: cmd, Args: args}}))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	var end *process.ProcessEvent_EndEvent
	var started bool
	for st.Receive() {
		ev := st.Msg().GetEvent()
		if ev.GetStart() != nil {
			started = ev.GetStart().GetPid() > 0
		}
		stdout.Write(ev.GetData().GetStdout())
		stderr.Write(ev.GetData().GetStderr())
		if e := ev.GetEnd(); e != nil {
			end = e
		}
	}
	_ = st.Close()
	if !started || end == nil || end.GetExitCode() != 3 || stdout.String() != "out1" || stderr.String() != "err1" {
		t.Fatalf("command: started %v, stdout %q, stderr %q, end %v, err %v", started, stdout.String(), stderr.String(), end, st.Err())
	}

	// A background process: its stream dropped after the first line, its
	// output replayed on Connect, then a signal ends it.
	bctx, bcancel := context.WithCancel(ctx)
	st, err = pc.Start(bctx, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: img.banner[0], Args: img.banner[1:]}, Tag: proto.String("bg")}))
	if err != nil {
		t.Fatal(err)
	}
	var pid uint32
	var first strings.Builder
	for st.Receive() && !strings.Contains(first.String(), "ready\n") {
		ev := st.Msg().GetEvent()
		if ev.GetStart() != nil {
			pid = ev.GetStart().GetPid()
		}
		first.Write(ev.GetData().GetStdout())
	}
	bcancel()
	_ = st.Close()
	if pid == 0 || first.String() != "ready\n" {
		t.Fatalf("background process: pid %d, first output %q, err %v", pid, first.String(), st.Err())
	}
	lr, err := pc.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, p := range lr.Msg.GetProcesses() {
		listed = listed || p.GetPid() == pid && p.GetTag() == "bg"
	}
	if !listed {
		t.Fatalf("List after the stream was dropped: pid %d tagged bg missing from %v", pid, lr.Msg.GetProcesses())
	}
	cs, err := pc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: "bg"}}}))
	if err != nil {
		t.Fatal(err)
	}
	var replay strings.Builder
	signalled := false
	end = nil
	for cs.Receive() {
		ev := cs.Msg().GetEvent()
		replay.Write(ev.GetData().GetStdout())
		if !signalled && strings.Contains(replay.String(), "ready\n") {
			signalled = true
			if _, err := pc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{
				Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}, Signal: process.Signal_SIGNAL_SIGTERM})); err != nil {
				t.Fatalf("SendSignal: %v", err)
			}
		}
		if e := ev.GetEnd(); e != nil {
			end = e
		}
	}
	_ = cs.Close()
	if replay.String() != "ready\n" || end == nil || end.GetExited() || !strings.Contains(end.GetStatus(), "terminated") {
		t.Fatalf("reconnect: replayed %q, end %v (want ended by SIGTERM), err %v", replay.String(), end, cs.Err())
	}

	// stdin: what is sent comes back; closing stdin ends the process. Input
	// goes by SendInput, then by StreamInput (client streaming, HTTP/1.1
	// through the router), whose input is echoed while its stream is still
	// open: the router forwards it as it comes, not at the stream's end.
	st, err = pc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: img.cat[0], Args: img.cat[1:]}, Stdin: proto.Bool(true)}))
	if err != nil {
		t.Fatal(err)
	}
	var echoed strings.Builder
	var in *connect.ClientStreamForClient[process.StreamInputRequest, process.StreamInputResponse]
	var sel *process.ProcessSelector
	stdinData := func(b string) *process.StreamInputRequest {
		return &process.StreamInputRequest{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{
			Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte(b)}}}}}
	}
	end = nil
	for st.Receive() {
		ev := st.Msg().GetEvent()
		if s := ev.GetStart(); s != nil {
			sel = &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: s.GetPid()}}
			if _, err := pc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel,
				Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("hello stdin\n")}}})); err != nil {
				t.Fatalf("SendInput: %v", err)
			}
			in = pc.StreamInput(ctx)
			for _, m := range []*process.StreamInputRequest{
				{Event: &process.StreamInputRequest_Start{Start: &process.StreamInputRequest_StartEvent{Process: sel}}},
				stdinData("streamed "), stdinData("input\n"),
			} {
				if err := in.Send(m); err != nil {
					t.Fatalf("StreamInput send: %v", err)
				}
			}
		}
		echoed.Write(ev.GetData().GetStdout())
		if in != nil && strings.HasSuffix(echoed.String(), "streamed input\n") {
			if _, err := in.CloseAndReceive(); err != nil {
				t.Fatalf("StreamInput: %v", err)
			}
			in = nil
			if _, err := pc.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); err != nil {
				t.Fatalf("CloseStdin: %v", err)
			}
		}
		if e := ev.GetEnd(); e != nil {
			end = e
		}
	}
	_ = st.Close()
	if echoed.String() != "hello stdin\nstreamed input\n" || end == nil || end.GetExitCode() != 0 {
		t.Fatalf("stdin: echoed %q, end %v, err %v", echoed.String(), end, st.Err())
	}

	flowPTY(ctx, t, pc, img)

	// Files: a recursive watch sees what the steps below do under /flow.
	if _, err := fc.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "/flow/sub"})); err != nil {
		t.Fatalf("MakeDir: %v", err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	ws, err := fc.WatchDir(wctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: "/flow", Recursive: true}))
	if err != nil {
		t.Fatal(err)
	}
	if !ws.Receive() || ws.Msg().GetStart() == nil {
		t.Fatalf("WatchDir: want a start event first, got %v, err %v", ws.Msg(), ws.Err())
	}
	events := make(chan *filesystem.FilesystemEvent, 64)
	go func() {
		defer close(events)
		for ws.Receive() {
			if ev := ws.Msg().GetFilesystem(); ev != nil {
				events <- ev
			}
		}
	}()
	t.Cleanup(func() { wcancel(); _ = ws.Close() })

	// upload through /files (multipart, as the SDK's write), read back.
	content := "file content " + img.template + "\n"
	upload(t, hc, envd+"/files?path=/flow/sub/a.txt", content)
	if got := download(t, hc, envd+"/files?path=/flow/sub/a.txt", http.StatusOK); got != content {
		t.Fatalf("GET /files: %q, want %q", got, content)
	}
	// octet-stream too
	req, _ := http.NewRequestWithContext(ctx, "POST", envd+"/files?path=/flow/b.bin", strings.NewReader("raw"))
	req.Header.Set("Content-Type", "application/octet-stream")
	if res, err := hc.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("POST /files octet-stream: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	waitEvent(t, events, "sub/a.txt", filesystem.EventType_EVENT_TYPE_CREATE, filesystem.EventType_EVENT_TYPE_WRITE)

	// stat, list (depth 2), move, remove
	sr, err := fc.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/flow/sub/a.txt"}))
	if err != nil || sr.Msg.GetEntry().GetSize() != int64(len(content)) || sr.Msg.GetEntry().GetType() != filesystem.FileType_FILE_TYPE_FILE {
		t.Fatalf("Stat: %v %v", sr, err)
	}
	ld, err := fc.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/flow", Depth: 2}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ld.Msg.GetEntries() {
		names = append(names, e.GetPath())
	}
	if strings.Join(slices.Sorted(slices.Values(names)), ",") != "/flow/b.bin,/flow/sub,/flow/sub/a.txt" {
		t.Fatalf("ListDir /flow depth 2: %v", names)
	}
	mv, err := fc.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: "/flow/sub/a.txt", Destination: "/flow/sub/c.txt"}))
	if err != nil || mv.Msg.GetEntry().GetPath() != "/flow/sub/c.txt" {
		t.Fatalf("Move: %v %v", mv, err)
	}
	waitEvent(t, events, "sub/c.txt", filesystem.EventType_EVENT_TYPE_CREATE, filesystem.EventType_EVENT_TYPE_RENAME)
	if _, err := fc.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "/flow/b.bin"})); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	waitEvent(t, events, "b.bin", filesystem.EventType_EVENT_TYPE_REMOVE)
	if _, err := fc.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/flow/b.bin"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Stat of a removed file: want not_found, got %v", err)
	}
	download(t, hc, envd+"/files?path=/flow/sub/a.txt", http.StatusNotFound)

	// pause, resume: the files are kept.
	if r := ta.req("POST", "/e2b/sandboxes/"+id+"/pause", nil); r.code != http.StatusNoContent {
		t.Fatalf("pause: %d %s", r.code, r.body)
	}
	r = ta.req("POST", "/e2b/sandboxes/"+id+"/resume", map[string]any{"timeout": 300})
	if r.code != http.StatusCreated {
		t.Fatalf("resume: %d %s", r.code, r.body)
	}
	// Resuming keeps the envd token, as E2B's does (its
	// TestSandboxResumeWithSecuredEnvd): the SDK's stays good.
	if kept := fmt.Sprint(r.json(t)["envdAccessToken"]); kept != tok {
		t.Fatalf("resume: want create's envdAccessToken %s, got %s", tok, r.body)
	}
	var got string
	poll.Until(t, time.Minute, 200*time.Millisecond, func() error {
		res, err := hc.Get(envd + "/files?path=/flow/sub/c.txt")
		if err != nil {
			return err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /files after resume: %d %s", res.StatusCode, b)
		}
		got = string(b)
		return nil
	})
	if got != content {
		t.Fatalf("after resume: %q, want %q", got, content)
	}

	// kill
	if r := ta.req("DELETE", "/e2b/sandboxes/"+id, nil); r.code != http.StatusNoContent {
		t.Fatalf("kill: %d %s", r.code, r.body)
	}
	if r := ta.req("GET", "/e2b/sandboxes/"+id, nil); r.code != http.StatusNotFound {
		t.Fatalf("GET after kill: want 404, got %d %s", r.code, r.body)
	}
	if res, err := hc.Get(envd + "/health"); err != nil || res.StatusCode == http.StatusNoContent {
		t.Fatalf("envd after kill: want refused, got %v %v", res, err)
	} else {
		res.Body.Close()
	}
}

// flowPTY: a process in a terminal (as the SDK's pty.create): resized by
// Update, typed into by pty input (echoed by the terminal), its output sent
// as pty data.
func flowPTY(ctx context.Context, t *testing.T, pc processconnect.ProcessClient, img flowImage) {
	t.Helper()
	st, err := pc.Start(ctx, connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: img.winsize[0], Args: img.winsize[1:]},
		Pty:     &process.PTY{Size: &process.PTY_Size{Cols: 80, Rows: 24}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out, plain strings.Builder
	var end *process.ProcessEvent_EndEvent
	for st.Receive() {
		ev := st.Msg().GetEvent()
		if s := ev.GetStart(); s != nil {
			sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: s.GetPid()}}
			if _, err := pc.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: sel,
				Pty: &process.PTY{Size: &process.PTY_Size{Cols: 120, Rows: 40}}})); err != nil {
				t.Fatalf("Update (resize): %v", err)
			}
			if _, err := pc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel,
				Input: &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte("go\n")}}})); err != nil {
				t.Fatalf("SendInput pty: %v", err)
			}
		}
		out.Write(ev.GetData().GetPty())
		plain.Write(ev.GetData().GetStdout())
		plain.Write(ev.GetData().GetStderr())
		if e := ev.GetEnd(); e != nil {
			end = e
		}
	}
	if end == nil || end.GetExitCode() != 0 || !strings.Contains(out.String(), "go\r\n") || !strings.HasSuffix(out.String(), "40 120\r\n") || plain.Len() > 0 {
		t.Fatalf("pty: output %q (want the echoed input, then the resized \"40 120\"), stdout/stderr %q, end %v, err %v", out.String(), plain.String(), end, st.Err())
	}
}

// waitEvent waits for a watch event on name of one of the types.
func waitEvent(t *testing.T, events <-chan *filesystem.FilesystemEvent, name string, types ...filesystem.EventType) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	var seen []string
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("watch ended before an event on %s; saw %v", name, seen)
			}
			seen = append(seen, ev.GetName()+":"+ev.GetType().String())
			for _, ty := range types {
				if ev.GetName() == name && ev.GetType() == ty {
					return
				}
			}
		case <-timeout:
			t.Fatalf("no watch event %v on %s within 30s; saw %v", types, name, seen)
		}
	}
}

func upload(t *testing.T, c *http.Client, url, content string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "a.txt")
	_, _ = io.WriteString(fw, content)
	_ = mw.Close()
	req, _ := http.NewRequest("POST", url, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /files: %d %s", res.StatusCode, b)
	}
}

func download(t *testing.T, c *http.Client, url string, want int) string {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("GET %s: want %d, got %d %s", url, want, res.StatusCode, b)
	}
	return string(b)
}

// TestE2BFlowNoZombie: 5,000 process starts through envd's Connect API,
// each leaving an orphan behind (sh backgrounds a child and exits), leave
// no zombie in the sandbox: the agent reaps them. /proc is read with the
// agent's own file API. (Seen failing with the agent's wait for any child
// switched off, waiting only for its own processes: zombies listed.)
func TestE2BFlowNoZombie(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	r := ta.req("POST", "/e2b/sandboxes", map[string]any{"templateID": "base", "timeout": 600, "secure": true})
	if r.code != http.StatusCreated {
		t.Fatalf("POST /e2b/sandboxes: %s", r.body)
	}
	m := r.json(t)
	id, tok := fmt.Sprint(m["sandboxID"]), fmt.Sprint(m["envdAccessToken"])
	hc := hostClient(ta, nil)
	hc.Transport = tokenTransport{base: hc.Transport, token: &tok}
	hc.Timeout = 0
	envd := "http://49983-" + id + "." + fmt.Sprint(m["domain"])
	pc := processconnect.NewProcessClient(hc, envd)
	fc := filesystemconnect.NewFilesystemClient(hc, envd)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	poll.Until(t, time.Minute, 200*time.Millisecond, func() error {
		res, err := hc.Get(envd + "/health")
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			return fmt.Errorf("/health: %d", res.StatusCode)
		}
		return nil
	})

	const starts, workers = 5000, 8
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				st, err := pc.Start(ctx, connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{
					Cmd: "/bin/sh", Args: []string{"-c", "sleep 0 & exit 0"}}}))
				if err != nil {
					errs <- fmt.Errorf("start %d: %w", i, err)
					return
				}
				var end *process.ProcessEvent_EndEvent
				for st.Receive() {
					if e := st.Msg().GetEvent().GetEnd(); e != nil {
						end = e
					}
				}
				_ = st.Close()
				if end == nil || end.GetExitCode() != 0 {
					errs <- fmt.Errorf("process %d: end %v, err %v", i, end, st.Err())
					return
				}
			}
		}()
	}
	func() {
		defer close(jobs)
		for i := range starts {
			select {
			case jobs <- i:
			case err := <-errs:
				t.Errorf("after %d starts: %v", i, err)
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// No process in the sandbox is a zombie (one may be for an instant
	// before it is reaped, hence the poll).
	poll.Until(t, 30*time.Second, 500*time.Millisecond, func() error {
		ld, err := fc.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/proc", Depth: 1}))
		if err != nil {
			return err
		}
		var zombies []string
		for _, e := range ld.Msg.GetEntries() {
			if e.GetType() != filesystem.FileType_FILE_TYPE_DIRECTORY || strings.TrimLeft(e.GetName(), "0123456789") != "" {
				continue
			}
			if e.GetName() == "1" {
				continue // the agent itself (PID 1, the reaper): its /proc entry is refused, and it is no zombie
			}
			res, err := hc.Get(envd + "/files?path=/proc/" + e.GetName() + "/stat")
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusNotFound {
				continue // ended meanwhile
			}
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("GET /files /proc/%s/stat: %d %s", e.GetName(), res.StatusCode, b)
			}
			// pid (comm) state ...: comm may hold spaces and parentheses.
			s := string(b)
			if i := strings.LastIndexByte(s, ')'); i >= 0 && strings.HasPrefix(s[i+1:], " Z") {
				zombies = append(zombies, strings.TrimSpace(s))
			}
		}
		if len(zombies) > 0 {
			return fmt.Errorf("%d zombies after %d starts: %v", len(zombies), starts, zombies[:min(len(zombies), 5)])
		}
		return nil
	})
}
