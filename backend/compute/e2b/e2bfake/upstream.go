package e2bfake

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
)

// EnvdUpstream names the real envd a fake sandbox's envd requests go to:
// its base URL and the access token it wants (X-Access-Token). An error
// answers 502, as E2B's proxy does for a sandbox it cannot reach.
type EnvdUpstream func(sandboxID string) (base, token string, err error)

// WithEnvd makes each sandbox's envd a real one (e.g. the in-sandbox agent
// in a container) instead of the fake's own: the fake still plays E2B's
// proxy in front of it (502 for an unknown or paused sandbox, the
// sandbox's envdAccessToken checked, faults), and still checks the HTTP
// routes' requests and answers against envd.yaml; Connect calls (streams
// included, client streams as they come) pass through unbuffered.
func WithEnvd(up EnvdUpstream) Option { return func(s *Server) { s.envdUp = up } }

// isConnectRoute says whether an envd path is one of its Connect services.
func isConnectRoute(sub string) bool {
	return strings.HasPrefix(sub, "/process.Process/") || strings.HasPrefix(sub, "/filesystem.Filesystem/")
}

// proxyConnect forwards a Connect call to the sandbox's upstream envd,
// without reading its body first (a client stream's end is its body's end).
func (s *Server) proxyConnect(w http.ResponseWriter, r *http.Request, id, sub string) {
	key := "envd " + r.Method + " " + sub
	if f, ok := s.popFault(key); ok {
		s.record(key, r, f.Status)
		if f.DropConnection {
			dropConnection(w)
			return
		}
		writeFault(w, f)
		return
	}
	if status, msg := s.proxyCheck(id); status != 0 {
		s.record(key, r, status)
		writeError(w, status, msg, "")
		return
	}
	if !s.tokenOK(id, r.Header.Get("X-Access-Token")) {
		s.record(key, r, http.StatusUnauthorized)
		writeError(w, http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported", "")
		return
	}
	// Full duplex, as E2B's proxy and the backend's router: a Connect
	// stream's answer begins before its request body ends, and without it
	// Go's HTTP/1 server closes that body at the first write, which fails
	// the upstream request and cuts the answer mid-stream (seen under load
	// as "incomplete envelope: unexpected EOF" in the flow tests).
	_ = http.NewResponseController(w).EnableFullDuplex()
	rec := &statusRecorder{ResponseWriter: w}
	s.forwardEnvd(rec, r, id, sub)
	s.record(key, r, rec.status)
}

// forwardEnvd sends r to the sandbox's upstream envd at sub.
func (s *Server) forwardEnvd(w http.ResponseWriter, r *http.Request, id, sub string) {
	base, token, err := s.envdUp(id)
	var target *url.URL
	if err == nil {
		target, err = url.Parse(base)
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, "the envd of sandbox "+id+" cannot be reached: "+err.Error(), "")
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.URL.Path, pr.Out.URL.RawPath = strings.TrimSuffix(target.Path, "/")+sub, ""
			pr.Out.Host = target.Host
			pr.Out.Header.Set("X-Access-Token", token)
		},
		FlushInterval: -1, // streams: every event as it comes
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeError(w, http.StatusBadGateway, "the envd of sandbox "+id+" did not answer: "+err.Error(), "")
		},
	}
	rp.ServeHTTP(w, r)
}
