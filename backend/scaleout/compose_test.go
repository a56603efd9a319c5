package scaleout_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/images"
)

// deployDir is the Compose deployment of examples/deploy.
func deployDir(t *testing.T) string {
	t.Helper()
	root, err := images.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "examples", "deploy")
}

func loadDeployment(t *testing.T, env map[string]string) (*types.Project, error) {
	t.Helper()
	dir := deployDir(t)
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(dir, "compose.yaml")}},
		Environment: env,
	}, func(o *loader.Options) { o.ResolvePaths = true })
}

// The Compose file of examples/deploy is what the README says: three
// replicas of the locally built backend image on one PostgreSQL database
// built locally from the base image, each on its own host port, all driving
// the host's Docker engine, with a lease TTL.
func TestComposeDeploymentRunsThreeReplicasOnPostgres(t *testing.T) {
	t.Parallel()
	if _, err := loadDeployment(t, map[string]string{}); err == nil || !strings.Contains(err.Error(), "DREADNODE_BOOTSTRAP_API_KEY") {
		t.Fatalf("loading without an API key must fail naming DREADNODE_BOOTSTRAP_API_KEY, got %v", err)
	}
	p, err := loadDeployment(t, map[string]string{"DREADNODE_BOOTSTRAP_API_KEY": "dn_key", "POSTGRES_PASSWORD": "s3cret"})
	if err != nil {
		t.Fatalf("loading examples/deploy/compose.yaml: %v", err)
	}
	pg, ok := p.Services["postgres"]
	if !ok {
		t.Fatalf("no postgres service; services: %v", p.ServiceNames())
	}
	if pg.Build == nil || pg.Image != "dreadnode/postgres:latest" {
		t.Fatalf("postgres must be built locally as dreadnode/postgres:latest: build %+v image %q", pg.Build, pg.Image)
	}
	df, err := os.ReadFile(filepath.Join(pg.Build.Context, "Dockerfile"))
	if err != nil {
		t.Fatalf("postgres build context: %v", err)
	}
	if !strings.Contains(string(df), "FROM dreadnode/base:latest") || !strings.Contains(string(df), "postgresql") {
		t.Fatalf("postgres Dockerfile must build on dreadnode/base:latest with Debian's postgresql:\n%s", df)
	}
	if v := pg.Environment["POSTGRES_PASSWORD"]; v == nil || *v != "s3cret" {
		t.Fatalf("postgres does not get POSTGRES_PASSWORD: %v", pg.Environment)
	}

	var replicas []string
	ports := map[string]bool{}
	for name, s := range p.Services {
		if name == "postgres" {
			continue
		}
		replicas = append(replicas, name)
		if s.Image != "dreadnode/backend:latest" || s.Build != nil || s.PullPolicy != types.PullPolicyNever {
			t.Errorf("%s: must run the locally built dreadnode/backend:latest and never pull it: image %q build %v pull %q", name, s.Image, s.Build, s.PullPolicy)
		}
		env := func(k string) string {
			if v := s.Environment[k]; v != nil {
				return *v
			}
			return ""
		}
		if u := env("DREADNODE_DATABASE_URL"); !strings.HasPrefix(u, "postgres://dreadnode:s3cret@postgres:5432/") {
			t.Errorf("%s: DREADNODE_DATABASE_URL %q is not the postgres service", name, u)
		}
		if env("DREADNODE_LEASE_TTL") == "" {
			t.Errorf("%s: DREADNODE_LEASE_TTL is not set", name)
		}
		if env("DREADNODE_BOOTSTRAP_API_KEY") != "dn_key" || env("DREADNODE_BOOTSTRAP_ORG") == "" {
			t.Errorf("%s: replicas must share the bootstrapped org and key: %v", name, s.Environment)
		}
		if _, ok := s.DependsOn["postgres"]; !ok {
			t.Errorf("%s: does not wait for postgres", name)
		}
		socket := false
		for _, v := range s.Volumes {
			socket = socket || v.Source == "/var/run/docker.sock" && v.Target == "/var/run/docker.sock"
		}
		if !socket {
			t.Errorf("%s: the Docker socket is not mounted: %+v", name, s.Volumes)
		}
		// On the host's network (the router reaches sandboxes, which publish
		// nothing, from there only), each on a loopback port of its own.
		listen := env("DREADNODE_LISTEN")
		if s.NetworkMode != "host" || len(s.Ports) != 0 || !strings.HasPrefix(listen, "127.0.0.1:") || ports[listen] {
			t.Errorf("%s: needs the host's network and a 127.0.0.1 port of its own: network %q ports %+v listen %q", name, s.NetworkMode, s.Ports, listen)
		} else {
			ports[listen] = true
		}
	}
	sort.Strings(replicas)
	if len(replicas) != 3 {
		t.Fatalf("want 3 backend replicas besides postgres, got %v", replicas)
	}
}
