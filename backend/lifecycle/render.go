package lifecycle

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// renderCache keeps the JSON of the last version of each record's view, so
// clients polling an unchanged sandbox cost a map lookup instead of a render.
// A new version (any committed change) renders again.
type renderCache struct {
	mu      sync.Mutex
	byID    map[string]rendered
	maxSize int
}

type rendered struct {
	version int64
	base    string
	body    []byte
}

func (c *renderCache) get(r *store.Record, base string) []byte {
	c.mu.Lock()
	e, ok := c.byID[r.ID]
	c.mu.Unlock()
	if ok && e.version == r.Version && e.base == base {
		return e.body
	}
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(view(r, base))
	body := buf.Bytes()
	c.mu.Lock()
	if c.byID == nil {
		c.byID = map[string]rendered{}
	}
	if len(c.byID) >= c.maxSize {
		for id := range c.byID { // evict an arbitrary entry
			delete(c.byID, id)
			break
		}
	}
	c.byID[r.ID] = rendered{version: r.Version, base: base, body: body}
	c.mu.Unlock()
	return body
}
