package sandbox

import "testing"

func TestEgressLine(t *testing.T) {
	if got := EgressLine(map[string]uint64{"policy": 0}); got != "" {
		t.Fatalf("nothing dropped: %q", got)
	}
	got := EgressLine(map[string]uint64{"link_local": 3, "policy": 12, "private": 0, "future": 1})
	if want := "egress: 16 packets dropped: 12 by policy (allowOut/denyOut), 3 to link-local (cloud metadata), 1 (future)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	d := WithEgress("entrypoint error: the main process exited with code 1", got)
	if EgressLineOf(d) != got || WithEgress(d, "egress: 1 packet dropped: 1 to the host") != "entrypoint error: the main process exited with code 1\negress: 1 packet dropped: 1 to the host" {
		t.Fatalf("lines: %q", d)
	}
	if WithEgress(got, "") != "" || WithEgress("", got) != got {
		t.Fatal("an egress line alone")
	}
}
