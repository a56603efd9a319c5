package subnets

import (
	"errors"
	"net/netip"
	"testing"
)

// TestFree: every pick is a /bits of the pool overlapping nothing used,
// picks spread over the pool (creators on other hosts rarely collide), and
// a pool with none left says so.
func TestFree(t *testing.T) {
	pool := netip.MustParsePrefix("10.214.0.0/16")
	used := []netip.Prefix{netip.MustParsePrefix("10.214.4.0/24"), netip.MustParsePrefix("10.214.128.0/17")}
	seen := map[netip.Prefix]bool{}
	for range 200 {
		p, ok := Free(pool, 22, used)
		if !ok {
			t.Fatal("no free /22 in a half-used /16")
		}
		if p.Bits() != 22 || !pool.Contains(p.Addr()) || p != p.Masked() {
			t.Fatalf("picked %s, want an aligned /22 of %s", p, pool)
		}
		for _, u := range used {
			if p.Overlaps(u) {
				t.Fatalf("picked %s, which overlaps %s", p, u)
			}
		}
		seen[p] = true
	}
	if len(seen) < 10 { // 31 candidates, 200 draws
		t.Errorf("200 picks gave only %d distinct subnets: %v", len(seen), seen)
	}
	all := []netip.Prefix{netip.MustParsePrefix("10.214.0.0/17"), netip.MustParsePrefix("10.214.128.0/17")}
	if p, ok := Free(pool, 22, all); ok {
		t.Fatalf("picked %s of a full pool", p)
	}
	if p, ok := Free(pool, 15, nil); ok {
		t.Fatalf("picked %s, larger than the pool", p)
	}
}

func TestIsOverlap(t *testing.T) {
	for msg, want := range map[string]bool{
		"Error response from daemon: Pool overlaps with other one on this address space":                       true,
		"Error response from daemon: invalid pool request: Pool overlaps with other one on this address space": true,
		"Error response from daemon: network with name dn-overlap-1 already exists":                            false,
	} {
		if got := IsOverlap(errors.New(msg)); got != want {
			t.Errorf("%q: %v, want %v", msg, got, want)
		}
	}
	if IsOverlap(nil) {
		t.Error("nil is an overlap")
	}
}
