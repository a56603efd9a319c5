package events

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// The dispatcher's loop: fan events out, claim due deliveries within the
// room each org has, start their attempts (waiting at most passWait for
// them), record the finished ones.

// run delivers until ctx ends, woken by new events and polling on a bound.
func (d *dispatcher) run(ctx context.Context) error {
	for {
		wake := d.db.EventsChanged()
		d.flush(ctx)
		busy := d.pass(ctx)
		if busy {
			continue
		}
		select {
		case <-ctx.Done():
			d.attempts.Wait() // cut short by ctx: recorded as canceled, retried
			d.flush(ctx)
			return nil
		case <-wake:
		case <-d.kick:
		case <-time.After(d.cfg.Poll):
		}
	}
}

// pass fans new events out and sends the due deliveries; it reports
// whether there may be more to do at once.
func (d *dispatcher) pass(ctx context.Context) bool {
	n, err := d.db.FanOut(ctx, d.now(), func(e *store.Event) []byte { b, _ := json.Marshal(View(e)); return b }, func() string { return "dlv_" + randomHex(16) })
	if err != nil && ctx.Err() == nil {
		d.log.Warn("webhooks: turning events into deliveries failed; retrying", "err", err)
	}
	limit, skip := d.room()
	if limit == 0 {
		return n > 0
	}
	due, err := d.db.ClaimDeliveries(ctx, d.owner, d.now(), d.cfg.ClaimHold, limit, skip...)
	if err != nil && ctx.Err() == nil {
		d.log.Warn("webhooks: claiming deliveries failed; retrying", "err", err)
	}
	hooks := map[string]*store.Webhook{} // read once per pass, not per delivery
	var over []string
	var mine sync.WaitGroup
	for _, dl := range due {
		wh, read := hooks[dl.WebhookID]
		if !read {
			var err error
			if wh, err = d.db.GetWebhookByID(ctx, dl.WebhookID); err != nil {
				wh = nil // deleted meanwhile (its deliveries went with it), or unreadable: the claim lapses, sent later
			}
			hooks[dl.WebhookID] = wh
		}
		if wh == nil {
			continue
		}
		if !d.start(wh.OrgID) {
			over = append(over, dl.ID) // the org's room filled within this batch
			continue
		}
		d.attempts.Add(1)
		mine.Add(1)
		go func() {
			defer d.attempts.Done()
			defer mine.Done()
			f := finished{store.Finished{Delivery: dl, Result: d.deliver(ctx, wh, dl)}, wh.OrgID}
			d.mu.Lock()
			d.done = append(d.done, f)
			if d.inFlight[f.org]--; d.inFlight[f.org] <= 0 {
				delete(d.inFlight, f.org)
			}
			d.total--
			d.mu.Unlock()
			select {
			case d.kick <- struct{}{}:
			default:
			}
		}()
	}
	if err := d.db.ReleaseClaims(context.WithoutCancel(ctx), d.owner, over); err != nil {
		d.log.Warn("webhooks: giving back claims failed; they lapse and are sent later", "err", err)
	}
	d.await(&mine)
	return n > 0 || len(due) == limit
}

// passWait bounds how long a pass waits for its own attempts: most finish
// within it and are recorded together, in one transaction (a pass per
// finished attempt cost SQLite's single writer 10× the webhook lag of
// make bench's events part); one still waiting on a slow receiver goes on
// alone and is recorded by a later pass.
const passWait = 50 * time.Millisecond

func (d *dispatcher) await(mine *sync.WaitGroup) {
	all := make(chan struct{})
	go func() { mine.Wait(); close(all) }()
	t := time.NewTimer(passWait)
	defer t.Stop()
	select {
	case <-all:
		select { // their kicks: the next pass records them anyway
		case <-d.kick:
		default:
		}
	case <-t.C:
	}
}

// room is how many deliveries the next claim may take and the orgs it
// skips (at InFlightPerOrg attempts under way).
func (d *dispatcher) room() (int, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var skip []string
	for org, n := range d.inFlight {
		if n >= d.cfg.InFlightPerOrg {
			skip = append(skip, org)
		}
	}
	return max(0, min(claimBatch, maxInFlight-d.total)), skip
}

// start counts an attempt for org, unless the org has no room left.
func (d *dispatcher) start(org string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inFlight[org] >= d.cfg.InFlightPerOrg {
		return false
	}
	d.inFlight[org]++
	d.total++
	return true
}

// flush records the attempts finished since the last flush, in one
// transaction.
func (d *dispatcher) flush(ctx context.Context) {
	d.mu.Lock()
	done := d.done
	d.done = nil
	d.mu.Unlock()
	if len(done) == 0 {
		return
	}
	fs := make([]store.Finished, len(done))
	for i, f := range done {
		fs[i] = f.Finished
	}
	if err := d.db.FinishDeliveries(context.WithoutCancel(ctx), d.owner, fs); err != nil && len(fs) > 1 {
		// One at a time, so one delivery's trouble cannot hold the others.
		for _, f := range fs {
			if err := d.db.FinishDelivery(context.WithoutCancel(ctx), f.Delivery, d.owner, f.Result); err != nil {
				d.log.Warn("webhooks: recording a delivery failed; it will be sent again", "delivery", f.Delivery.ID, "err", err)
			}
		}
	} else if err != nil {
		d.log.Warn("webhooks: recording a delivery failed; it will be sent again", "delivery", fs[0].Delivery.ID, "err", err)
	}
}
