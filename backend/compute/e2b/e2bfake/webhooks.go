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

type webhook struct {
	ID        string    `json:"id"`
	TeamID    string    `json:"teamId"`
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Enabled   bool      `json:"enabled"`
	Events    []string  `json:"events"`
	CreatedAt time.Time `json:"createdAt"`
	secret    string
}

type webhookBody struct {
	Name            *string   `json:"name"`
	URL             *string   `json:"url"`
	Enabled         *bool     `json:"enabled"`
	Events          *[]string `json:"events"`
	SignatureSecret *string   `json:"signatureSecret"`
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
		out = append(out, w.URL)
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
	var b webhookBody
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
		if b.URL == nil || b.SignatureSecret == nil || *b.URL == "" || *b.SignatureSecret == "" {
			s.violation("webhooks: POST without url or signatureSecret")
			writeError(rec, http.StatusBadRequest, "url and signatureSecret are required", "")
			return
		}
		wh = &webhook{ID: "wh_" + randomID(12), TeamID: "team_fake", Enabled: true, CreatedAt: s.now().UTC(), Events: []string{}}
		applyWebhook(wh, &b)
		s.webhooks[wh.ID] = wh
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

func applyWebhook(wh *webhook, b *webhookBody) {
	if b.Name != nil {
		wh.Name = *b.Name
	}
	if b.URL != nil {
		wh.URL = *b.URL
	}
	if b.Enabled != nil {
		wh.Enabled = *b.Enabled
	}
	if b.Events != nil {
		wh.Events = slices.Clone(*b.Events)
	}
	if b.SignatureSecret != nil {
		wh.secret = *b.SignatureSecret
	}
}

// lifecyclePayload is E2B's webhook payload.
type lifecyclePayload struct {
	Version           string    `json:"version"`
	ID                string    `json:"id"`
	Type              string    `json:"type"`
	EventCategory     string    `json:"eventCategory"`
	EventLabel        string    `json:"eventLabel"`
	EventData         eventData `json:"eventData"`
	SandboxBuildID    string    `json:"sandboxBuildId"`
	SandboxExecution  string    `json:"sandboxExecutionId"`
	SandboxID         string    `json:"sandboxId"`
	SandboxTeamID     string    `json:"sandboxTeamId"`
	SandboxTemplateID string    `json:"sandboxTemplateId"`
	Timestamp         time.Time `json:"timestamp"`
}

type eventData struct {
	SandboxMetadata map[string]string `json:"sandbox_metadata"`
	Execution       *execution        `json:"execution,omitempty"`
}

type execution struct {
	StartedAt     time.Time `json:"started_at"`
	VCPUCount     int       `json:"vcpu_count"`
	MemoryMB      int       `json:"memory_mb"`
	ExecutionTime int64     `json:"execution_time"` // milliseconds
}

// emitLocked sends typ about sb to every enabled webhook subscribed to it,
// in the background: up to 3 attempts, webhookRetryDelay apart.
func (s *Server) emitLocked(sb *sandbox, typ string) {
	now := s.now().UTC()
	p := lifecyclePayload{Version: "v2", ID: randomID(16), Type: typ, EventCategory: "lifecycle",
		EventLabel: typ[strings.LastIndex(typ, ".")+1:], SandboxBuildID: "build_" + sb.TemplateID, SandboxExecution: "exec_" + sb.ID,
		SandboxID: sb.ID, SandboxTeamID: "team_fake", SandboxTemplateID: sb.TemplateID, Timestamp: now,
		EventData: eventData{SandboxMetadata: sb.Metadata, Execution: &execution{StartedAt: sb.StartedAt, VCPUCount: sb.cpu,
			MemoryMB: sb.mem, ExecutionTime: now.Sub(sb.StartedAt).Milliseconds()}}}
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
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, wh.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("e2b-webhook-id", wh.ID)
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
		s.deliveries = append(s.deliveries, WebhookDelivery{WebhookID: wh.ID, DeliveryID: deliveryID, URL: wh.URL,
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
