package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// A client that cancels its request is neither an error in the log nor a
// 5xx in /metrics: it is counted as code="499".
func TestCanceledClientIsNotAServerError(t *testing.T) {
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	defer slog.SetDefault(prev)

	entered := make(chan struct{})
	h := NewHandler(Config{Logger: slog.Default(), AdminKey: "operator", Public: []Registrar{func(r *mux.Router) {
		r.Handle("/slow", httpx.Handler(func(w http.ResponseWriter, r *http.Request) error {
			close(entered)
			<-r.Context().Done()
			// What a database or engine call returns when its context ends.
			return errors.Join(errors.New("reading the record"), r.Context().Err())
		})).Methods(http.MethodGet)
	}}})
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/slow", nil)
	failed := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		failed <- err
	}()
	<-entered
	cancel()
	if err := <-failed; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client's request ended with %v, want its cancellation", err)
	}

	var metrics string
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(metrics, `route="/slow"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the canceled request was never counted:\n%s", metrics)
		}
		time.Sleep(10 * time.Millisecond) // the server counts it when its handler returns
		mreq, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		mreq.Header.Set("Authorization", "Bearer operator")
		res, err := http.DefaultClient.Do(mreq)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		metrics = string(b)
	}
	if !strings.Contains(metrics, `dreadnode_http_requests_total{code="499",method="GET",route="/slow"} 1`) {
		t.Errorf("the canceled request is not counted as code=\"499\":\n%s", grepLines(metrics, "/slow"))
	}
	if strings.Contains(grepLines(metrics, "/slow"), `code="5`) {
		t.Errorf("the canceled request is counted as a 5xx:\n%s", grepLines(metrics, "/slow"))
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the cancellation was logged as an error:\n%s", logs.String())
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
