package events

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// A delivery is refused on the address actually dialled: a target that
// resolved to a public address at registration and now resolves to
// loopback (DNS changed) gets no packet. The receiver here is on
// 127.0.0.1: the connection must never reach it.
func TestDeliveryRefusesDeniedAddressAtConnect(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	d := newDispatcher(nil, DeliveryConfig{}, slog.Default(), time.Now)
	wh := &store.Webhook{ID: "wh", URL: srv.URL, Secret: "s"}
	a := d.post(context.Background(), wh, &store.Delivery{ID: "d", Body: []byte("{}")})
	if a.err == nil || !strings.Contains(a.err.Error(), "loopback") || a.class != classTransport || hits.Load() != 0 {
		t.Fatalf("delivery to 127.0.0.1: err %v (%s), receiver hit %d times", a.err, a.class, hits.Load())
	}
	// The operator's opt-in lets it through.
	d = newDispatcher(nil, DeliveryConfig{AllowPrivate: true}, slog.Default(), time.Now)
	if a := d.post(context.Background(), wh, &store.Delivery{ID: "d", Body: []byte("{}")}); a.err != nil || a.status != 200 || hits.Load() != 1 {
		t.Fatalf("allowed delivery: %v (%d), hits %d", a.err, a.status, hits.Load())
	}
}

// The addresses are classified, never contacted: no packet leaves the test.
func TestDeniedAddresses(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "::1", "169.254.169.254", "fe80::1", "10.0.0.1", "172.16.0.1", "192.168.1.1", "100.64.0.1",
		"0.0.0.0", "::", "224.0.0.1", "::ffff:127.0.0.1", "fd00::1",
		// IANA's special-purpose ranges (issue 34): seen allowed before.
		"0.1.2.3", "198.18.0.1", "198.19.255.254", "192.0.0.8", "192.0.2.1", "203.0.113.9", "240.0.0.1", "255.255.255.255",
		"64:ff9b::a00:1", "64:ff9b:1::1", "2002:a00:1::1", "2001::1", "2001:db8::1", "100::1", "::10.0.0.1"} {
		if deniedAddr(mustAddr(t, a)) == "" {
			t.Errorf("%s is allowed", a)
		}
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "2606:4700::1111"} {
		if why := deniedAddr(mustAddr(t, a)); why != "" {
			t.Errorf("%s is denied: %s", a, why)
		}
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// An attempt keeps the start of the receiver's answer as text the
// databases store (valid UTF-8, no NUL: PostgreSQL's text refuses it),
// with its status and E2B's error class.
func TestAttemptKeepsTheAnswerAsText(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("a\x00b\xffc" + strings.Repeat("x", 4096)))
	}))
	defer srv.Close()
	d := newDispatcher(nil, DeliveryConfig{AllowPrivate: true}, slog.Default(), time.Now)
	a := d.post(context.Background(), &store.Webhook{ID: "wh", URL: srv.URL, Secret: "s"}, &store.Delivery{ID: "d", Body: []byte("{}")})
	if a.status != 502 || a.class != classHTTP || a.err == nil || !strings.HasPrefix(a.answer, "ab\ufffdc") ||
		strings.ContainsRune(a.answer, 0) || len(a.answer) > answerKept+2 {
		t.Fatalf("attempt: %d %s %v %q", a.status, a.class, a.err, a.answer[:min(len(a.answer), 16)])
	}
}
