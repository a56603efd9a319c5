package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/config"
)

// The README's configuration table names exactly the variables of
// config.Backend: a variable added to one and not the other fails here.
func TestReadmeTableMatchesBackend(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "Configuration is by environment variable")
	if start < 0 {
		t.Fatal("README.md has no configuration section (\"Configuration is by environment variable\")")
	}
	var table []string
	for _, line := range strings.Split(text[start:], "\n")[1:] {
		if strings.HasPrefix(line, "|") {
			table = append(table, line)
		} else if len(table) > 0 {
			break
		}
	}
	documented := map[string]bool{}
	for _, row := range table {
		first := strings.SplitN(strings.TrimPrefix(row, "|"), "|", 2)[0]
		for _, m := range regexp.MustCompile("`((?:DREADNODE|DOCKER|E2B)_[A-Z0-9_]+)`").FindAllStringSubmatch(first, -1) {
			documented[m[1]] = true
		}
	}
	vars := config.Vars(reflect.TypeFor[config.Backend]())
	for _, v := range vars {
		if !documented[v] {
			t.Errorf("%s is read (config.Backend) but not in the README's configuration table", v)
		}
	}
	for v := range documented {
		if !slices.Contains(vars, v) {
			t.Errorf("the README's configuration table lists %s, which config.Backend does not read", v)
		}
	}
}

func TestDefaultsAndErrors(t *testing.T) {
	for _, v := range config.Vars(reflect.TypeFor[config.Backend]()) {
		t.Setenv(v, "") // empty is unset: the default applies
	}
	e, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if e.Listen != "127.0.0.1:8080" || e.LeaseTTL != 10*time.Second || e.Catalog.TasksDir != "tasks" || e.Docker.DiskLimitMB != 10240 ||
		e.MaxBodyBytes != 4<<30 || e.Webhooks.ClaimHold != 30*time.Second || e.Billing.SettleInterval != 10*time.Second {
		t.Fatalf("defaults: %+v", e)
	}
	t.Setenv("E2B_API_KEY", " k ")
	if e, _ := config.Load(); e.E2B.APIKey != "k" {
		t.Fatalf("E2B_API_KEY not trimmed: %q", e.E2B.APIKey)
	}
	for name, val := range map[string]string{"DREADNODE_LEASE_TTL": "-1s", "DREADNODE_MAX_QUEUE": "many", "DREADNODE_BOOTSTRAP_CREDITS": "-3", "DREADNODE_SETTLE_INTERVAL": "soon"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, val)
			if _, err := config.Load(); err == nil || !strings.HasPrefix(err.Error(), name+": ") || !strings.Contains(err.Error(), val) {
				t.Fatalf("%s=%s: %v, want an error naming the variable and the value", name, val, err)
			}
		})
	}
}
