package compute

import "context"

// EnvdPort is the port of envd's contract in a sandbox (E2B's envd, the
// in-sandbox agent on Docker): the port E2B's SDKs address as
// 49983-<sandboxID>.<domain>.
const EnvdPort = 49983

// EnvdLocator is implemented by providers whose instances serve envd's
// contract: the traffic router forwards a client's envd requests (port
// EnvdPort) there, with the instance's own token in X-Access-Token instead
// of the client's, so that token never leaves the backend.
type EnvdLocator interface {
	// Envd returns envd's base URL (as the backend reaches it) and the
	// token it expects; an error of KindNotFound when the instance runs no
	// envd (a Docker sandbox made without the agent).
	Envd(ctx context.Context, ref Ref) (baseURL, token string, err error)
}
