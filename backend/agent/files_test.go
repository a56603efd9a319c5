package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process/processconnect"
)

func (a *agentEnv) do(t *testing.T, method, path string, q url.Values, ctype string, body io.Reader, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, a.url+path+"?"+q.Encode(), body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(TokenHeader, testToken)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := a.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestFilesUploadAndDownload(t *testing.T) {
	a := startAgent(t)
	dir := t.TempDir()
	target := dir + "/new/dir/file.bin"
	data := bytes.Repeat([]byte("0123456789abcdef"), 100000) // 1.6 MB

	res := a.do(t, http.MethodPost, "/files", url.Values{"path": {target}}, "application/octet-stream", bytes.NewReader(data))
	var up []uploaded
	if err := json.NewDecoder(res.Body).Decode(&up); err != nil || res.StatusCode != 200 || len(up) != 1 || up[0].Path != target || up[0].Type != "file" {
		t.Fatalf("upload: %d %v %v", res.StatusCode, up, err)
	}
	if got, _ := os.ReadFile(target); !bytes.Equal(got, data) {
		t.Fatalf("file holds %d bytes, want %d", len(got), len(data))
	}
	res = a.do(t, http.MethodGet, "/files", url.Values{"path": {target}}, "", nil)
	got, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !bytes.Equal(got, data) {
		t.Fatalf("download: %d, %d bytes", res.StatusCode, len(got))
	}
	res = a.do(t, http.MethodGet, "/files", url.Values{"path": {target}}, "", nil, "Range", "bytes=16-31")
	if got, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusPartialContent || string(got) != "0123456789abcdef" {
		t.Fatalf("range: %d %q", res.StatusCode, got)
	}
	// gzip when asked (the transport would otherwise decompress silently).
	req, _ := http.NewRequest(http.MethodGet, a.url+"/files?"+url.Values{"path": {target}}.Encode(), nil)
	req.Header.Set(TokenHeader, testToken)
	req.Header.Set("Accept-Encoding", "gzip")
	gres, err := a.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer gres.Body.Close()
	zr, err := gzip.NewReader(gres.Body)
	if err != nil || gres.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip answer: %v %v", gres.Header, err)
	}
	if unz, _ := io.ReadAll(zr); !bytes.Equal(unz, data) {
		t.Fatalf("gunzipped %d bytes", len(unz))
	}

	// Multipart, several files named by their filenames.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, n := range []string{dir + "/m1.txt", dir + "/m2.txt"} {
		w, _ := mw.CreateFormFile("file", n)
		fmt.Fprint(w, "content of "+n)
	}
	mw.Close()
	res = a.do(t, http.MethodPost, "/files", nil, mw.FormDataContentType(), &body)
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("multipart: %d %s", res.StatusCode, b)
	}
	for _, n := range []string{dir + "/m1.txt", dir + "/m2.txt"} {
		if got, _ := os.ReadFile(n); string(got) != "content of "+n {
			t.Errorf("%s holds %q", n, got)
		}
	}

	for name, c := range map[string]struct {
		method string
		path   string
		status int
	}{
		"download missing":    {http.MethodGet, dir + "/missing", 404},
		"download a dir":      {http.MethodGet, dir, 400},
		"upload onto a dir":   {http.MethodPost, dir, 400},
		"parent is a file":    {http.MethodPost, target + "/x", 400},
		"path too long":       {http.MethodGet, "/" + strings.Repeat("y", 5000), 400},
		"upload without path": {http.MethodPost, "", 400},
	} {
		q := url.Values{}
		if c.path != "" {
			q.Set("path", c.path)
		}
		res := a.do(t, c.method, "/files", q, "application/octet-stream", strings.NewReader("x"))
		var e struct {
			Message string
			Code    int
		}
		_ = json.NewDecoder(res.Body).Decode(&e)
		if res.StatusCode != c.status || e.Code != c.status || e.Message == "" {
			t.Errorf("%s: %d %+v, want %d", name, res.StatusCode, e, c.status)
		}
	}
	// Device files and /proc files (whose size says 0) stream.
	res = a.do(t, http.MethodGet, "/files", url.Values{"path": {"/dev/null"}}, "", nil)
	if res.StatusCode != 200 {
		t.Errorf("/dev/null: %d", res.StatusCode)
	}
	parent := fmt.Sprintf("/proc/%d/status", os.Getppid())
	res = a.do(t, http.MethodGet, "/files", url.Values{"path": {parent}}, "", nil)
	if b, _ := io.ReadAll(res.Body); res.StatusCode != 200 || !bytes.Contains(b, []byte("Pid:")) {
		t.Errorf("%s: %d %q", parent, res.StatusCode, b)
	}
	// The agent's own /proc entry (its environment holds its token) is
	// refused, naming the path: the caller meant one of its processes.
	for _, p := range []string{"/proc/self/environ", "/proc/thread-self/status", fmt.Sprintf("/proc/%d/environ", os.Getpid())} {
		res = a.do(t, http.MethodGet, "/files", url.Values{"path": {p}}, "", nil)
		if b, _ := io.ReadAll(res.Body); res.StatusCode != 400 || !bytes.Contains(b, []byte(p)) {
			t.Errorf("%s: %d %q, want 400 naming it", p, res.StatusCode, b)
		}
	}
}

