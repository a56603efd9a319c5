package scaleout_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/replicas"
)

// TestReplicasSettleOneBalance is the test 3 with real processes:
// three replicas, each settling every 200 ms, run 200 sandboxes (on the E2B
// fake, so that 200 need no containers) of one org whose balance lasts a
// few seconds. Sampled through every replica all along, the balance is
// never below zero; in the end every record is killed, the balance is zero
// and the org was charged exactly what its records say they were billed:
// no credit charged twice, none lost.
func TestReplicasSettleOneBalance(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(t)
	// 200 sandboxes of the base size cost 3250 µcredits a second together.
	s := replicas.Start(t, replicas.Options{N: 3, Credits: 0.03, Env: map[string]string{
		"DREADNODE_PROVIDER": "e2b", "E2B_API_KEY": fake.APIKey, "E2B_API_URL": fake.URL, "E2B_DOMAIN": fake.Domain,
		"DREADNODE_CAPACITY_SANDBOXES": "1000", "DREADNODE_SETTLE_INTERVAL": "200ms",
	}})
	credits0 := micro(balance(t, s.Replicas[0]))

	// Balances sampled through every replica from the first create on.
	var samples, below atomic.Int64
	sampling := make(chan struct{})
	var sampler sync.WaitGroup
	for _, b := range s.Replicas {
		sampler.Add(1)
		go func() {
			defer sampler.Done()
			for {
				select {
				case <-sampling:
					return
				default:
				}
				if bal, err := readBalance(b); err == nil {
					samples.Add(1)
					if micro(bal) < 0 {
						below.Add(1)
					}
				}
				time.Sleep(20 * time.Millisecond) // sampling interval
			}
		}()
	}

	var created atomic.Int32
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if _, err := create(s.Replicas[i%3], time.Minute); err == nil {
					created.Add(1)
				}
			}
		}()
	}
	for i := range 200 {
		jobs <- i
	}
	close(jobs)
	waitDone(t, &wg, 2*time.Minute)
	if n := created.Load(); n < 150 {
		t.Fatalf("only %d of 200 creates were accepted before the balance ran out", n)
	}

	var records []ledgerRecord
	polls := 0
	pollUntil(t, 2*time.Minute, "every record to be killed for lack of credits", func() bool {
		polls++
		records = ledger(t, s.Replicas[polls%3])
		for _, r := range records {
			if r.State != "killed" {
				return false
			}
		}
		return len(records) >= int(created.Load())
	})
	close(sampling)
	sampler.Wait()
	if n := below.Load(); n > 0 || samples.Load() < 10 {
		t.Fatalf("%d of %d balance samples were below zero", n, samples.Load())
	}
	var billed int64
	seen := map[string]int{}
	for _, r := range records {
		billed += micro(r.BilledCredits)
		seen[r.ID]++
	}
	if len(seen) != len(records) {
		t.Errorf("the ledger listed %d records, %d of them distinct", len(records), len(seen))
	}
	for _, b := range s.Replicas {
		left := micro(balance(t, b))
		if left != 0 || credits0-left != billed {
			t.Fatalf("through %s: balance %d µcredits of %d, records billed %d in all; want 0 left and everything on the records",
				b.URL, left, credits0, billed)
		}
	}
	t.Logf("%d records billed %d µcredits in all; %d balance samples, none below zero", len(records), billed, samples.Load())
}
