package events

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// checkFields refuses, with a 400 naming the field, what neither webhook
// route (the native one and /e2b's, which share apply) stores: a name with
// control characters (a NUL, a newline: they break logs and the pages that
// show it), an event type listed twice (the list is a set; 10,000 copies
// of one type would be stored and checked on every event), and a URL whose
// port is not a TCP port (url.Parse takes any digits).
func checkFields(b *WebhookBody) error {
	if b.Name != nil && strings.ContainsFunc(*b.Name, unicode.IsControl) {
		return httpx.Invalid("name", "must not contain control characters (NUL, tab, newline)")
	}
	if b.Events != nil {
		seen := make(map[string]bool, len(*b.Events))
		for _, t := range *b.Events {
			if seen[t] {
				return httpx.Invalid("events", fmt.Sprintf("lists %q more than once; list each event type once", t))
			}
			seen[t] = true
		}
	}
	if b.Url != nil {
		if u, err := url.Parse(*b.Url); err == nil && u.Port() != "" {
			if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
				return httpx.Invalid("url", fmt.Sprintf("has port %s; a port is between 1 and 65535", u.Port()))
			}
		}
	}
	return nil
}
