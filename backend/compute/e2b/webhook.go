package e2b

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2bevents"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// E2B's lifecycle webhooks (https://e2b.dev/docs/sandbox/lifecycle-events-webhooks):
// with Config.WebhookURL set, RegisterWebhook subscribes that URL to the
// killed and paused events of the team, and CallbackHandler serves it. An
// event is only a wake-up: it names a sandbox, Watch hands its record to the
// reconciler, and the reconciler reads the sandbox from E2B's API as its
// periodic observation would (so even a forged event, were the signature
// broken, could not make a record say anything E2B does not).

// webhookEvents are the event types the backend subscribes to.
var webhookEvents = []string{"sandbox.lifecycle.killed", "sandbox.lifecycle.paused"}

// Callback bounds.
const (
	maxCallbackBody = 64 << 10 // an E2B event is well under 4 KiB
	seenDeliveries  = 4096     // delivery ids remembered against replays
	eventBuffer     = 256      // events waiting for the reconciler; beyond, polling catches up
)

// hooks is the webhook state of a Provider.
type hooks struct {
	secret string
	events chan compute.Event
	mu     sync.Mutex
	seen   map[string]bool
	order  []string // seen's ids, oldest first
}

func newHooks(cfg Config) *hooks {
	if cfg.WebhookURL == "" {
		return nil
	}
	return &hooks{secret: WebhookSecret(cfg), events: make(chan compute.Event, eventBuffer), seen: map[string]bool{}}
}

// WebhookSecret is the signature secret: derived (HMAC-SHA256) from
// E2B_WEBHOOK_SECRET when set, else from the E2B API key, and the URL. Every
// replica derives the same one, so none needs to store it, and a replica
// that starts later reuses the registration the first one made.
func WebhookSecret(cfg Config) string {
	root := cfg.WebhookSecret
	if root == "" {
		root = cfg.APIKey
	}
	m := hmac.New(sha256.New, []byte(root))
	m.Write([]byte("dreadnode e2b lifecycle webhook\x00" + cfg.WebhookURL))
	return hex.EncodeToString(m.Sum(nil))
}

// webhookName names our registration; its suffix fingerprints the secret,
// so a registration made with another secret (a rotated key) is replaced
// rather than reused (E2B never shows a secret again).
func (p *Provider) webhookName() string {
	sum := sha256.Sum256([]byte("fingerprint\x00" + p.hooks.secret))
	return "dreadnode-backend " + hex.EncodeToString(sum[:4])
}

