// Package envd is the backend's client of envd's contract (the Connect
// services process.Process and filesystem.Filesystem and the /files
// routes, ../shared/e2b): E2B's own envd, and the in-sandbox agent
// (backend/agent) that serves the same contract in Docker sandboxes. Both
// providers implement their process, exec and file operations with it, so
// they behave alike.
//
// Everything envd sends is the sandbox's (its root can replace envd), so
// every read is bounded: a Connect message is at most
// compute.MaxMessageBytes, a buffered output at most MaxExecOutput, an
// error body 4 KiB; nothing is allocated by a length the sandbox declares.
package envd

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem/filesystemconnect"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process/processconnect"
)

// TokenHeader carries the sandbox's access token (envd.yaml AccessTokenAuth).
const TokenHeader = "X-Access-Token"

// Client reaches envd in one sandbox. It is cheap: make one per call.
type Client struct {
	HTTP  *http.Client
	URL   string // envd's base URL, e.g. http://10.0.0.2:49983
	Token string // "" sends none
	User  string // the user processes run as and paths resolve for (Basic auth, envd's way); "" is envd's default
	// Name names the sandbox in messages ("E2B sandbox <id>").
	Name string
	// Daemon names envd in messages ("envd", "the sandbox agent").
	Daemon string
	// MaxExecOutput bounds what a buffered Exec keeps of each stream
	// (default compute.MaxExecOutputBytes).
	MaxExecOutput int
	// Agent is set when the daemon is backend/agent: it replays a
	// process's output, keeps ended processes (with their exit code) for
	// List and Connect, and sends any signal, not only envd's two.
	Agent bool
	// Diagnose, when set, explains a failure to reach the daemon (the
	// sandbox may be gone or paused); it returns err when it knows no better.
	Diagnose func(ctx context.Context, op string, err error) error
}

// readMax bounds each message envd sends (compute.MaxMessageBytes).
var readMax = connect.WithReadMaxBytes(compute.MaxMessageBytes)

func (c *Client) base() string { return strings.TrimRight(c.URL, "/") }

func (c *Client) processes() processconnect.ProcessClient {
	return processconnect.NewProcessClient(c.HTTP, c.base(), readMax)
}

func (c *Client) files() filesystemconnect.FilesystemClient {
	return filesystemconnect.NewFilesystemClient(c.HTTP, c.base(), readMax)
}

func (c *Client) daemon() string {
	if c.Daemon == "" {
		return "envd"
	}
	return c.Daemon
}

func (c *Client) maxExecOutput() int {
	if c.MaxExecOutput <= 0 {
		return compute.MaxExecOutputBytes
	}
	return c.MaxExecOutput
}

// auth sets the token and the user on a request's header.
func (c *Client) auth(h http.Header) {
	if c.Token != "" {
		h.Set(TokenHeader, c.Token)
	}
	if c.User != "" {
		// envd picks the user of a process (and of relative paths) from basic auth "<user>:".
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(c.User+":")))
	}
}

func withAuth[T any](c *Client, req *connect.Request[T]) *connect.Request[T] {
	c.auth(req.Header())
	return req
}

func (c *Client) diagnose(ctx context.Context, op string, err error) error {
	if c.Diagnose == nil {
		return err
	}
	return c.Diagnose(ctx, op, err)
}

// connectMessage is envd's own message of a connect error.
func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

// Unreachable reports whether err (from this package, or from an HTTP or
// Connect call to the daemon, wrapped or not) is a failure to connect to
// the daemon at all: the dial failed (connection refused, no route, host
// unreachable, or timed out while connecting), so not one byte of the
// request reached the daemon and nothing ran. Such a call may be retried
// safely, even one that is not idempotent (a Start, an upload). Any
// failure after the connection was made (reset, EOF, no answer in time)
// is not unreachable: the daemon may have acted on the request.
//
// Connect maps a dial timeout to CodeDeadlineExceeded or CodeUnavailable;
// the cause stays reachable through connect.Error's Unwrap, which is what
// is looked at here, never the code. A Client's Diagnose may replace the
// error with its own finding (the sandbox is paused), which is not
// unreachable.
func Unreachable(err error) bool {
	return dialError(err) != nil
}

// dialError is the failed dial in err's chain, nil if there is none.
func dialError(err error) error {
	if err == nil {
		return nil
	}
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
		return op
	}
	// A refused connection happens only while connecting, whatever wraps it
	// (a custom dialer need not return a *net.OpError).
	if errors.Is(err, syscall.ECONNREFUSED) {
		return err
	}
	return nil
}

// unreachable is the error of a call that could not connect to the daemon
// (dial is dialError's answer): KindUnavailable, for the sandbox may be
// starting, paused or gone, which diagnose tells when it can.
func (c *Client) unreachable(ctx context.Context, op string, err, dial error) error {
	return c.diagnose(ctx, op, compute.Errorf(compute.KindUnavailable, op, err,
		"cannot reach %s in %s: %v; nothing was sent to it, so retrying is safe: retry in a few seconds, and if it persists check that the sandbox is running",
		c.daemon(), c.Name, dial))
}
