package main

// Churn (issue 33, item 4): sandboxes of mixed kinds created and deleted
// in a tight loop by a few concurrent workers, so that the Docker bridge's
// addresses pass from one sandbox to the next (the engine's IPAM hands out
// the lowest free address), with an agent call in each right after it is
// ready. The kinds go round-robin: a plain sandbox, one with a network
// policy (denyOut 0.0.0.0/0: a random MAC address, where the others get
// the engine's MAC derived from the IP), one with autoPause, and a task
// environment (its execute service, through /execute), one in
// -churn-task-every. An address handed from a sandbox with one MAC to one
// with another is what the issue is about: a neighbour entry still naming
// the old MAC makes the new sandbox's first agent call fail. The part
// prints the agent-call failures (goal 0), each failure (first 10) with
// the address's previous holder, the first call's p50/p99, how often
// addresses were reused, and a raw baseline: the first docker exec in a
// fresh raw container on the same bridge.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	sbx "github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/images"
)

var (
	churnN         = flag.Int("churn-n", 1000, "sandboxes the churn part creates and deletes (all kinds)")
	churnC         = flag.Int("churn-c", 4, "concurrent workers of the churn part")
	churnTaskEvery = flag.Int("churn-task-every", 4, "one churned sandbox in this many is a task environment's service (4: as many as each other kind; 0: none)")
	churnTask      = flag.String("churn-task", "web-login", "the task of the churn part's task environments")
)

type churnKind int

const (
	kindPlain churnKind = iota
	kindDenyOut
	kindAutoPause
	kindTask
	nKinds
)

var kindNames = [nKinds]string{"plain", "denyOut", "autoPause", "task"}

func (k churnKind) String() string { return kindNames[k] }

// churnKindOf is the kind of the i-th sandbox: a task environment one in
// -churn-task-every, the three sandbox kinds round-robin otherwise.
func churnKindOf(i int) churnKind {
	if e := *churnTaskEvery; e > 0 && i%e == e-1 {
		return kindTask
	}
	if e := *churnTaskEvery; e > 0 {
		i -= i / e // the sandboxes before i that were not task environments
	}
	return churnKind(i % 3)
}

// churnResult is one churned sandbox.
type churnResult struct {
	i       int
	kind    churnKind
	id      string
	created bool          // ready; else err says why not
	ready   time.Duration // create → ready
	called  bool          // its agent call was made
	first   time.Duration // the first agent call, request → answer
	ok      bool          // the call answered 200 and exit code 0
	status  int
	err     string // the failed call's (or create's) body or error
	ip, mac string
	net     string // the network of ip: the bench's bridge or the environment's own
	prev    *churnResult
	at      time.Time // when its address was recorded
}

// churnHolders tracks, per address, its last holder: an address is held
// by one container at a time and recorded while the container lives, so
// the previous holder of a record is exactly the one before it.
type churnHolders struct {
	mu   sync.Mutex
	last map[string]*churnResult
	uses map[string]int
}

