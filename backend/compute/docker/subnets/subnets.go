// Package subnets gives Docker networks explicit subnets from a pool of
// their own. A network made without a subnet takes one of the engine's
// default address pools (172.17–172.31/16 and 192.168/16 in /20s: about 30
// networks), and the networks a killed process left behind keep theirs
// until someone removes them; once they are all taken, every later create
// without a subnet fails ("could not find an available, non-overlapping
// IPv4 address pool"), whoever asks. So every network the backend (and its
// tests) makes names its subnet. A leaf package, so that test helpers
// (testutil/dockertest) share it with the provider without an import cycle.
package subnets

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// Used returns the IPv4 subnets of every network of the engine.
func Used(ctx context.Context, cli client.NetworkAPIClient) ([]netip.Prefix, error) {
	nets, err := cli.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return nil, err
	}
	var used []netip.Prefix
	for _, n := range nets {
		for _, c := range n.IPAM.Config {
			if p, err := netip.ParsePrefix(c.Subnet); err == nil {
				used = append(used, p)
			}
		}
	}
	return used, nil
}

// Free returns a /bits of pool that overlaps none of used, searching from a
// random one so that creators on other hosts, which cannot see what this
// one is about to take, rarely pick the same.
func Free(pool netip.Prefix, bits int, used []netip.Prefix) (netip.Prefix, bool) {
	if bits < pool.Bits() || bits > 32 || !pool.Addr().Is4() {
		return netip.Prefix{}, false
	}
	n := 1 << (bits - pool.Bits())
	b := pool.Masked().Addr().As4()
	base := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	start := rand.IntN(n)
	for i := range n {
		v := base + uint32((start+i)%n)<<(32-bits)
		cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), bits)
		if !slices.ContainsFunc(used, cand.Overlaps) {
			return cand, true
		}
	}
	return netip.Prefix{}, false
}

// IsOverlap recognises the daemon's refusal of a subnet that another
// network took after we listed the engine's networks ("Pool overlaps with
// other one on this address space"; not just "overlap", which a network's
// name in another error may hold).
func IsOverlap(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "pool overlaps")
}

// ExhaustedError is Create's answer when no subnet of the pool is free.
type ExhaustedError struct {
	Pool netip.Prefix
	Bits int
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("no /%d of the address pool %s is free (each overlaps a network of the engine)", e.Bits, e.Pool)
}

// Create creates the network name as opts say (its IPAM replaced) on a
// /bits of pool that no network of the engine uses, with the subnet's first
// address as its gateway (named, so that inspect shows it as it does for
// networks of the default pools). Creators on one host are serialised by a
// host-wide lock, so they never pick the same subnet; creators on other
// hosts may, and the one the daemon refuses for the overlap tries another.
// The daemon's other errors (a name conflict among them) are returned as
// they are.
func Create(ctx context.Context, cli client.NetworkAPIClient, name string, opts network.CreateOptions, pool netip.Prefix, bits int) (network.CreateResponse, error) {
	unlock := LockHost("subnet-pick")
	defer unlock()
	var refused []netip.Prefix
	for {
		used, err := Used(ctx, cli)
		if err != nil {
			return network.CreateResponse{}, err
		}
		subnet, ok := Free(pool, bits, append(used, refused...))
		if !ok {
			return network.CreateResponse{}, &ExhaustedError{Pool: pool, Bits: bits}
		}
		o := opts
		o.IPAM = &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet.String(), Gateway: subnet.Addr().Next().String()}}}
		resp, err := cli.NetworkCreate(ctx, name, o)
		if !IsOverlap(err) {
			return resp, err
		}
		// Each refusal rules one more subnet out, so the loop ends.
		refused = append(refused, subnet)
	}
}

// LockHost takes an exclusive flock on the file dreadnode-<name>.lock in
// the temp dir (which every process sharing a local engine sees) and returns
// its release; on any error it does not lock, and the caller's own retry
// (the overlap retry here, oldest-wins for networks of one name) remains.
func LockHost(name string) func() {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "dreadnode-"+name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return func() {}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}
