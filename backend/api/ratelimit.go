package api

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"golang.org/x/time/rate"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// Rate is one token bucket: PerSecond tokens added each second, up to
// Burst. A zero PerSecond is no limit.
type Rate struct {
	PerSecond float64
	Burst     int
}

// Route classes limited apart, per key: one key polling cannot starve its
// own creates, and a burst of creates cannot starve its reads.
const (
	ClassCreate = "create" // POST that makes a sandbox, environment, runtime or key
	ClassWrite  = "write"  // every other change (pause, delete, keepalive, ...)
	ClassRead   = "read"   // GET
	ClassExec   = "exec"   // commands, processes and files in a sandbox
)

// RateLimits are the per-replica limits (DREADNODE_RATE_*): per key and
// route class, and per client address for failed authentication.
type RateLimits struct {
	Class map[string]Rate
	// AuthFailures bounds the refused keys one address (an IPv6 /64) may
	// try: once its bucket is empty, a refused key answers 429, and one no
	// key has the prefix of costs no lookup by its hash. A valid key still
	// works from that address: the address may be shared.
	AuthFailures Rate
}

// routeClass is the class of the matched route (its path template).
func routeClass(r *http.Request) string {
	tmpl := r.URL.Path
	if cur := mux.CurrentRoute(r); cur != nil {
		if t, err := cur.GetPathTemplate(); err == nil {
			tmpl = t
		}
	}
	for _, seg := range []string{"/exec", "/execute", "/files", "/fs", "/processes", "/archive"} {
		if strings.Contains(tmpl, seg) {
			return ClassExec
		}
	}
	if readOnly(r.Method) {
		return ClassRead
	}
	if r.Method == http.MethodPost {
		switch tmpl[strings.LastIndexByte(tmpl, '/')+1:] {
		case "sandboxes", "environments", "runtimes", "keys":
			return ClassCreate
		}
	}
	return ClassWrite
}

// buckets holds one limiter per name; idle ones are dropped so that the
// map stays bounded by the names active in the last idleAfter.
type buckets struct {
	rate  Rate
	mu    sync.Mutex
	m     map[string]*bucket
	swept time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

const idleAfter = 10 * time.Minute

func newBuckets(r Rate) *buckets {
	if r.PerSecond <= 0 {
		return nil
	}
	if r.Burst < 1 {
		r.Burst = int(math.Ceil(r.PerSecond))
	}
	return &buckets{rate: r, m: map[string]*bucket{}, swept: time.Now()}
}

func (b *buckets) get(name string, now time.Time) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.swept) > idleAfter {
		for k, v := range b.m {
			if now.Sub(v.used) > idleAfter {
				delete(b.m, k)
			}
		}
		b.swept = now
	}
	e := b.m[name]
	if e == nil {
		e = &bucket{lim: rate.NewLimiter(rate.Limit(b.rate.PerSecond), b.rate.Burst)}
		b.m[name] = e
	}
	e.used = now
	return e.lim
}

// window is how long an empty bucket takes to fill: the policy's w.
func (b *buckets) window() int {
	return max(1, int(math.Ceil(float64(b.rate.Burst)/b.rate.PerSecond)))
}

// limiter applies RateLimits.
type limiter struct {
	class map[string]*buckets
	auth  *buckets
}

func newLimiter(l RateLimits) *limiter {
	out := &limiter{class: map[string]*buckets{}, auth: newBuckets(l.AuthFailures)}
	for c, r := range l.Class {
		if b := newBuckets(r); b != nil {
			out.class[c] = b
		}
	}
	return out
}

// allow takes a token of the key's bucket for the request's class, sets
// the RateLimit headers, and reports whether the request may go on (if
// not it has answered 429).
func (l *limiter) allow(w http.ResponseWriter, r *http.Request, keyID string) bool {
	class := routeClass(r)
	b := l.class[class]
	if b == nil {
		return true
	}
	now := time.Now()
	lim := b.get(keyID, now)
	ok := lim.AllowN(now, 1)
	setRateHeaders(w.Header(), class, b, lim, now)
	if !ok {
		tooMany(w, lim, now, "this API key sent more "+class+" requests than its limit ("+
			strconv.FormatFloat(b.rate.PerSecond, 'g', -1, 64)+"/s, bursts of "+strconv.Itoa(b.rate.Burst)+"); wait for Retry-After and slow down")
	}
	return ok
}

// setRateHeaders writes the IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers): the policy's quota q and window
// w, the tokens left r and the seconds t until the next one.
func setRateHeaders(h http.Header, name string, b *buckets, lim *rate.Limiter, now time.Time) {
	left := lim.TokensAt(now)
	h.Set("RateLimit-Policy", `"`+name+`";q=`+strconv.Itoa(b.rate.Burst)+";w="+strconv.Itoa(b.window()))
	h.Set("RateLimit", `"`+name+`";r=`+strconv.Itoa(max(0, int(left)))+";t="+strconv.Itoa(untilToken(left, b.rate.PerSecond)))
}

// untilToken is the whole seconds until a bucket holding left tokens
// has one.
func untilToken(left, perSecond float64) int {
	if left >= 1 {
		return 0
	}
	return max(1, int(math.Ceil((1-left)/perSecond)))
}

func tooMany(w http.ResponseWriter, lim *rate.Limiter, now time.Time, detail string) {
	e := httpx.NewError(http.StatusTooManyRequests, "rate_limited", detail)
	e.Header = http.Header{"Retry-After": {strconv.Itoa(untilToken(lim.TokensAt(now), float64(lim.Limit())))}}
	httpx.WriteErr(w, e)
}

// authBlocked reports whether addr has no refused attempts left: its
// next unknown key is refused without a database lookup.
func (l *limiter) authBlocked(addr string, now time.Time) (*rate.Limiter, bool) {
	if l.auth == nil {
		return nil, false
	}
	lim := l.auth.get(addr, now)
	return lim, lim.TokensAt(now) < 1
}

// authFailed spends one of addr's refused attempts.
func (l *limiter) authFailed(addr string, now time.Time) {
	if l.auth != nil {
		l.auth.get(addr, now).AllowN(now, 1)
	}
}

// clientAddr is the address limits of failed authentication apply to:
// the TCP peer, and for IPv6 its /64 (one host, or one subscriber, is
// commonly given a whole /64, so a client could otherwise take a fresh
// address, and a fresh bucket, per guess). Behind a proxy every client
// shares the proxy's address (the README says so); X-Forwarded-For is not
// trusted, since any client could set it to dodge the limit.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	return netip.PrefixFrom(ip, 64).Masked().String()
}