func (h *churnHolders) record(r *churnResult) {
	if r.ip == "" {
		return
	}
	key := r.net + " " + r.ip
	if r.net != benchNetwork {
		key = "task " + r.ip // each environment's network is new; its subnet, and so its addresses, come back
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r.at = time.Now()
	r.prev = h.last[key]
	h.last[key] = r
	h.uses[key]++
}

func churnPart(ctx context.Context) {
	// Registered before the backend, so they run after its removal: the
	// egress rules of sandboxes it force-removed, and the task
	// environments' containers and networks (labelled with the tasks'
	// owner, not the deployment).
	atExit(sweepEgressRules)
	var owner atomic.Value
	atExit(func() {
		if o, _ := owner.Load().(string); o != "" {
			removeTaskGroups(o)
		}
	})
	root, err := images.RepoRoot()
	if err != nil {
		fail(err)
	}
	b := start(ctx, 0, func(c *app.Config) { c.TasksDir = filepath.Join(root, "tasks") })
	defer b.close()
	dep, err := b.app.DB.DeploymentID(ctx)
	if err != nil {
		fail(err)
	}
	owner.Store(dep)

	h := &churnHolders{last: map[string]*churnResult{}, uses: map[string]int{}}
	if *churnTaskEvery > 0 && *churnN >= *churnTaskEvery {
		// Its images are built once (cached by content): the churn then
		// measures environments, not a build.
		t0 := time.Now()
		if r := b.churnTaskEnv(ctx, -1, nil); !r.created {
			fail(fmt.Errorf("churn: the warm-up task environment (%s): %s", *churnTask, r.err))
		}
		fmt.Printf("%-28s %s built and provisioned once in %.1f s (not counted)\n", "churn warm-up", *churnTask, time.Since(t0).Seconds())
	}

	// One sandbox lives through the churn, as on any busy deployment: a
	// bridge that loses its last container loses its carrier and, with it,
	// every neighbour entry, which would hide a stale one.
	if code, body := b.do("POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": 3600}); code != http.StatusCreated {
		fail(fmt.Errorf("churn: the sandbox kept through the churn: %d %s", code, body))
	} else {
		var keeper struct{ SandboxID string }
		_ = json.Unmarshal(body, &keeper)
		defer b.churnDelete("/sandboxes/"+keeper.SandboxID, http.StatusNoContent)
	}

	results := make([]*churnResult, *churnN)
	var next atomic.Int64
	t0 := time.Now()
	parallel(*churnC, func(int) {
		for {
			i := int(next.Add(1)) - 1
			if i >= *churnN || ending() {
				return
			}
			if churnKindOf(i) == kindTask {
				results[i] = b.churnTaskEnv(ctx, i, h)
			} else {
				results[i] = b.churnSandbox(ctx, i, churnKindOf(i), h)
			}
		}
	})
	wall := time.Since(t0)
	if ending() {
		fail(fmt.Errorf("churn: interrupted"))
	}
	raw := rawFirstExecs(ctx, min(max(*churnN/10, 4), 100))
	churnReport(results, h, wall, raw)
}

// churnSandbox creates a sandbox of kind, calls its agent as soon as it is
// ready, records its address and deletes it.
func (b *backend) churnSandbox(ctx context.Context, i int, kind churnKind, h *churnHolders) *churnResult {
	r := &churnResult{i: i, kind: kind, net: benchNetwork}
	req := map[string]any{"waitReady": true, "timeout": 600}
	switch kind {
	case kindDenyOut:
		req["network"] = map[string]any{"denyOut": []string{"0.0.0.0/0"}}
	case kindAutoPause:
		req["autoPause"] = true
	}
	t0 := time.Now()
	code, body, err := b.try("POST", "/sandboxes", req)
	r.ready = time.Since(t0)
	var sb struct{ SandboxID, State, AccessToken string }
	_ = json.Unmarshal(body, &sb)
	r.id = sb.SandboxID
	if sb.SandboxID != "" {
		defer b.churnDelete("/sandboxes/"+sb.SandboxID, http.StatusNoContent)
	}
	if err != nil || code != http.StatusCreated || sb.State != string(sbx.StateRunning) {
		r.status, r.err = code, errOr(err, body)
		return r
	}
	r.created, r.called = true, true
	t1 := time.Now()
	code, body, err = b.try("POST", "/sandboxes/"+sb.SandboxID+"/exec", map[string]any{"cmd": []string{"true"}}, "X-Access-Token", sb.AccessToken)
	r.first = time.Since(t1)
	var res struct{ ExitCode *int }
	_ = json.Unmarshal(body, &res)
	r.status = code
	r.ok = err == nil && code == http.StatusOK && res.ExitCode != nil && *res.ExitCode == 0
	if !r.ok {
		r.err = errOr(err, body)
	}
	r.ip, r.mac = addressOf(ctx, benchNetwork, compute.LabelRecord+"="+sb.SandboxID)
	h.record(r)
	return r
}

