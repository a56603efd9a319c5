// Package bench measures the provider's fan-out: `terraform apply` of 10
// dreadnode_sandbox resources with -parallelism=10 against the slowest single
// sandbox create of the same run (ratio, target at most 1.3). It also
// reports the apply against the slowest create done alone (ratio-vs-solo)
// and the backend's own create→running times, which show how much of a
// slowdown under fan-out is the backend's.
//
// It drives the real Terraform CLI (TF_ACC_TERRAFORM_PATH, else terraform on
// PATH, else $GOPATH/bin/terraform; never downloaded) with the provider built
// from this repository through dev_overrides, against a real backend on the
// real Docker engine:
//
//	go test ./provider/bench -run '^$' -bench ParallelSandboxes -benchtime 1x -v
//
// DREADNODE_BENCH_SOLO (default 3) is the number of single creates measured,
// DREADNODE_BENCH_N (default 10) the number of parallel ones,
// DREADNODE_BENCH_MAX_RATIO (default 1.3) the ratio above which it fails.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

const mainTF = `
terraform {
  required_providers {
    dreadnode = {
      source = "dreadnode/dreadnode"
    }
  }
}

variable "n" {
  type = number
}

resource "dreadnode_sandbox" "s" {
  count    = var.n
  timeout  = 900
  metadata = { bench = "parallel-create" }
}
`

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && v > 0 {
		return v
	}
	return def
}

// terraformPath finds a local Terraform CLI or fails.
func terraformPath(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("TF_ACC_TERRAFORM_PATH"); p != "" {
		return p
	}
	if p, err := exec.LookPath("terraform"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, _ := os.UserHomeDir()
		gopath = filepath.Join(home, "go")
	}
	p := filepath.Join(gopath, "bin", "terraform")
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
		return p
	}
	tb.Fatalf("the benchmark needs the Terraform CLI: set TF_ACC_TERRAFORM_PATH or put terraform on PATH")
	return ""
}

// workspace is a Terraform working directory using the locally built provider.
type workspace struct {
	tb  testing.TB
	tf  string
	dir string
	env []string
}

func newWorkspace(tb testing.TB, b *backendproc.Backend) *workspace {
	tb.Helper()
	tf := terraformPath(tb)
	root, err := backendproc.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	pluginDir := tb.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "terraform-provider-dreadnode"), ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("building the provider: %v\n%s", err, out)
	}
	dir := tb.TempDir()
	rc := filepath.Join(dir, "terraformrc")
	cliConfig := fmt.Sprintf(`provider_installation {
  dev_overrides {
    "dreadnode/dreadnode" = %q
  }
  direct {}
}
`, pluginDir)
	if err := os.WriteFile(rc, []byte(cliConfig), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(mainTF), 0o644); err != nil {
		tb.Fatal(err)
	}
	env := append(os.Environ(),
		"TF_CLI_CONFIG_FILE="+rc,
		"TF_IN_AUTOMATION=1",
		"CHECKPOINT_DISABLE=1",
		"DREADNODE_API_URL="+b.URL,
		"DREADNODE_API_KEY="+b.APIKey,
		"DREADNODE_ORG="+b.Org,
		"DREADNODE_WORKSPACE=bench",
	)
	return &workspace{tb: tb, tf: tf, dir: dir, env: env}
}

