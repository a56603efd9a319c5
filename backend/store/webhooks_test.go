package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// Deliveries: one per event and webhook however often fan-out runs; only
// the oldest pending one of a sandbox is claimable (order); a claim whose
// holder died lapses and the same delivery is claimed again by another
// replica, whose result counts (the dead one's late result is ignored).
func TestDeliveryClaimsAndOrder(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		rec := newRecord(t, db, "r1")
		if err := db.PutWebhook(ctx, &Webhook{ID: "wh1", OrgID: rec.OrgID, URL: "http://x", Enabled: true, Secret: "s", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		moveAll(t, db, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, sandbox.PhaseRunning, sandbox.CauseReconciler,
			sandbox.PhaseStopping, sandbox.CauseUser, sandbox.PhaseDeleted, sandbox.CauseReconciler)
		n := 0
		newID := func() string { n++; return fmt.Sprintf("d%d", n) }
		render := func(e *Event) []byte { return []byte(e.ID) }
		now := time.Now()
		if got, err := db.FanOut(ctx, now, render, newID); err != nil || got != 2 {
			t.Fatalf("fan-out: %d %v", got, err)
		}
		// A webhook registered now gets none of the earlier events.
		if err := db.PutWebhook(ctx, &Webhook{ID: "wh2", OrgID: rec.OrgID, URL: "http://x", Enabled: true, Secret: "s", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if got, err := db.FanOut(ctx, now, render, newID); err != nil || got != 0 {
			t.Fatalf("second fan-out: %d %v", got, err)
		}
		if late, _ := db.ListDeliveries(ctx, "wh2", 10); len(late) != 0 {
			t.Fatalf("a webhook registered later got earlier events: %v", late)
		}
		a, err := db.ClaimDeliveries(ctx, "A", now, time.Minute, 10)
		if err != nil || len(a) != 1 || a[0].EventType != "sandbox.lifecycle.created" {
			t.Fatalf("A claims %v (%v): want only the first of the sandbox", a, err)
		}
		if b, _ := db.ClaimDeliveries(ctx, "B", now, time.Minute, 10); len(b) != 0 {
			t.Fatalf("B claims a held delivery: %v", b)
		}
		later := now.Add(2 * time.Minute) // A died: its claim lapsed
		b, _ := db.ClaimDeliveries(ctx, "B", later, time.Minute, 10)
		if len(b) != 1 || b[0].ID != a[0].ID {
			t.Fatalf("B after the lapse: %v, want %s again", b, a[0].ID)
		}
		if err := db.FinishDelivery(ctx, a[0], "A", DeliveryResult{At: later, Error: "late", Retry: later}); err != nil {
			t.Fatal(err)
		}
		if err := db.FinishDelivery(ctx, b[0], "B", DeliveryResult{At: later, Status: 204}); err != nil {
			t.Fatal(err)
		}
		log, _ := db.ListDeliveries(ctx, "wh1", 10)
		if len(log) != 2 || log[1].Status != DeliveryDelivered || log[1].Attempts != 1 || log[1].LastError != "" {
			t.Fatalf("log after B's success: %+v", log[1])
		}
		next, _ := db.ClaimDeliveries(ctx, "B", later, time.Minute, 10)
		if len(next) != 1 || next[0].EventType != "sandbox.lifecycle.killed" {
			t.Fatalf("the next in order: %v", next)
		}
	})
}

// Every attempt goes to the attempt log, with its time, status or error,
// class and duration, the late one of a claimer that lost its claim too
// (it was made); the log is filtered and paged, and goes with its webhook
// and with the retention.
func TestDeliveryAttemptLog(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		rec := newRecord(t, db, "r1")
		if err := db.PutWebhook(ctx, &Webhook{ID: "wh1", OrgID: rec.OrgID, URL: "http://x", Enabled: true, Secret: "s", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		moveAll(t, db, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, sandbox.PhaseRunning, sandbox.CauseReconciler)
		n := 0
		newID := func() string { n++; return fmt.Sprintf("d%d", n) }
		now := time.Now()
		if _, err := db.FanOut(ctx, now, func(e *Event) []byte { return []byte(`{"id":"` + e.ID + `"}`) }, newID); err != nil {
			t.Fatal(err)
		}
		claim := func(owner string, at time.Time) *Delivery {
			t.Helper()
			ds, err := db.ClaimDeliveries(ctx, owner, at, time.Minute, 10)
			if err != nil || len(ds) != 1 {
				t.Fatalf("%s claims %v (%v)", owner, ds, err)
			}
			return ds[0]
		}
		d := claim("A", now)
		if err := db.FinishDelivery(ctx, d, "A", DeliveryResult{AttemptID: "a1", Started: now, At: now.Add(40 * time.Millisecond),
			Duration: 40 * time.Millisecond, Status: 500, Error: "the receiver answered 500", ErrorClass: "http_error", URL: "http://x",
			ResponseBody: "boom", Retry: now}); err != nil {
			t.Fatal(err)
		}
		t1 := now.Add(time.Second)
		d = claim("A", t1)
		later := t1.Add(2 * time.Minute) // A stalls; its claim lapses and B takes the delivery
		b := claim("B", later)
		if err := db.FinishDelivery(ctx, d, "A", DeliveryResult{AttemptID: "a2", Started: t1, At: later, Duration: 10 * time.Second,
			Error: "no answer: timeout", ErrorClass: "timeout", Retry: later}); err != nil {
			t.Fatal(err)
		}
		if err := db.FinishDelivery(ctx, b, "B", DeliveryResult{AttemptID: "a3", Started: later, At: later.Add(time.Millisecond),
			Duration: time.Millisecond, Status: 204}); err != nil {
			t.Fatal(err)
		}
		log, err := db.ListDeliveries(ctx, "wh1", 10)
		if err != nil || len(log) != 1 || log[0].Status != DeliveryDelivered || log[0].Attempts != 2 {
			t.Fatalf("delivery: %+v %v", log, err)
		}
		tries, err := db.AttemptsOf(ctx, "wh1", []string{log[0].ID})
		if err != nil || len(tries) != 3 {
			t.Fatalf("attempts: %v %v", tries, err)
		}
		want := []struct {
			id, class, err string
			status         int
			dur            time.Duration
		}{{"a1", "http_error", "the receiver answered 500", 500, 40 * time.Millisecond}, {"a2", "timeout", "no answer: timeout", 0, 10 * time.Second}, {"a3", "", "", 204, time.Millisecond}}
		for i, w := range want {
			a := tries[i]
			if a.ID != w.id || a.ErrorClass != w.class || a.Error != w.err || a.StatusCode != w.status || a.Duration != w.dur ||
				a.EventType != "sandbox.lifecycle.created" || a.SandboxID != "r1" || a.DeliveryID != log[0].ID {
				t.Errorf("attempt %d: %+v, want %+v", i, a, w)
			}
		}
		if !tries[0].At.Equal(now) || tries[0].ResponseBody != "boom" || tries[0].URL != "http://x" || !tries[1].At.Equal(t1) {
			t.Errorf("attempt times/answer: %v %q %q %v", tries[0].At, tries[0].ResponseBody, tries[0].URL, tries[1].At)
		}
		// Filters and paging.
		failed, ok := false, true
		for _, c := range []struct {
			f    AttemptFilter
			want []string
		}{
			{AttemptFilter{WebhookID: "wh1"}, []string{"a3", "a2", "a1"}},
			{AttemptFilter{WebhookID: "wh1", Asc: true, Limit: 2}, []string{"a1", "a2"}},
			{AttemptFilter{WebhookID: "wh1", Asc: true, Cursor: tries[1].Seq}, []string{"a3"}},
			{AttemptFilter{WebhookID: "wh1", Cursor: tries[1].Seq}, []string{"a1"}},
			{AttemptFilter{WebhookID: "wh1", Success: &failed}, []string{"a2", "a1"}},
			{AttemptFilter{WebhookID: "wh1", Success: &ok}, []string{"a3"}},
			{AttemptFilter{WebhookID: "wh1", Start: t1, End: later}, []string{"a2"}},
			{AttemptFilter{WebhookID: "wh1", Types: []string{"sandbox.lifecycle.killed"}}, nil},
			{AttemptFilter{WebhookID: "wh2"}, nil},
		} {
			got, err := db.ListAttempts(ctx, c.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, a := range got {
				ids = append(ids, a.ID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(c.want) {
				t.Errorf("ListAttempts(%+v) = %v, want %v", c.f, ids, c.want)
			}
		}
		// Stats: a1 and a2 failed, a3 succeeded.
		all, buckets, err := db.AttemptStats(ctx, "wh1", now.Add(-time.Minute), later.Add(time.Minute), time.Minute)
		if err != nil || all.Total != 3 || all.Failed != 2 || all.Min != time.Millisecond || all.Max != 10*time.Second ||
			all.Avg != (40*time.Millisecond+10*time.Second+time.Millisecond)/3 {
			t.Fatalf("stats: %+v %v", all, err)
		}
		// Minute buckets from now-1m: a1 and a2 (now, now+1s) in the second, a3 (now+2m1s) in the fourth.
		if len(buckets) != 2 || buckets[0].Total != 2 || buckets[0].Failed != 2 || !buckets[0].Start.Equal(now) ||
			buckets[1].Total != 1 || buckets[1].Failed != 0 || !buckets[1].Start.Equal(now.Add(2*time.Minute)) {
			t.Fatalf("buckets: %+v", buckets)
		}
		// The retention takes the attempts made before its horizon (with
		// the finished deliveries made before it).
		count := func() int {
			t.Helper()
			var n int
			if err := db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_attempts`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if _, err := db.DeleteEventsBefore(ctx, t1); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 2 {
			t.Fatalf("after the retention at t1: %d attempts, want a2 and a3", n)
		}
		// Deleting the webhook deletes its log.
		if err := db.FinishDelivery(ctx, b, "B", DeliveryResult{AttemptID: "a4", At: later}); err != nil { // a late attempt of a vanished delivery
			t.Fatal(err)
		}
		// Deleting the webhook deletes its log.
		if err := db.DeleteWebhook(ctx, rec.OrgID, "wh1"); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 0 {
			t.Fatalf("attempts left after the webhook's deletion: %d", n)
		}
	})
}

// A delivery failing for good (no retry) disables its webhook with the
// reason given; recorded in one pass with another webhook's success, that
// one stays enabled; a loser's late result changes nothing.
func TestDeliveryFailingForGoodDisables(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		rec := newRecord(t, db, "r1")
		for _, id := range []string{"bad", "good"} {
			if err := db.PutWebhook(ctx, &Webhook{ID: id, OrgID: rec.OrgID, URL: "http://x", Enabled: true, Secret: "s", CreatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		moveAll(t, db, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, sandbox.PhaseRunning, sandbox.CauseReconciler)
		n := 0
		now := time.Now()
		if _, err := db.FanOut(ctx, now, func(e *Event) []byte { return []byte("{}") }, func() string { n++; return fmt.Sprintf("d%d", n) }); err != nil {
			t.Fatal(err)
		}
		ds, err := db.ClaimDeliveries(ctx, "A", now, time.Minute, 10)
		if err != nil || len(ds) != 2 {
			t.Fatalf("claims: %v %v", ds, err)
		}
		var fs []Finished
		for _, d := range ds {
			r := DeliveryResult{AttemptID: "a-" + d.WebhookID, At: now, Status: 204}
			if d.WebhookID == "bad" {
				r = DeliveryResult{AttemptID: "a-bad", At: now, Status: 500, Error: "the receiver answered 500", DisableReason: "kept failing"}
			}
			fs = append(fs, Finished{d, r})
		}
		if err := db.FinishDeliveries(ctx, "B", fs); err != nil { // not the holder: only the log
			t.Fatal(err)
		}
		if w, _ := db.GetWebhookByID(ctx, "bad"); !w.Enabled {
			t.Fatalf("a non-holder's result disabled the webhook: %+v", w)
		}
		for i := range fs {
			fs[i].Result.AttemptID += "-2"
		}
		if err := db.FinishDeliveries(ctx, "A", fs); err != nil {
			t.Fatal(err)
		}
		bad, _ := db.GetWebhookByID(ctx, "bad")
		good, _ := db.GetWebhookByID(ctx, "good")
		if bad.Enabled || bad.DisabledReason != "kept failing" || !good.Enabled {
			t.Fatalf("bad %+v, good %+v", bad, good)
		}
		for id, want := range map[string]string{"bad": DeliveryFailed, "good": DeliveryDelivered} {
			log, _ := db.ListDeliveries(ctx, id, 10)
			if len(log) != 1 || log[0].Status != want || log[0].Attempts != 1 {
				t.Errorf("%s: %+v", id, log)
			}
			if tries, _ := db.ListAttempts(ctx, AttemptFilter{WebhookID: id}); len(tries) != 2 {
				t.Errorf("%s: %d attempts logged, want 2 (the non-holder's too)", id, len(tries))
			}
		}
	})
}
