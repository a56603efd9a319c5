package apitest

import (
	"net/http"
	"strings"
	"testing"
)

const goodSandbox = `{"sandboxID":"sb1","templateID":"base","state":"running","createdAt":"2026-01-02T03:04:05Z",
"startedAt":"2026-01-02T03:04:06Z","endAt":null,"cpuCount":1,"memoryMB":512,"metadata":{},"autoPause":false,
"autoResume":false,"timeout":300,"envdURL":"http://127.0.0.1:8080/sandboxes/sb1",
"serviceURLs":{"8080":{"url":"http://127.0.0.1:8080/sandboxes/sb1/proxy/8080/","host":"127.0.0.1","port":8080}},
"timeline":[{"phase":"pending","at":"2026-01-02T03:04:05Z"}],"diagnostic":null}`

// The check passes an answer the document describes and fails the drifts
// the document was made the source of truth against: service URLs as plain
// strings, a sandbox without its timeout.
func TestCheckResponse(t *testing.T) {
	t.Parallel()
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1234/sandboxes/sb1", nil)
	hdr := http.Header{"Content-Type": {"application/json"}}
	if err := CheckResponse(req, 200, hdr, []byte(goodSandbox)); err != nil {
		t.Fatalf("a sandbox as documented: %v", err)
	}
	for name, body := range map[string]string{
		"service URL as a string": strings.Replace(goodSandbox,
			`{"url":"http://127.0.0.1:8080/sandboxes/sb1/proxy/8080/","host":"127.0.0.1","port":8080}`,
			`"http://127.0.0.1:8080/sandboxes/sb1/proxy/8080/"`, 1),
		"no timeout":    strings.Replace(goodSandbox, `"timeout":300,`, "", 1),
		"unknown state": strings.Replace(goodSandbox, `"state":"running"`, `"state":"exploded"`, 1),
	} {
		if err := CheckResponse(req, 200, hdr, []byte(body)); err == nil {
			t.Errorf("%s: the check passed", name)
		}
	}
	if err := CheckResponse(req, 404, hdr, []byte(`{"code":404}`)); err == nil {
		t.Error("an error envelope without detail and type: the check passed")
	}
	if err := CheckResponse(req, 200, http.Header{"Content-Type": {"text/html"}}, []byte(goodSandbox)); err == nil {
		t.Error("a content type the operation does not answer: the check passed")
	}
	// GET /sandboxes/{id} lists 200, 401 and 404.
	if err := CheckResponse(req, 202, hdr, []byte(goodSandbox)); err == nil {
		t.Error("a success status the operation does not list: the check passed")
	}
	if err := CheckResponse(req, 503, hdr, []byte(`{"code":503,"detail":"the database did not answer","type":"unavailable","errors":null}`)); err != nil {
		t.Errorf("an unlisted error status answered with the envelope: %v", err)
	}
	if err := CheckResponse(req, 503, http.Header{"Content-Type": {"text/plain"}}, []byte("unavailable")); err == nil {
		t.Error("an unlisted error status answered as plain text: the check passed")
	}
}
