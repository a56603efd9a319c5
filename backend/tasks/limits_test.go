package tasks

import (
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

func TestServiceLimits(t *testing.T) {
	t.Parallel()
	d := compute.GroupLimits{MemoryBytes: 512 << 20, NanoCPUs: 1e9, Pids: 512}
	cases := []struct {
		name string
		set  func(s *types.ServiceConfig)
		want compute.GroupLimits
	}{
		{"silent", func(*types.ServiceConfig) {}, d},
		{"own", func(s *types.ServiceConfig) { s.MemLimit, s.CPUS, s.PidsLimit = 64<<20, 2, 10 },
			compute.GroupLimits{MemoryBytes: 64 << 20, NanoCPUs: 2e9, Pids: 10}},
		{"deploy", func(s *types.ServiceConfig) {
			s.Deploy = &types.DeployConfig{Resources: types.Resources{Limits: &types.Resource{NanoCPUs: 0.5, MemoryBytes: 128 << 20, Pids: 64}}}
		}, compute.GroupLimits{MemoryBytes: 128 << 20, NanoCPUs: 5e8, Pids: 64}},
		{"partial", func(s *types.ServiceConfig) { s.PidsLimit = 100 }, compute.GroupLimits{MemoryBytes: 512 << 20, NanoCPUs: 1e9, Pids: 100}},
		{"reservation above the default", func(s *types.ServiceConfig) { s.MemReservation = 1 << 30 },
			compute.GroupLimits{MemoryBytes: 1 << 30, NanoCPUs: 1e9, Pids: 512}},
	}
	for _, tc := range cases {
		var s types.ServiceConfig
		tc.set(&s)
		if got := serviceLimits(s, d); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