// churnTaskEnv provisions a task environment, waits until it is ready,
// runs `true` through /execute at once, records the execute service's
// address and tears the environment down. h nil: a warm-up, not recorded.
func (b *backend) churnTaskEnv(ctx context.Context, i int, h *churnHolders) *churnResult {
	r := &churnResult{i: i, kind: kindTask}
	base := "/api/v1/org/bench/ws/churn/environments"
	t0 := time.Now()
	code, body, err := b.try("POST", base, map[string]any{"task_ref": *churnTask, "timeout_sec": 600})
	var env struct {
		ID             string `json:"id"`
		ExecuteToken   string `json:"execute_token"`
		ExecuteService string `json:"execute_service"`
	}
	_ = json.Unmarshal(body, &env)
	r.id = env.ID
	if err != nil || code != http.StatusCreated || env.ID == "" {
		r.status, r.err = code, errOr(err, body)
		return r
	}
	defer b.churnDelete(base+"/"+env.ID, http.StatusOK)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		code, body, err = b.try("GET", base+"/"+env.ID+"/status?wait=60", nil)
		var st struct {
			State taskenv.State `json:"state"`
			Error *string       `json:"error"`
		}
		_ = json.Unmarshal(body, &st)
		if err == nil && code == http.StatusOK && st.State == taskenv.StateReady {
			break
		}
		if err != nil || code != http.StatusOK || st.State.Terminal() || time.Now().After(deadline) {
			r.status, r.err = code, errOr(err, body)
			return r
		}
	}
	r.ready = time.Since(t0)
	r.created, r.called = true, true
	t1 := time.Now()
	code, body, err = b.try("POST", base+"/"+env.ID+"/execute", map[string]any{"command": []string{"true"}}, tasks.TokenHeader, env.ExecuteToken)
	r.first = time.Since(t1)
	var res struct {
		ExitCode *int `json:"exit_code"`
	}
	_ = json.Unmarshal(body, &res)
	r.status = code
	r.ok = err == nil && code == http.StatusOK && res.ExitCode != nil && *res.ExitCode == 0
	if !r.ok {
		r.err = errOr(err, body)
	}
	if h != nil {
		r.net = compute.GroupNetworkName(env.ID)
		r.ip, r.mac = addressOf(ctx, r.net, compute.LabelGroup+"="+env.ID, compute.LabelService+"="+env.ExecuteService)
		h.record(r)
	}
	return r
}

// churnDelete deletes what path names; a failure is reported, not fatal
// (the backend's removal at the end takes what is left).
func (b *backend) churnDelete(path string, want int) {
	if code, body, err := b.try("DELETE", path, nil); err != nil || code != want {
		fmt.Fprintf(os.Stderr, "bench: churn: DELETE %s: %d %s\n", path, code, errOr(err, body))
	}
}

