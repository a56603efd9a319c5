package app

import (
	"strings"
	"testing"
)

// Both webhook routes (the native one and /e2b's) refuse the same bad
// fields with a 400 naming the field: a URL port past 65535, a NUL in the
// name, an event type listed 10,000 times.
func TestWebhookFieldsRefusedAlikeOnBothRoutes(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, func(c *Config) { c.Webhooks.AllowPrivate = true })
	dup := make([]string, 10000)
	for i := range dup {
		dup[i] = "sandbox.lifecycle.killed"
	}
	good := func() map[string]any {
		return map[string]any{"name": "hook", "url": "http://127.0.0.1:8080/hook", "enabled": true,
			"events": []string{"sandbox.lifecycle.killed"}, "signatureSecret": strings.Repeat("s", 32)}
	}
	for _, c := range []struct {
		field string
		value any
	}{
		{"url", "http://127.0.0.1:99999/hook"},
		{"name", "a\x00b"},
		{"events", dup},
	} {
		for _, route := range []string{"/events/webhooks", "/e2b/events/webhooks"} {
			body := good()
			body[c.field] = c.value
			r := ta.req("POST", route, body)
			m := r.json(t)
			msg, _ := m["detail"].(string) // the native error; /e2b answers E2B's {code, message}
			if e2b, ok := m["message"].(string); ok {
				msg = e2b
			}
			if r.code != 400 || !strings.HasPrefix(msg, c.field+": ") {
				t.Errorf("POST %s with a bad %s: %d %.300s, want a 400 naming %s", route, c.field, r.code, r.body, c.field)
			}
		}
	}
	for _, route := range []string{"/events/webhooks", "/e2b/events/webhooks"} {
		if r := ta.req("POST", route, good()); r.code != 201 {
			t.Errorf("POST %s of a good webhook: %d %s", route, r.code, r.body)
		}
	}
}