// run runs terraform with args and returns its stdout.
func (w *workspace) run(args ...string) []byte {
	w.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.tf, args...)
	cmd.Dir = w.dir
	cmd.Env = w.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		w.tb.Fatalf("terraform %s: %v\n%s\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// applyResult is what one `terraform apply -json` reported.
type applyResult struct {
	creates map[string]time.Duration // per resource: apply_start → apply_complete
	span    time.Duration            // first apply_start → last apply_complete
	wall    time.Duration            // the whole terraform process
}

func (r applyResult) slowest() time.Duration {
	var m time.Duration
	for _, d := range r.creates {
		m = max(m, d)
	}
	return m
}

// apply creates n sandboxes with the given parallelism.
func (w *workspace) apply(n, parallelism int) applyResult {
	w.tb.Helper()
	start := time.Now()
	out := w.run("apply", "-auto-approve", "-json", "-input=false",
		fmt.Sprintf("-parallelism=%d", parallelism), fmt.Sprintf("-var=n=%d", n))
	res := applyResult{creates: map[string]time.Duration{}, wall: time.Since(start)}
	starts := map[string]time.Time{}
	var first, last time.Time
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var msg struct {
			Type      string `json:"type"`
			Timestamp string `json:"@timestamp"`
			Hook      struct {
				Action   string `json:"action"`
				Resource struct {
					Addr string `json:"addr"`
				} `json:"resource"`
			} `json:"hook"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.Hook.Action != "create" {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, msg.Timestamp)
		if err != nil {
			w.tb.Fatalf("timestamp %q: %v", msg.Timestamp, err)
		}
		addr := msg.Hook.Resource.Addr
		switch msg.Type {
		case "apply_start":
			starts[addr] = ts
			if first.IsZero() || ts.Before(first) {
				first = ts
			}
		case "apply_complete":
			res.creates[addr] = ts.Sub(starts[addr])
			if ts.After(last) {
				last = ts
			}
		}
	}
	if len(res.creates) != n {
		w.tb.Fatalf("apply reported %d creates, want %d:\n%s", len(res.creates), n, out)
	}
	res.span = last.Sub(first)
	return res
}

// serverStartTimes returns, for every live sandbox, the time the backend
// took from accepting the create to running (from the sandbox's timeline).
func serverStartTimes(tb testing.TB, c *client.Client) []time.Duration {
	tb.Helper()
	list, err := c.ListSandboxes(context.Background(), []string{"running"}, map[string]string{"bench": "parallel-create"})
	if err != nil {
		tb.Fatal(err)
	}
	var out []time.Duration
	for _, sb := range list {
		tl := sb.Timeline
		if len(tl) == 0 {
			continue
		}
		for _, e := range tl {
			if e.Phase == "running" {
				out = append(out, e.At.Sub(tl[0].At))
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (w *workspace) destroy() {
	w.tb.Helper()
	w.run("destroy", "-auto-approve", "-input=false", "-parallelism=10", "-var=n=0")
}

func BenchmarkParallelSandboxes(b *testing.B) {
	solo := envInt("DREADNODE_BENCH_SOLO", 3)
	n := envInt("DREADNODE_BENCH_N", 10)
	maxRatio := envFloat("DREADNODE_BENCH_MAX_RATIO", 1.3)

	be := backendproc.Start(b, backendproc.Options{})
	w := newWorkspace(b, be)
	c, err := client.New(client.Config{BaseURL: be.URL, APIKey: be.APIKey})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		// Leave nothing behind even when a step failed.
		cmd := exec.Command(w.tf, "destroy", "-auto-approve", "-input=false", "-var=n=0")
		cmd.Dir, cmd.Env = w.dir, w.env
		_ = cmd.Run()
	})

	for i := 0; i < b.N; i++ {
		// Warm-up: the first create pays one-time costs (provider start,
		// the backend's first container, page cache).
		w.apply(1, 1)
		w.destroy()

		var singles, singleServer []time.Duration
		for j := 0; j < solo; j++ {
			r := w.apply(1, 1)
			singles = append(singles, r.slowest())
			singleServer = append(singleServer, serverStartTimes(b, c)...)
			w.destroy()
		}
		sort.Slice(singles, func(a, c int) bool { return singles[a] < singles[c] })
		slowestSingle := singles[len(singles)-1]

		par := w.apply(n, n)
		parServer := serverStartTimes(b, c)
		w.destroy()

		// ratio: the parallel apply against the slowest single create of
		// that same apply (does the fan-out really run in parallel?);
		// baseline: against the slowest create done alone (does the backend
		// slow down under fan-out?).
		ratio := par.span.Seconds() / par.slowest().Seconds()
		baseline := par.span.Seconds() / slowestSingle.Seconds()
		b.ReportMetric(slowestSingle.Seconds(), "s/solo-create")
		b.ReportMetric(par.slowest().Seconds(), "s/slowest-create")
		b.ReportMetric(par.span.Seconds(), "s/parallel-apply")
		b.ReportMetric(ratio, "ratio")
		b.ReportMetric(baseline, "ratio-vs-solo")
		b.Logf("single creates (%d): %v; slowest %v", solo, singles, slowestSingle.Round(time.Millisecond))
		var per []string
		for _, addr := range sortedKeys(par.creates) {
			per = append(per, fmt.Sprintf("%s=%v", addr, par.creates[addr].Round(time.Millisecond)))
		}
		b.Logf("parallel apply of %d (parallelism %d): span %v (process %v); per create: %s",
			n, n, par.span.Round(time.Millisecond), par.wall.Round(time.Millisecond), strings.Join(per, " "))
		b.Logf("backend create→running: single %v; parallel %v", roundAll(singleServer), roundAll(parServer))
		b.Logf("ratio = parallel apply span / slowest create in it = %.2f (target <= %.2f)", ratio, maxRatio)
		b.Logf("ratio-vs-solo = parallel apply span / slowest create alone = %.2f", baseline)
		if ratio > maxRatio {
			b.Errorf("the parallel apply took %.2fx its slowest create, above the target %.2fx: creates are being serialised", ratio, maxRatio)
		}
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

func sortedKeys(m map[string]time.Duration) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
