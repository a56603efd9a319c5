package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem/filesystemconnect"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process/processconnect"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

const testToken = "s3cret-token"

var (
	reaperOnce sync.Once
	testReaper *Reaper
)

// sharedReaper is one per test binary: it waits for every child of the
// process (a second one would race it), and it is a subreaper, so the
// tests see orphans handed to it.
func sharedReaper() *Reaper {
	reaperOnce.Do(func() { testReaper = NewReaper(true) })
	return testReaper
}

type agentEnv struct {
	url  string
	hc   *http.Client
	proc processconnect.ProcessClient
	fs   filesystemconnect.FilesystemClient
}

// startAgent serves a fresh agent with testToken; its clients send it.
func startAgent(t *testing.T) *agentEnv {
	t.Helper()
	s := New(Config{Token: testToken}, sharedReaper())
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); s.Close() })
	auth := connect.WithInterceptors(tokenInterceptor(testToken))
	return &agentEnv{
		url:  srv.URL,
		hc:   srv.Client(),
		proc: processconnect.NewProcessClient(srv.Client(), srv.URL, auth),
		fs:   filesystemconnect.NewFilesystemClient(srv.Client(), srv.URL, auth),
	}
}

type tokenInterceptor string

func (t tokenInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, r connect.AnyRequest) (connect.AnyResponse, error) {
		r.Header().Set(TokenHeader, string(t))
		return next(ctx, r)
	}
}

func (t tokenInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, s connect.Spec) connect.StreamingClientConn {
		c := next(ctx, s)
		c.RequestHeader().Set(TokenHeader, string(t))
		return c
	}
}

func (t tokenInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	poll.Until(t, timeout, 10*time.Millisecond, cond)
}