// TestCutShortUploadLeavesNothing: a body that ends before its declared
// length leaves neither the file nor a temporary one.
func TestCutShortUploadLeavesNothing(t *testing.T) {
	a := startAgent(t)
	dir := t.TempDir()
	u, _ := url.Parse(a.url)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /files?path=%s HTTP/1.1\r\nHost: x\r\n%s: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n%s",
		url.QueryEscape(dir+"/cut"), TokenHeader, testToken, strings.Repeat("z", 1000))
	eventually(t, 5*time.Second, func() error {
		es, _ := os.ReadDir(dir)
		if len(es) == 0 {
			return fmt.Errorf("the upload has not begun")
		}
		return nil
	})
	conn.Close()
	eventually(t, 5*time.Second, func() error {
		es, _ := os.ReadDir(dir)
		if len(es) > 0 {
			return fmt.Errorf("left behind: %s", es[0].Name())
		}
		return nil
	})
}

func TestWrongTokenIsRefused(t *testing.T) {
	a := startAgent(t)
	for _, token := range []string{"", "wrong", testToken + "x", testToken[:len(testToken)-1]} {
		req, _ := http.NewRequest(http.MethodGet, a.url+"/files?path=/etc/hostname", nil)
		if token != "" {
			req.Header.Set(TokenHeader, token)
		}
		res, err := a.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: /files answered %d", token, res.StatusCode)
		}
		c := processconnect.NewProcessClient(a.hc, a.url, connect.WithInterceptors(tokenInterceptor(token)))
		if _, err := c.List(testCtx(t), connect.NewRequest(&process.ListRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("token %q: List answered %v", token, err)
		}
		st, err := c.Start(testCtx(t), startReq("", false, "true"))
		if err == nil {
			for st.Receive() {
				t.Errorf("token %q: Start sent an event", token)
			}
			err = st.Err()
		}
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("token %q: Start answered %v", token, err)
		}
	}
	// /health needs no token; /envs does, and answers with it.
	res, err := a.hc.Get(a.url + "/health")
	if err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("health: %v %v", res, err)
	}
	res = a.do(t, http.MethodGet, "/envs", nil, "", nil)
	var envs map[string]string
	if err := json.NewDecoder(res.Body).Decode(&envs); err != nil || envs["PATH"] == "" {
		t.Fatalf("envs: %v %v", envs, err)
	}
}

// A named pipe is refused at once (opening one for reading would wait for
// a writer, holding an agent thread past the request for good), and a
// device that never ends is read only while the request lasts.
func TestSpecialFilesNeverHoldTheAgent(t *testing.T) {
	a := startAgent(t)
	fifo := t.TempDir() + "/pipe"
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"/files?"+url.Values{"path": {fifo}}.Encode(), nil)
	req.Header.Set(TokenHeader, testToken)
	res, err := a.hc.Do(req)
	if err != nil {
		t.Fatalf("GET of a FIFO: %v (the agent held the request)", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "named pipe") {
		t.Fatalf("GET of a FIFO: %d %s, want 400 saying it is a named pipe", res.StatusCode, body)
	}
	// /dev/zero never ends: the client stops reading and leaves; the
	// agent's handler returns (its server closes with no request left).
	ctx2, cancel2 := context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx2, http.MethodGet, a.url+"/files?"+url.Values{"path": {"/dev/zero"}}.Encode(), nil)
	req.Header.Set(TokenHeader, testToken)
	res, err = a.hc.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET of /dev/zero: %v %v", res, err)
	}
	if n, _ := io.CopyN(io.Discard, res.Body, 1<<20); n != 1<<20 {
		t.Fatalf("read %d bytes of /dev/zero", n)
	}
	cancel2()
	res.Body.Close()
}
