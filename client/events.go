package client

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// Event is a lifecycle event (API §12), as listed and streamed.
type Event = apitypes.LifecycleEvent

// StreamEvents follows GET /events/stream (Server-Sent Events) from after
// the event lastID ("" = from now), calling fn for each event, until the
// stream ends, ctx ends or fn fails. It returns the id of the last event it
// passed to fn (to resume from) with the reason it stopped.
func (c *Client) StreamEvents(ctx context.Context, lastID string, types []string, sandboxID string, fn func(Event) error) (string, error) {
	q := url.Values{}
	if len(types) > 0 {
		q.Set("type", strings.Join(types, ","))
	}
	if sandboxID != "" {
		q.Set("sandboxId", sandboxID)
	}
	hdr := map[string]string{"Accept": "text/event-stream"}
	if lastID != "" {
		hdr["Last-Event-ID"] = lastID
	}
	resp, err := c.stream(ctx, http.MethodGet, "/events/stream", q, hdr, nil)
	if err != nil {
		return lastID, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		case line == "" && data != "":
			var ev Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return lastID, err
			}
			data = ""
			if err := fn(ev); err != nil {
				return lastID, err
			}
			lastID = ev.Id
		}
	}
	if ctx.Err() != nil {
		return lastID, ctx.Err()
	}
	return lastID, sc.Err()
}
