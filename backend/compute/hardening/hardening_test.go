package hardening

import (
	"slices"
	"testing"

	"github.com/docker/docker/api/types/container"
)

func TestCapAddAllowList(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"NET_RAW", "net_raw", "CAP_NET_RAW", "CHOWN"} {
		if err := CheckCapAdd(ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"SYS_ADMIN", "NET_ADMIN", "ALL", "MKNOD", "SETFCAP", "AUDIT_WRITE", "SYS_PTRACE", ""} {
		if err := CheckCapAdd(bad); err == nil {
			t.Errorf("%q allowed", bad)
		}
	}
}

func TestApplyAndWithout(t *testing.T) {
	t.Parallel()
	hc := &container.HostConfig{Privileged: true, SecurityOpt: []string{"seccomp:unconfined"}}
	Apply(hc, "cap_net_raw")
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || hc.Privileged || !slices.Equal(hc.SecurityOpt, []string{NoNewPrivileges}) ||
		!slices.Equal(hc.CapAdd, append(slices.Clone(Capabilities), "NET_RAW")) {
		t.Fatalf("Apply: %+v", hc)
	}
	if got := Without(Capabilities, []string{"chown", "CAP_KILL"}, nil); slices.Contains(got, "CHOWN") || slices.Contains(got, "KILL") || len(got) != len(Capabilities)-2 {
		t.Errorf("Without chown, kill: %v", got)
	}
	if got := Without(append(slices.Clone(Capabilities), "NET_RAW"), []string{"ALL"}, []string{"NET_RAW"}); !slices.Equal(got, []string{"NET_RAW"}) {
		t.Errorf("cap_drop ALL with cap_add NET_RAW: %v", got)
	}
}
