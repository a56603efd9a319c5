package envd_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/envd"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process/processconnect"
)

// closedPort is an address on 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// timedOutDial is a client whose every dial times out before it connects,
// as the Docker provider's 5 s dial does to a sandbox under churn; the
// listener behind it is never reached.
func timedOutDial(t *testing.T) (*http.Client, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: time.Nanosecond}).DialContext}}, l.Addr().String()
}

// A daemon that cannot be connected to (refused, or a dial that timed out)
// is KindUnavailable with "cannot reach": never a timeout of the command
// (issue 33: a 5 s dial timeout was answered as a command killed at its
// 1m timeout), on every call path. Unreachable says so, and diagnose is
// still asked.
func TestUnreachableDaemonIsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	timeoutClient, timeoutAddr := timedOutDial(t)
	dials := map[string]struct {
		http *http.Client
		addr string
	}{
		"refused":   {&http.Client{}, closedPort(t)},
		"timed out": {timeoutClient, timeoutAddr},
	}
	calls := map[string]func(c *envd.Client) error{
		"exec": func(c *envd.Client) error {
			_, err := c.Exec(ctx, compute.ExecRequest{Cmd: []string{"sleep", "99"}, Timeout: time.Minute})
			return err
		},
		"exec stream": func(c *envd.Client) error {
			return c.ExecStream(ctx, compute.ExecRequest{Cmd: []string{"true"}, Timeout: time.Minute}, nil,
				func(compute.ProcessEvent) error { return nil })
		},
		"start process": func(c *envd.Client) error {
			_, err := c.StartProcess(ctx, compute.ProcessRequest{Cmd: []string{"sleep", "99"}})
			return err
		},
		"list processes": func(c *envd.Client) error { _, err := c.ListProcesses(ctx); return err },
		"process output": func(c *envd.Client) error {
			return c.ProcessOutput(ctx, 7, false, func(compute.ProcessEvent) error { return nil })
		},
		"signal":     func(c *envd.Client) error { return c.SignalProcess(ctx, 7, "SIGTERM") },
		"write file": func(c *envd.Client) error { return c.CreateFile(ctx, "/tmp/f", bytes.NewReader([]byte("x")), 1) },
		"read file": func(c *envd.Client) error {
			_, _, err := c.OpenFile(ctx, "/tmp/f", 0, -1)
			return err
		},
		"list":  func(c *envd.Client) error { _, err := c.ListDir(ctx, "/tmp", 1); return err },
		"mkdir": func(c *envd.Client) error { return c.MakeDir(ctx, "/tmp/d") },
	}
	for dname, d := range dials {
		for cname, call := range calls {
			t.Run(dname+"/"+cname, func(t *testing.T) {
				diagnosed := 0
				c := &envd.Client{HTTP: d.http, URL: "http://" + d.addr, Token: "tok", Name: "sandbox test",
					Daemon: "the sandbox agent", Agent: true,
					Diagnose: func(_ context.Context, _ string, err error) error { diagnosed++; return err }}
				err := call(c)
				if err == nil {
					t.Fatal("no error from a daemon nothing listens for")
				}
				if k := compute.KindOf(err); k != compute.KindUnavailable {
					t.Errorf("kind %v, want unavailable: %v", k, err)
				}
				if !envd.Unreachable(err) {
					t.Errorf("Unreachable(%v) = false", err)
				}
				msg := err.Error()
				if !strings.Contains(msg, "cannot reach the sandbox agent in sandbox test: dial tcp "+d.addr) {
					t.Errorf("message %q does not say the agent could not be reached, with the dial's cause", msg)
				}
				for _, lie := range []string{"did not finish", "timeout of", "timed out:", "killed", "http://"} {
					if strings.Contains(msg, lie) {
						t.Errorf("message %q says %q", msg, lie)
					}
				}
				if diagnosed != 1 {
					t.Errorf("diagnose was asked %d times, want once", diagnosed)
				}
			})
		}
	}
}

// Unreachable is false for what is not a failed dial: nil, any other error.
func TestUnreachableOnlyForDials(t *testing.T) {
	for _, err := range []error{nil, errors.New("connection reset by peer"), context.DeadlineExceeded,
		connect.NewError(connect.CodeUnavailable, errors.New("upstream gone")),
		&net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")}} {
		if envd.Unreachable(err) {
			t.Errorf("Unreachable(%v) = true", err)
		}
	}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}
	if !envd.Unreachable(compute.Errorf(compute.KindUnavailable, "exec", connect.NewError(connect.CodeDeadlineExceeded, dial), "x")) {
		t.Error("a dial error wrapped by connect and compute is not unreachable")
	}
}

// neverEnds is an agent whose processes start and never end; it records
// the signals it is sent.
type neverEnds struct {
	processconnect.UnimplementedProcessHandler
	mu      sync.Mutex
	signals []string
}

func (n *neverEnds) Start(ctx context.Context, _ *connect.Request[process.StartRequest], s *connect.ServerStream[process.StartResponse]) error {
	ev := &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: 7}}}
	if err := s.Send(&process.StartResponse{Event: ev}); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

func (n *neverEnds) SendSignal(_ context.Context, r *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.signals = append(n.signals, r.Msg.GetSignal().String()+" "+r.Msg.GetProcess().String())
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

// A command that outlives its timeout is killed and reported as a timeout
// whose message states the time that actually passed, measured from the
// call's start: at least the timeout, at most what the caller saw.
func TestExecTimeoutStatesElapsedTime(t *testing.T) {
	agent := &neverEnds{}
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(agent))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &envd.Client{HTTP: srv.Client(), URL: srv.URL, Name: "sandbox test", Daemon: "the sandbox agent", Agent: true}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const timeout = 200 * time.Millisecond
	began := time.Now()
	_, err := c.Exec(ctx, compute.ExecRequest{Cmd: []string{"sleep", "99"}, Timeout: timeout})
	took := time.Since(began)
	if k := compute.KindOf(err); k != compute.KindTimeout {
		t.Fatalf("kind %v, want timeout: %v", k, err)
	}
	if envd.Unreachable(err) {
		t.Errorf("Unreachable(%v) = true for a command that ran", err)
	}
	m := regexp.MustCompile(`command "sleep 99" was killed after (\S+): it did not finish within its timeout of 200ms$`).FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("message %q does not state the elapsed time and the timeout", err)
	}
	passed, perr := time.ParseDuration(m[1])
	if perr != nil || passed < timeout || passed > took.Round(time.Millisecond)+time.Millisecond {
		t.Errorf("stated %q, want between %s and %s", m[1], timeout, took)
	}
	agent.mu.Lock()
	defer agent.mu.Unlock()
	if len(agent.signals) != 1 || !strings.HasPrefix(agent.signals[0], "SIGNAL_SIGKILL") || !strings.Contains(agent.signals[0], "7") {
		t.Errorf("signals sent %q, want one SIGKILL to pid 7", agent.signals)
	}
}
