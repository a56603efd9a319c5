package billing

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

func TestRatesAndCost(t *testing.T) {
	if got := DefaultRates.For(1, 512); got != 16_250 {
		t.Fatalf("base template rate = %d nano-credits/s, want 16250", got)
	}
	if got := DefaultRates.For(0, 0); got != DefaultRates.For(DefaultCPU, DefaultMemoryMB) {
		t.Fatalf("records without resources bill as the base template: %d", got)
	}
	if got := cost(int64(time.Hour), 16_250); got != 58_500 {
		t.Fatalf("an hour of base = %d micro, want 58500", got)
	}
	// No overflow on long durations at high rates.
	if got := cost(int64(365*24*time.Hour), 16*14_000+64*4_500); got != 16_146_432_000 {
		t.Fatalf("a year at 16 CPU / 64 GiB = %d", got)
	}
	// The time 113 micro-credits pay, rounded down to the nanosecond.
	if got := paidNs(113, 16_250); got != 6_953_846_153 || cost(got+1, 16_250) != 113 {
		t.Fatalf("paidNs(113) = %d", got)
	}
	if cost(-5, 10) != 0 || cost(5, 0) != 0 || paidNs(0, 5) != 0 {
		t.Fatal("non-positive inputs cost nothing")
	}
	if got := mulDiv(math.MaxUint64, math.MaxUint64, 1, false); got != math.MaxInt64 {
		t.Fatalf("overflow saturates: %d", got)
	}
}

func TestParseRates(t *testing.T) {
	r, err := ParseRates("cpu_second=0.001, gib_second=0.0005,sandbox_second=0.000001")
	if err != nil || r.CPUSecond != 1_000_000 || r.GiBSecond != 500_000 || r.SandboxSecond != 1_000 {
		t.Fatalf("%+v %v", r, err)
	}
	if r, err := ParseRates(""); err != nil || r != DefaultRates {
		t.Fatalf("empty keeps defaults: %+v %v", r, err)
	}
	for _, bad := range []string{"cpu=1", "cpu_second", "cpu_second=-1", "cpu_second=x", "cpu_second=NaN", "gib_second=1e9"} {
		if _, err := ParseRates(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if back, err := ParseRates(DefaultRates.String()); err != nil || back != DefaultRates {
		t.Fatalf("String round trip: %v %v", back, err)
	}
}

func TestCreditsJSONAndAmounts(t *testing.T) {
	b, _ := json.Marshal(map[string]Credits{"a": 12_500_000, "b": 1, "c": 0})
	if string(b) != `{"a":12.500000,"b":0.000001,"c":0.000000}` {
		t.Fatalf("credits JSON: %s", b)
	}
	var back map[string]float64
	if err := json.Unmarshal(b, &back); err != nil || back["a"] != 12.5 {
		t.Fatalf("not JSON numbers: %v %v", back, err)
	}
	if m, err := MicroFromCredits(1.000001); err != nil || m != 1_000_001 {
		t.Fatalf("1.000001 credits = %d micro (%v)", m, err)
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1), 1e10, 1e-9} {
		if _, err := MicroFromCredits(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestMonthSecondsFromTimeline(t *testing.T) {
	month := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return month.Add(d) }
	// Ran 1 h across the month boundary (30 min inside), paused, resumed 10 min, killed.
	u := store.UsageSpan{RuntimeNs: int64(70 * time.Minute), Timeline: []store.TimelineEntry{
		{Phase: "pending", At: at(-31 * time.Minute)}, {Phase: "running", At: at(-30 * time.Minute)},
		{Phase: "pausing", At: at(29 * time.Minute)}, {Phase: "paused", At: at(30 * time.Minute)},
		{Phase: "resuming", At: at(time.Hour)}, {Phase: "running", At: at(time.Hour)},
		{Phase: "stopping", At: at(69 * time.Minute)}, {Phase: "deleted", At: at(70 * time.Minute)},
	}}
	if got := monthSeconds(u, month, at(2*time.Hour)); got != 40*time.Minute {
		t.Fatalf("month seconds = %s, want 40m", got)
	}
	// Still running: counted up to now.
	u = store.UsageSpan{RunningSince: at(time.Hour), Timeline: []store.TimelineEntry{{Phase: "running", At: at(time.Hour)}}}
	if got := monthSeconds(u, month, at(90*time.Minute)); got != 30*time.Minute {
		t.Fatalf("running month seconds = %s, want 30m", got)
	}
}
