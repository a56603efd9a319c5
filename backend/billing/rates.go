package billing

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// Units. Balances and billed credits are integers of micro-credits
// (millionths), so sums are exact. Rates are integers of nano-credits per
// second, fine enough for per-CPU-second prices.
const (
	MicroPerCredit = 1_000_000
	NanoPerCredit  = 1_000_000_000
	// MaxGrant is the largest single grant, in credits.
	MaxGrant = 1_000_000_000
	// MaxBalanceMicro caps a balance (grants beyond it are refused).
	MaxBalanceMicro = 1 << 60
)

// Rates is the credit rate table: what one running sandbox costs per second,
// by its resources. Paused sandboxes cost nothing.
//
//	rate = SandboxSecond + CPUSecond × cpus + GiBSecond × memory_GiB
//
// Values are nano-credits per second. A record without resources (0 CPUs or
// 0 MB) is billed as the base template: 1 CPU, 512 MB.
type Rates struct {
	CPUSecond     int64 // per CPU per second
	GiBSecond     int64 // per GiB of memory per second
	SandboxSecond int64 // flat, per running sandbox per second
}

// DefaultRates are E2B's published prices read as credits (1 credit = 1 USD):
// 0.000014 per vCPU-second and 0.0000045 per GiB-second. The base template
// (1 CPU, 512 MB) costs 0.00001625 credits per second, 0.0585 per hour.
var DefaultRates = Rates{CPUSecond: 14_000, GiBSecond: 4_500}

// Default resources a record without any is billed for.
const (
	DefaultCPU      = 1
	DefaultMemoryMB = 512
)

// For is the rate, in nano-credits per second, of a sandbox with cpus and memMB.
func (r Rates) For(cpus, memMB int) int64 {
	if cpus <= 0 {
		cpus = DefaultCPU
	}
	if memMB <= 0 {
		memMB = DefaultMemoryMB
	}
	return r.SandboxSecond + r.CPUSecond*int64(cpus) + (r.GiBSecond*int64(memMB)+512)/1024
}

// String renders the table in the DREADNODE_CREDIT_RATES syntax.
func (r Rates) String() string {
	return fmt.Sprintf("cpu_second=%s,gib_second=%s,sandbox_second=%s", nanoString(r.CPUSecond), nanoString(r.GiBSecond), nanoString(r.SandboxSecond))
}

func nanoString(n int64) string {
	return strconv.FormatFloat(float64(n)/NanoPerCredit, 'f', -1, 64)
}

// ParseRates reads "cpu_second=0.000014,gib_second=0.0000045,sandbox_second=0"
// (credits per second; keys may be omitted and keep their default).
func ParseRates(s string) (Rates, error) {
	r := DefaultRates
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return r, fmt.Errorf("DREADNODE_CREDIT_RATES: %q is not key=value (keys: cpu_second, gib_second, sandbox_second)", part)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || f > 1000 || math.IsNaN(f) {
			return r, fmt.Errorf("DREADNODE_CREDIT_RATES: %s=%q must be a number of credits per second between 0 and 1000", k, v)
		}
		n := int64(math.Round(f * NanoPerCredit))
		switch strings.TrimSpace(k) {
		case "cpu_second":
			r.CPUSecond = n
		case "gib_second":
			r.GiBSecond = n
		case "sandbox_second":
			r.SandboxSecond = n
		default:
			return r, fmt.Errorf("DREADNODE_CREDIT_RATES: unknown key %q (keys: cpu_second, gib_second, sandbox_second)", k)
		}
	}
	return r, nil
}

// DefaultSettleInterval is how often running records are settled.
const DefaultSettleInterval = 10 * time.Second

// cost is the price in micro-credits of ns nanoseconds at rate nano-credits
// per second, rounded down: ns × rate / 1e12, without overflow.
func cost(ns, rate int64) int64 {
	if ns <= 0 || rate <= 0 {
		return 0
	}
	return mulDiv(uint64(ns), uint64(rate), 1e12, false)
}

// paidNs is the running time that micro credits pay at rate, rounded down:
// the fraction of a micro-credit not yet charged carries over to the next
// settlement (at most a nanosecond's worth per settlement is counted twice).
func paidNs(micro, rate int64) int64 {
	if micro <= 0 || rate <= 0 {
		return 0
	}
	return mulDiv(uint64(micro), 1e12, uint64(rate), false)
}

func mulDiv(a, b, c uint64, ceil bool) int64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxInt64
	}
	q, rem := bits.Div64(hi, lo, c)
	if ceil && rem > 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// Credits is an amount in micro-credits, rendered in JSON as a number of
// credits with six decimals (e.g. 12.500000): the document's Credits.
type Credits = apitypes.CreditAmount

// MicroFromCredits converts an operator's amount of credits to micro-credits
// (rounded to the nearest micro-credit). It refuses non-positive, non-finite
// and oversized amounts.
func MicroFromCredits(amount float64) (int64, error) {
	if math.IsNaN(amount) || math.IsInf(amount, 0) || amount <= 0 {
		return 0, fmt.Errorf("the amount must be a positive number of credits")
	}
	if amount > MaxGrant {
		return 0, fmt.Errorf("the amount must be at most %d credits per grant", MaxGrant)
	}
	micro := int64(math.Round(amount * MicroPerCredit))
	if micro <= 0 {
		return 0, fmt.Errorf("the amount must be at least 0.000001 credits")
	}
	return micro, nil
}
