package envd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/envd"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

// These tests do not run in parallel: TestHostileMessageLengthIsRefused
// measures the process's allocations, and the agent here allocates in it.

// seen is what the agent received of each /files request.
type seen struct {
	method, contentType, acceptEncoding, rng string
	contentLength                            int64
}

// agentClient serves a real agent behind a recorder of its /files requests
// and returns a client of it as the Docker provider makes one, the
// requests seen, and how many of them the agent has finished.
func agentClient(t *testing.T) (*envd.Client, func() []seen, func() int) {
	t.Helper()
	a := agent.New(agent.Config{Token: "tok"}, agent.NewReaper(false))
	var mu sync.Mutex
	var log []seen
	var done int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/files" {
			a.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		log = append(log, seen{r.Method, r.Header.Get("Content-Type"), r.Header.Get("Accept-Encoding"), r.Header.Get("Range"), r.ContentLength})
		mu.Unlock()
		a.ServeHTTP(w, r)
		mu.Lock()
		done++
		mu.Unlock()
	}))
	t.Cleanup(func() { srv.Close(); a.Close() })
	c := &envd.Client{HTTP: srv.Client(), URL: srv.URL, Token: "tok", Name: "sandbox test", Daemon: "the sandbox agent", Agent: true}
	return c, func() []seen { mu.Lock(); defer mu.Unlock(); return append([]seen(nil), log...) },
		func() int { mu.Lock(); defer mu.Unlock(); return done }
}

// smallReads hands out at most 1000 bytes per Read, as a slow client does.
type smallReads struct{ r io.Reader }

func (s smallReads) Read(b []byte) (int, error) { return s.r.Read(b[:min(len(b), 1000)]) }

// To the agent a file goes as the raw body (its length announced when
// known, chunked when not) and comes back unencoded, a range of it served
// by the agent from the offset: the bytes are the same either way.
func TestAgentFileTransferIsRawAndRanged(t *testing.T) {
	c, log, _ := agentClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := make([]byte, 3<<20+7)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(data)
	dir := t.TempDir()
	for _, size := range []int64{int64(len(data)), -1} {
		name := filepath.Join(dir, "f"+strconv.FormatInt(size, 10))
		if err := c.CreateFile(ctx, name, smallReads{bytes.NewReader(data)}, size); err != nil {
			t.Fatalf("CreateFile (size %d): %v", size, err)
		}
		if got, _ := os.ReadFile(name); !bytes.Equal(got, data) {
			t.Fatalf("size %d: the file holds %d bytes, not the %d sent", size, len(got), len(data))
		}
		l := log()
		last := l[len(l)-1]
		if last.method != "POST" || last.contentType != "application/octet-stream" {
			t.Errorf("size %d: upload sent as %s %q, want POST application/octet-stream", size, last.method, last.contentType)
		}
		if size > 0 && last.contentLength != size {
			t.Errorf("size %d: Content-Length %d", size, last.contentLength)
		}
	}
	name := filepath.Join(dir, "f"+strconv.Itoa(len(data)))
	for _, tc := range []struct {
		offset, length int64
		rng            string
	}{
		{0, -1, ""},
		{1000, 5000, "bytes=1000-"},
		{int64(len(data)) - 3, -1, "bytes=" + strconv.Itoa(len(data)-3) + "-"},
		{int64(len(data)), -1, ""}, // at the end: nothing to ask a range of
		{int64(len(data)) + 10, -1, ""},
	} {
		rc, info, err := c.OpenFile(ctx, name, tc.offset, tc.length)
		if err != nil {
			t.Fatalf("OpenFile(%d, %d): %v", tc.offset, tc.length, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		want := data[min(tc.offset, int64(len(data))):]
		if tc.length >= 0 {
			want = want[:tc.length]
		}
		if err != nil || !bytes.Equal(got, want) || info.Size != int64(len(data)) {
			t.Errorf("OpenFile(%d, %d): %d bytes (err %v, size %d), want %d", tc.offset, tc.length, len(got), err, info.Size, len(want))
		}
		l := log()
		last := l[len(l)-1]
		if last.method != "GET" || last.acceptEncoding != "identity" || last.rng != tc.rng {
			t.Errorf("OpenFile(%d): sent %s Accept-Encoding %q Range %q, want GET identity %q", tc.offset, last.method, last.acceptEncoding, last.rng, tc.rng)
		}
	}
}

// failing yields n bytes, then err.
type failing struct {
	n   int
	err error
}

func (f *failing) Read(b []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	k := min(len(b), f.n)
	clear(b[:k])
	f.n -= k
	return k, nil
}

// An upload whose source fails part way (a client's body cut short)
// is an error and leaves neither the file nor a temporary one, whether
// its length was announced or not.
func TestAgentFileUploadCutShortLeavesNothing(t *testing.T) {
	c, _, finished := agentClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, size := range []int64{4 << 20, -1} {
		dir := t.TempDir()
		err := c.CreateFile(ctx, filepath.Join(dir, "cut"), &failing{n: 2<<20 + 5, err: io.ErrUnexpectedEOF}, size)
		if err == nil {
			t.Errorf("size %d: a body cut short was taken", size)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("size %d: %v", size, err)
		}
		poll.Until(t, 10*time.Second, 10*time.Millisecond, func() error {
			if finished() < i+1 {
				return fmt.Errorf("size %d: the agent has not finished the upload", size)
			}
			if es, _ := os.ReadDir(dir); len(es) > 0 {
				return fmt.Errorf("size %d: left behind: %s", size, es[0].Name())
			}
			return nil
		})
	}
}
