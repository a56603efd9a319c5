package e2bapi_test

import "testing"

// network.maskRequestHost is refused as E2B refuses it (its
// TestMaskRequestHostIncorrectUrl), and where it could never be a Host.
func TestE2BMaskRequestHostRefused(t *testing.T) {
	e := newEdge(t)
	for _, bad := range []string{"-https://abcd", "exämple.com", "host:port", "a b:${PORT}", "host:1\r\nX-Injected: 1"} {
		r := e.env.Req("POST", "/e2b/sandboxes", map[string]any{"templateID": "base", "network": map[string]any{"maskRequestHost": bad}})
		e.e2bError("maskRequestHost "+bad, 400, r.Body, "mask request host")
	}
}
