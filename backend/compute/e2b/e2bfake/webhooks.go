package e2bfake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2bevents"
)

// E2B's webhook API (https://e2b.dev/docs/sandbox/lifecycle-events-webhooks)
// is documented on E2B's site but absent from openapi.yml, so the fake
// checks these requests by hand: the API key, the documented fields only
// (an unknown key is a violation, as strictFields makes it elsewhere), and
// a signatureSecret on registration.

// RouteWebhooks is the route key of every /events/webhooks request (Count,
// Requests).
const RouteWebhooks = "/events/webhooks"

// WebhookEvent types the fake sends.
const (
	EventKilled = "sandbox.lifecycle.killed"
	EventPaused = "sandbox.lifecycle.paused"
)

// webhookRetryDelay is the wait between the 3 attempts of a delivery
// (E2B waits 10 s; a test cannot).
const webhookRetryDelay = 100 * time.Millisecond

// webhook is a registration: E2B's WebhookDetail, and the secret E2B never
// shows again.
type webhook struct {
	e2bevents.WebhookDetail
	secret string
}

// WebhookDelivery is one attempt the fake made to deliver an event.
type WebhookDelivery struct {
	WebhookID, DeliveryID, URL string
	Header                     http.Header
	Body                       []byte
	Status                     int // 0 when the request failed
}

// Deliveries returns every delivery attempt so far.
func (s *Server) Deliveries() []WebhookDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deliveries)
}

// Webhooks returns the registered webhooks' URLs.
func (s *Server) Webhooks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, w := range s.webhooks {
		out = append(out, w.Url)
	}
	return out
}

func (s *Server) serveWebhooks(w http.ResponseWriter, r *http.Request, body []byte) {
	rec := &statusRecorder{ResponseWriter: w}
	defer func() { s.record(RouteWebhooks, r, rec.status) }()
	if r.Header.Get("X-API-Key") != s.APIKey {
		writeError(rec, http.StatusUnauthorized, "Invalid API key", "")
		return
	}
	id := strings.Trim(strings.TrimPrefix(r.URL.Path, RouteWebhooks), "/")
	// WebhookConfiguration: WebhookCreate's fields, all optional (the
	// POST's required ones are checked below).
	var b e2bevents.WebhookConfiguration
	if len(body) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			s.violation("webhooks: %s %s: body: %v", r.Method, r.URL.Path, err)
			writeError(rec, http.StatusBadRequest, "invalid body: "+err.Error(), "")
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	wh := s.webhooks[id]
	if id != "" && wh == nil {
		writeError(rec, http.StatusNotFound, fmt.Sprintf("webhook %q not found", id), "")
		return
	}
	switch {
	case id == "" && r.Method == http.MethodPost:
		if b.Url == nil || b.SignatureSecret == nil || *b.Url == "" || *b.SignatureSecret == "" {
			s.violation("webhooks: POST without url or signatureSecret")
			writeError(rec, http.StatusBadRequest, "url and signatureSecret are required", "")
			return
		}
		wh = &webhook{WebhookDetail: e2bevents.WebhookDetail{Id: "wh_" + randomID(12), TeamId: "team_fake", Enabled: true,
			CreatedAt: s.now().UTC(), Events: []string{}}}
		applyWebhook(wh, &b)
		s.webhooks[wh.Id] = wh
		writeJSON(rec, http.StatusCreated, wh)
	case id == "" && r.Method == http.MethodGet:
		out := []*webhook{}
		for _, w := range s.webhooks {
			out = append(out, w)
		}
		slices.SortFunc(out, func(a, b *webhook) int { return a.CreatedAt.Compare(b.CreatedAt) })
		writeJSON(rec, http.StatusOK, out)
	case id != "" && r.Method == http.MethodGet:
		writeJSON(rec, http.StatusOK, wh)
	case id != "" && r.Method == http.MethodPatch:
		applyWebhook(wh, &b)
		writeJSON(rec, http.StatusOK, wh)
	case id != "" && r.Method == http.MethodDelete:
		delete(s.webhooks, id)
		rec.WriteHeader(http.StatusNoContent)
	default:
		writeError(rec, http.StatusMethodNotAllowed, "method not allowed", "")
	}
}

func applyWebhook(wh *webhook, b *e2bevents.WebhookConfiguration) {
	if b.Name != nil {
		wh.Name = *b.Name
	}
	if b.Url != nil {
		wh.Url = *b.Url
	}
	if b.Enabled != nil {
		wh.Enabled = *b.Enabled
	}
	if b.Events != nil {
		wh.Events = slices.Clone(b.Events)
	}
	if b.SignatureSecret != nil {
		wh.secret = *b.SignatureSecret
	}
}

// emitLocked sends typ about sb to every enabled webhook subscribed to it,
// in the background: up to 3 attempts, webhookRetryDelay apart.
func (s *Server) emitLocked(sb *sandbox, typ string) {
	now := s.now().UTC()
	category, label := "lifecycle", typ[strings.LastIndex(typ, ".")+1:]
	p := e2bevents.SandboxEvent{Version: "v2", Id: randomID(16), Type: typ,
		EventCategory: &category, EventLabel: &label, //nolint:staticcheck // deprecated by E2B, still in its payloads
		SandboxBuildId: "build_" + sb.TemplateID, SandboxExecutionId: "exec_" + sb.ID,
		SandboxId: sb.ID, SandboxTeamId: "team_fake", SandboxTemplateId: sb.TemplateID, Timestamp: now,
		EventData: &e2bevents.SandboxEventData{SandboxMetadata: sb.Metadata, Execution: &e2bevents.SandboxExecution{StartedAt: sb.StartedAt,
			VcpuCount: sb.cpu, MemoryMb: sb.mem, ExecutionTime: now.Sub(sb.StartedAt).Milliseconds()}}}
	body, _ := json.Marshal(p)
	for _, wh := range s.webhooks {
		if !wh.Enabled || !slices.Contains(wh.Events, typ) {
			continue
		}
		s.sending.Add(1)
		go s.deliver(*wh, "dl_"+randomID(16), body)
	}
}

func (s *Server) deliver(wh webhook, deliveryID string, body []byte) {
	defer s.sending.Done()
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-s.stop:
				return
			case <-time.After(webhookRetryDelay):
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, wh.Url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("e2b-webhook-id", wh.Id)
		req.Header.Set("e2b-delivery-id", deliveryID)
		req.Header.Set("e2b-signature-version", "v1")
		req.Header.Set("e2b-signature", Sign(wh.secret, body))
		status := 0
		if res, err := http.DefaultClient.Do(req); err == nil {
			status = res.StatusCode
			_ = res.Body.Close()
		}
		cancel()
		s.mu.Lock()
		s.deliveries = append(s.deliveries, WebhookDelivery{WebhookID: wh.Id, DeliveryID: deliveryID, URL: wh.Url,
			Header: req.Header.Clone(), Body: body, Status: status})
		s.mu.Unlock()
		if status >= 200 && status < 300 {
			return
		}
	}
}

// Sign is E2B's e2b-signature (version v1) as E2B documents it: base64 of
// SHA-256(secret ‖ body), without the trailing "=" padding.
func Sign(secret string, body []byte) string {
	sum := sha256.Sum256(append([]byte(secret), body...))
	return strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
}
