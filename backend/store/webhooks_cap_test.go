package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Creates racing each other never pass an org's webhook cap: the count
// and the insert are one transaction, serialised per org. Seen failing on
// PostgreSQL without the per-org lock (READ COMMITTED: each transaction
// counted the others' uncommitted inserts out): "10 webhooks after 24
// concurrent creates, the cap is 3".
func TestAddWebhookCapUnderRace(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		org, _, err := db.EnsureOrg(ctx, "o1", 0)
		if err != nil {
			t.Fatal(err)
		}
		other, _, err := db.EnsureOrg(ctx, "o2", 0)
		if err != nil {
			t.Fatal(err)
		}
		const max, tries = 3, 24
		var wg sync.WaitGroup
		errs := make(chan error, 2*tries)
		for i := range tries {
			for _, o := range []string{org.ID, other.ID} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- db.AddWebhook(ctx, &Webhook{ID: fmt.Sprintf("wh-%s-%d", o, i), OrgID: o, URL: "http://x", Enabled: true, Secret: "s", CreatedAt: time.Now()}, max)
				}()
			}
		}
		wg.Wait()
		close(errs)
		refused := 0
		for err := range errs {
			var limit *ErrWebhookLimit
			switch {
			case errors.As(err, &limit):
				refused++
				if limit.Have < max {
					t.Errorf("refused with %d webhooks, under the cap of %d", limit.Have, max)
				}
			case err != nil:
				t.Fatal(err)
			}
		}
		for _, o := range []string{org.ID, other.ID} {
			have, err := db.ListWebhooks(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(have) != max {
				t.Errorf("org %s: %d webhooks after %d concurrent creates, the cap is %d", o, len(have), tries, max)
			}
		}
		if refused != 2*(tries-max) {
			t.Errorf("%d creates refused, want %d", refused, 2*(tries-max))
		}
	})
}