// try is backend.do with the error returned: a call that fails is a
// figure of this part, not the end of the bench. hdr are header pairs.
func (b *backend) try(method, path string, body any, hdr ...string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequestWithContext(context.Background(), method, b.srv.URL+path, rd)
	req.Header.Set("X-API-Key", b.key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.client.Do(req)
	if err != nil {
		if ending() { // the server closed under it: wait for the removals and exit, as fail does
			fail(err)
		}
		return 0, nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	return res.StatusCode, data, err
}

// ending tells whether the bench's removals are under way (a signal, a
// part that failed): a worker then makes nothing more.
func ending() bool {
	exits.Lock()
	defer exits.Unlock()
	return exits.started
}

func errOr(err error, body []byte) string {
	if err != nil {
		return err.Error()
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// addressOf is the IP and MAC address on net of the container with
// labels, as the engine sees them ("" when it has none).
func addressOf(ctx context.Context, net string, labels ...string) (ip, mac string) {
	f := filters.NewArgs()
	for _, l := range labels {
		f.Add("label", l)
	}
	cs, err := engine.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil || len(cs) == 0 || cs[0].NetworkSettings == nil {
		return "", ""
	}
	if ep := cs[0].NetworkSettings.Networks[net]; ep != nil {
		return ep.IPAddress, ep.MacAddress
	}
	return "", ""
}

// rawFirstExecs is the baseline: n raw containers on the same bridge, by
// as many workers as the churn, each created, started, timed through its
// first docker exec of `true` (create, attach, inspect) and removed.
func rawFirstExecs(ctx context.Context, n int) []time.Duration {
	out := make([]time.Duration, n)
	var next atomic.Int64
	parallel(*churnC, func(int) {
		for {
			i := int(next.Add(1)) - 1
			if i >= n || ending() {
				return
			}
			name := fmt.Sprintf("bench-rawchurn-%d-%s", i, ids.New())
			rawCreateStart(ctx, engine, name)
			if !ending() { // else the removals may have listed the raw containers before this one
				out[i] = timed(func() { rawExec(ctx, engine, name, []string{"true"}) })
			}
			if err := engine.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}); err != nil {
				fail(err)
			}
		}
	})
	return out
}

func churnReport(results []*churnResult, h *churnHolders, wall time.Duration, raw []time.Duration) {
	var perKind [nKinds]int
	var firsts, failures, createFails []*churnResult
	var kindFirst [nKinds][]time.Duration
	var kindReady [nKinds][]time.Duration
	var kindFail [nKinds]int
	for _, r := range results {
		perKind[r.kind]++
		switch {
		case !r.created:
			createFails = append(createFails, r)
		case r.called:
			firsts = append(firsts, r)
			kindFirst[r.kind] = append(kindFirst[r.kind], r.first)
			kindReady[r.kind] = append(kindReady[r.kind], r.ready)
			if !r.ok {
				failures = append(failures, r)
				kindFail[r.kind]++
			}
		}
	}
	var all []time.Duration
	for _, r := range firsts {
		all = append(all, r.first)
	}
	var mix []string
	for k := range nKinds {
		if perKind[k] > 0 {
			mix = append(mix, fmt.Sprintf("%d %s", perKind[k], k))
		}
	}
	// Address reuse: per network kind, the addresses seen, those seen more
	// than once and how many times they came back; and the handovers of an
	// address between containers of different MACs (the case), of
	// which those from a denyOut sandbox (a random MAC) to another kind.
	type reuse struct{ addrs, reused, times, most int }
	var bridge, task reuse
	for key, n := range h.uses {
		r := &bridge
		if strings.HasPrefix(key, "task ") {
			r = &task
		}
		r.addrs++
		if n > 1 {
			r.reused++
			r.times += n - 1
			r.most = max(r.most, n)
		}
	}
	var macChanges, fromDenyOut, failAfterChange, failAfterDenyOut, failToDenyOut int
	for _, r := range results {
		if r.prev == nil || r.prev.mac == r.mac {
			continue
		}
		macChanges++
		fromDeny := r.prev.kind == kindDenyOut && r.kind != kindDenyOut
		if fromDeny {
			fromDenyOut++
		}
		if r.called && !r.ok {
			failAfterChange++
			if fromDeny {
				failAfterDenyOut++
			}
			if r.kind == kindDenyOut && r.prev.kind != kindDenyOut {
				failToDenyOut++
			}
		}
	}
	fmt.Printf("%-28s %d sandboxes (%s) by %d workers in %.1f s, %d addresses reused %d times; agent-call failures %d/%d (goal 0); first call p50 %.1f ms p99 %.1f ms\n",
		"churn", len(results), strings.Join(mix, ", "), *churnC, wall.Seconds(), bridge.reused+task.reused, bridge.times+task.times,
		len(failures), len(firsts), ms(pct(all, 50)), ms(pct(all, 99)))
	fmt.Printf("%-28s bridge %s: %d addresses, %d reused %d times (at most %d uses each), %d handovers to another MAC (%d from a denyOut sandbox to another kind); task networks: %d addresses, %d reused %d times\n",
		"  addresses", benchNetwork, bridge.addrs, bridge.reused, bridge.times, bridge.most, macChanges, fromDenyOut, task.addrs, task.reused, task.times)
	if len(failures) > 0 {
		fmt.Printf("%-28s %d of the %d failures came right after a handover to another MAC: %d from a denyOut sandbox to another kind, %d from another kind to a denyOut sandbox\n",
			"", failAfterChange, len(failures), failAfterDenyOut, failToDenyOut)
	}
	for k := range nKinds {
		if len(kindFirst[k]) == 0 {
			continue
		}
		fmt.Printf("%-28s first call p50 %7.1f ms  p99 %7.1f ms   failures %d/%d   create→ready p50 %7.1f ms\n",
			"  "+k.String(), ms(pct(kindFirst[k], 50)), ms(pct(kindFirst[k], 99)), kindFail[k], len(kindFirst[k]), ms(pct(kindReady[k], 50)))
	}
	if len(raw) > 0 {
		fmt.Printf("%-28s p50 %7.1f ms  p99 %7.1f ms   (%d raw containers on the same bridge, each created, started, exec'd once, removed); ours/raw p50 %.2f×, p99 %.2f×\n",
			"  raw first docker exec", ms(pct(raw, 50)), ms(pct(raw, 99)), len(raw),
			float64(pct(all, 50))/float64(pct(raw, 50)), float64(pct(all, 99))/float64(pct(raw, 99)))
	}
	for j, r := range failures[:min(len(failures), 10)] {
		fmt.Printf("%-28s #%d %s %s after %.1f ms: %d %s%s\n", fmt.Sprintf("  failure %d", j+1), r.i, r.kind, r.id, ms(r.first), r.status, r.err, r.holder())
	}
	if len(createFails) > 0 {
		fmt.Printf("%-28s %d (not counted as agent calls)\n", "  create failures", len(createFails))
		for j, r := range createFails[:min(len(createFails), 10)] {
			fmt.Printf("%-28s #%d %s %s after %.1f ms: %d %s\n", fmt.Sprintf("  create failure %d", j+1), r.i, r.kind, r.id, ms(r.ready), r.status, r.err)
		}
	}
}

// holder describes r's address and who held it before.
func (r *churnResult) holder() string {
	if r.ip == "" {
		return " (address unknown)"
	}
	s := fmt.Sprintf(" (address %s MAC %s", r.ip, r.mac)
	p := r.prev
	if p == nil {
		return s + "; its first holder)"
	}
	s += fmt.Sprintf("; before it #%d %s MAC %s", p.i, p.kind, p.mac)
	if p.mac == r.mac { // the last holder with another MAC, if any
		for p != nil && p.mac == r.mac {
			p = p.prev
		}
		if p != nil {
			s += fmt.Sprintf(", and %.1f s before it #%d %s MAC %s", r.at.Sub(p.at).Seconds(), p.i, p.kind, p.mac)
		}
	}
	return s + ")"
}

// removeTaskGroups force-removes the containers and networks of the task
// environments of owner (a backend's deployment) that its teardowns left.
func removeTaskGroups(owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	by := filters.NewArgs(filters.Arg("label", compute.LabelGroupOwner+"="+owner))
	cs, err := engine.ContainerList(ctx, container.ListOptions{All: true, Filters: by})
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: listing the task containers of %s to remove them: %v\n", owner, err)
		return
	}
	parallel(len(cs), func(i int) {
		_ = engine.ContainerRemove(ctx, cs[i].ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	})
	nets, err := engine.NetworkList(ctx, network.ListOptions{Filters: by})
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: listing the task networks of %s to remove them: %v\n", owner, err)
		return
	}
	for _, n := range nets {
		_ = engine.NetworkRemove(ctx, n.ID)
	}
}
