package agent

import (
	"context"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process/processconnect"
)

// BenchmarkStartFirstByte is a Start stream of echo to its first stdout
// event, against an agent in this process (go test -bench FirstByte);
// BenchmarkForkExecFirstByte is the same program started bare, its
// pipe's first byte: the floor the agent adds to.
func BenchmarkStartFirstByte(b *testing.B) {
	s := New(Config{Token: testToken}, sharedReaper())
	srv := httptest.NewServer(s)
	defer func() { srv.Close(); s.Close() }()
	c := processconnect.NewProcessClient(srv.Client(), srv.URL, connect.WithInterceptors(tokenInterceptor(testToken)))
	ctx := context.Background()
	for b.Loop() {
		st, err := c.Start(ctx, startReq("", false, "echo", "hello"))
		if err != nil {
			b.Fatal(err)
		}
		for st.Receive() {
			if len(st.Msg().GetEvent().GetData().GetStdout()) > 0 {
				break
			}
		}
		b.StopTimer()
		for st.Receive() {
		}
		st.Close()
		b.StartTimer()
	}
}

func BenchmarkForkExecFirstByte(b *testing.B) {
	path, err := lookPath("echo", os.Environ(), nil)
	if err != nil {
		b.Fatal(err)
	}
	r := sharedReaper()
	for b.Loop() {
		pr, pw, _ := os.Pipe()
		_, err := r.Start(func() (int, error) {
			p, err := os.StartProcess(path, []string{"echo", "hello"}, &os.ProcAttr{Files: []*os.File{nil, pw, pw}})
			if err != nil {
				return 0, err
			}
			return p.Pid, p.Release()
		}, func(syscall.WaitStatus) {})
		pw.Close()
		if err != nil {
			b.Fatal(err)
		}
		var buf [1]byte
		if _, err := pr.Read(buf[:]); err != nil {
			b.Fatal(err)
		}
		pr.Close()
	}
}
