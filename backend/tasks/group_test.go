package tasks

import (
	"slices"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
)

// The compose project becomes a group in compute's own types: built images
// replace the compose image, unset environment variables are dropped,
// container_name and network aliases become aliases, a disabled
// healthcheck is NONE, depends_on keeps its conditions, and the task's
// templates, exposure, runtime and egress come along.
func TestComposeToGroup(t *testing.T) {
	t.Parallel()
	flag, sec, one := "FLAG{x}", types.Duration(3*time.Second), uint64(4)
	initOn := true
	web := types.ServiceConfig{Name: "web"}
	web.Image, web.ContainerName = "ignored:1", "webby"
	web.Environment = types.MappingWithEquals{"FLAG": &flag, "UNSET": nil}
	web.Networks = map[string]*types.ServiceNetworkConfig{"default": {Aliases: []string{"www"}}}
	web.Command, web.StopGracePeriod, web.Init = types.ShellCommand{"serve"}, &sec, &initOn
	web.HealthCheck = &types.HealthCheckConfig{Test: types.HealthCheckTest{"CMD", "true"}, Interval: &sec, Retries: &one}
	web.DependsOn = types.DependsOnConfig{"db": {Condition: types.ServiceConditionHealthy, Required: true}}
	web.ExtraHosts = types.HostsList{"host.internal": []string{"192.0.2.1"}}
	web.MemLimit, web.CapAdd = 64<<20, []string{"NET_RAW"}
	db := types.ServiceConfig{Name: "db"}
	db.Image, db.HealthCheck = "postgres:15", &types.HealthCheckConfig{Disable: true}
	p := &types.Project{Name: "dn-e1", Services: types.Services{"web": web, "db": db}}
	task := &catalog.Task{Manifest: catalog.Manifest{Name: "demo", Org: "org1", Version: "1.0.0", Expose: map[string]int{"web": 8080},
		E2BTemplates: map[string]string{"web": "tpl-web"}, Runtime: "runsc", Network: catalog.Network{AllowOut: []string{"192.0.2.0/24"}}}}
	imgs := map[string]*compute.Image{"web": {Service: "web", Ref: "dreadnode-task/demo-web:abc", Build: true}}
	g := toGroup(compute.GroupTarget{ID: "e1", RecordID: "r1", OrgID: "org1", TaskRef: "org1/demo@1.0.0"}, task, p, imgs)

	if g.ID != "e1" || g.Expose["web"] != 8080 || g.Runtime != "runsc" || !slices.Equal(g.AllowOut, []string{"192.0.2.0/24"}) {
		t.Fatalf("group %+v", g)
	}
	w, d := g.Services["web"], g.Services["db"]
	if w.Image != "dreadnode-task/demo-web:abc" || d.Image != "postgres:15" || w.Template != "tpl-web" || d.Template != "" {
		t.Fatalf("images %q %q, templates %q %q", w.Image, d.Image, w.Template, d.Template)
	}
	if len(w.Env) != 1 || w.Env["FLAG"] != flag {
		t.Fatalf("environment %v", w.Env)
	}
	if !slices.Equal(w.Aliases, []string{"webby", "www"}) || !slices.Equal(w.Command, []string{"serve"}) || w.Entrypoint != nil {
		t.Fatalf("aliases %v, command %v, entrypoint %v", w.Aliases, w.Command, w.Entrypoint)
	}
	if w.StopTimeout == nil || *w.StopTimeout != 3*time.Second || w.Init == nil || !*w.Init {
		t.Fatalf("stop timeout %v, init %v", w.StopTimeout, w.Init)
	}
	if hc := w.Healthcheck; hc == nil || !slices.Equal(hc.Test, []string{"CMD", "true"}) || hc.Interval != 3*time.Second || hc.Retries != 4 {
		t.Fatalf("healthcheck %+v", w.Healthcheck)
	}
	if d.Healthcheck == nil || !slices.Equal(d.Healthcheck.Test, []string{"NONE"}) {
		t.Fatalf("disabled healthcheck %+v", d.Healthcheck)
	}
	if w.DependsOn["db"] != compute.ConditionHealthy || len(d.DependsOn) != 0 {
		t.Fatalf("depends_on %v %v", w.DependsOn, d.DependsOn)
	}
	if !slices.Equal(w.ExtraHosts, []string{"host.internal:192.0.2.1"}) || w.Limits.MemoryBytes != 64<<20 || w.Limits.Pids != 0 ||
		!slices.Equal(w.CapAdd, []string{"NET_RAW"}) {
		t.Fatalf("extra hosts %v, limits %+v, cap_add %v", w.ExtraHosts, w.Limits, w.CapAdd)
	}
}
