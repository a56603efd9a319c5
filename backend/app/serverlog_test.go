package app

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

// A panic net/http recovers itself (in a connection's goroutine, outside
// the handlers' recoverer, as the concurrent Body.Read panic issue 34's
// fuzz met) is logged at ERROR with its stack. The handler here has no
// recoverer, so net/http recovers its panic the same way.
func TestServerRecoveredPanicsAreErrors(t *testing.T) {
	var logs syncBuffer
	a := &App{Log: slog.New(slog.NewTextHandler(&logs, nil))}
	srv := a.MetricsServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Handler = panicking{}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	poll.Until(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(logs.String(), "panic serving") {
			return fmt.Errorf("no log of the panic: %q", logs.String())
		}
		return nil
	})
	if line := logs.String(); !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "deliberate") {
		t.Fatalf("the recovered panic was logged as %q, want level=ERROR with the panic", line)
	}
}

type panicking struct{}

func (panicking) ServeHTTP(http.ResponseWriter, *http.Request) { panic("deliberate") }