// RegisterWebhook makes sure E2B delivers killed and paused events to
// Config.WebhookURL, signed with our secret: it reuses a registration of
// that URL made with the same secret (enabling it and setting its events if
// needed), replaces one made with another secret, and creates one
// otherwise. It is a no-op without a WebhookURL.
func (p *Provider) RegisterWebhook(ctx context.Context) error {
	if p.hooks == nil {
		return nil
	}
	var list []e2bevents.WebhookDetail
	if _, err := p.do(ctx, &call{op: "list webhooks", method: http.MethodGet, path: "/events/webhooks",
		ok: []int{http.StatusOK}, out: &list}); err != nil {
		return err
	}
	name := p.webhookName()
	for _, w := range list {
		if w.Url != p.cfg.WebhookURL {
			continue
		}
		if w.Name == name {
			if w.Enabled && sameSet(w.Events, webhookEvents) {
				return nil
			}
			enabled := true
			_, err := p.do(ctx, &call{op: "update webhook", method: http.MethodPatch, path: "/events/webhooks/" + url.PathEscape(w.Id),
				body: e2bevents.WebhookConfiguration{Enabled: &enabled, Events: webhookEvents}, ok: []int{http.StatusOK, http.StatusNoContent}})
			return err
		}
		if _, err := p.do(ctx, &call{op: "delete webhook", method: http.MethodDelete, path: "/events/webhooks/" + url.PathEscape(w.Id),
			ok: []int{http.StatusOK, http.StatusNoContent, http.StatusNotFound}}); err != nil {
			return err
		}
	}
	enabled := true
	_, err := p.do(ctx, &call{op: "register webhook", method: http.MethodPost, path: "/events/webhooks",
		body: e2bevents.WebhookCreate{Name: name, Url: p.cfg.WebhookURL, Enabled: &enabled, Events: webhookEvents,
			SignatureSecret: p.hooks.secret},
		ok: []int{http.StatusOK, http.StatusCreated}})
	return err
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// WebhookPath is the path of Config.WebhookURL ("" without one): the route
// CallbackHandler is served at.
func (p *Provider) WebhookPath() string {
	if p.hooks == nil {
		return ""
	}
	u, _ := url.Parse(p.cfg.WebhookURL) // checked by New
	return u.EscapedPath()
}

// Watch implements compute.Watcher: the records of our sandboxes E2B said
// were killed or paused (without a WebhookURL, none), and of those whose
// main command ended (main.go). The channel closes when ctx ends.
func (p *Provider) Watch(ctx context.Context) <-chan compute.Event {
	out := make(chan compute.Event)
	var in chan compute.Event // nil (never ready) without a WebhookURL
	if p.hooks != nil {
		in = p.hooks.events
	}
	go func() {
		defer close(out)
		for {
			var ev compute.Event
			select {
			case <-ctx.Done():
				return
			case ev = <-in:
			case ev = <-p.mains.events:
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// CallbackHandler serves E2B's deliveries. It is public (E2B has no API
// key of ours): a request is accepted only with a valid e2b-signature
// (compared in constant time), a body of at most 64 KiB, and a delivery id
// not seen before (a replay is answered 200 and ignored).
func (p *Provider) CallbackHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.hooks == nil {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCallbackBody))
		if err != nil {
			callbackError(w, http.StatusRequestEntityTooLarge, "body: an E2B lifecycle event is at most 64 KiB")
			return
		}
		if v := r.Header.Get("e2b-signature-version"); v != "" && v != "v1" {
			callbackError(w, http.StatusUnauthorized, "e2b-signature-version: only v1 is understood")
			return
		}
		want := signature(p.hooks.secret, body)
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("e2b-signature")), []byte(want)) != 1 {
			callbackError(w, http.StatusUnauthorized, "e2b-signature: does not match the body signed with this backend's webhook secret")
			return
		}
		delivery := r.Header.Get("e2b-delivery-id")
		if delivery == "" {
			callbackError(w, http.StatusBadRequest, "e2b-delivery-id: required")
			return
		}
		if !p.hooks.first(delivery) {
			w.WriteHeader(http.StatusOK) // a replay or a retry: already applied
			return
		}
		var ev e2bevents.SandboxEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			callbackError(w, http.StatusBadRequest, "body: not an E2B lifecycle event: "+err.Error())
			return
		}
		var meta map[string]string
		if ev.EventData != nil {
			meta = ev.EventData.SandboxMetadata
		}
		if rec := meta[compute.LabelRecord]; slices.Contains(webhookEvents, ev.Type) && rec != "" && p.ours(meta) {
			status := compute.StatusPaused
			if ev.Type == webhookEvents[0] {
				status = compute.StatusExited
			}
			select {
			case p.hooks.events <- compute.Event{RecordID: rec, Ref: compute.Ref{ID: ev.SandboxId}, Status: status}:
			default: // the reconciler is behind: its next observation finds the change
			}
		}
		w.WriteHeader(http.StatusOK)
	})
}

// first records a delivery id, reporting whether it is new. The oldest ids
// are forgotten beyond seenDeliveries (E2B retries within 30 s).
func (h *hooks) first(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen[id] {
		return false
	}
	h.seen[id] = true
	h.order = append(h.order, id)
	if len(h.order) > seenDeliveries {
		delete(h.seen, h.order[0])
		h.order = h.order[1:]
	}
	return true
}

// signature is E2B's e2b-signature v1: base64 of SHA-256(secret ‖ body)
// without padding.
func signature(secret string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(secret))
	h.Write(body)
	return strings.TrimRight(base64.StdEncoding.EncodeToString(h.Sum(nil)), "=")
}

func callbackError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// checkWebhookURL validates Config.WebhookURL.
func checkWebhookURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("e2b: E2B_WEBHOOK_URL %q is not an http(s) URL (the backend's public base URL followed by a path, e.g. https://sandboxes.example.com/callbacks/e2b/lifecycle)", raw)
	}
	if u.Path == "" || u.Path == "/" {
		return errors.New("e2b: E2B_WEBHOOK_URL needs a path the backend serves the callback at, e.g. /callbacks/e2b/lifecycle")
	}
	return nil
}
