package app

import (
	"strings"
	"testing"
	"time"
)

func TestConfigLeaseTTL(t *testing.T) {
	for _, c := range []struct {
		val  string
		want time.Duration
		err  string
	}{
		{"", 10 * time.Second, ""},
		{"3s", 3 * time.Second, ""},
		{"500ms", 500 * time.Millisecond, ""},
		{"100ms", 0, "at least 500ms"},
		{"ten", 0, "not a positive duration"},
		{"-1s", 0, "not a positive duration"},
	} {
		t.Setenv("DREADNODE_LEASE_TTL", c.val)
		cfg, err := ConfigFromEnv()
		switch {
		case c.err == "" && (err != nil || cfg.LeaseTTL != c.want):
			t.Errorf("DREADNODE_LEASE_TTL=%q: %v, %v; want %v", c.val, cfg.LeaseTTL, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), "DREADNODE_LEASE_TTL") || !strings.Contains(err.Error(), c.err)):
			t.Errorf("DREADNODE_LEASE_TTL=%q: error %v; want one naming the variable and saying %q", c.val, err, c.err)
		}
	}
}
