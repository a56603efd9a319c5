package computetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// GroupSuite checks what every compute.GroupProvider promises, on g: a group
// of at least two services whose images (or templates) p has, exposing
// some, with execIn a long-running service that has echo and false. The
// group's members are brought up, listed, executed in, adopted by a second
// Bring, paused, resumed and removed together; nothing of it is left.
func GroupSuite(t *testing.T, p compute.GroupProvider, g *compute.Group, execIn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Cleanup(func() { _ = p.Remove(context.WithoutCancel(ctx), g.ID) })
	if err := p.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	res, err := p.Bring(ctx, g)
	if err != nil {
		t.Fatalf("bring: %v", err)
	}
	if len(res.Containers) != len(g.Services) || res.Adopted != 0 {
		t.Fatalf("bring started %v (adopted %d), want one instance for each of %d services", res.Containers, res.Adopted, len(g.Services))
	}
	for svc := range g.Services {
		_, exposed := g.Expose[svc]
		if ep, ok := res.Endpoints[svc]; ok != exposed || (ok && (ep.URL == "" || ep.Host == "" || ep.Port == 0)) {
			t.Fatalf("service %s: endpoint %+v (present %v), exposed %v", svc, ep, ok, exposed)
		}
	}
	members := func() map[string]compute.GroupMember {
		t.Helper()
		snap, err := p.Snapshot(ctx)
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		out := map[string]compute.GroupMember{}
		for _, m := range snap.Containers[g.ID] {
			if _, dup := out[m.Service]; dup || m.GroupID != g.ID {
				t.Fatalf("snapshot: member %+v twice or of another group", m)
			}
			out[m.Service] = m
		}
		return out
	}
	for svc, m := range members() {
		if res.Containers[svc] != m.ID || m.State != string(compute.StatusRunning) {
			t.Fatalf("snapshot lists %s as %+v, bring said %s", svc, m, res.Containers[svc])
		}
	}
	if got := len(members()); got != len(g.Services) {
		t.Fatalf("snapshot lists %d members, want %d", got, len(g.Services))
	}

	r, err := p.Exec(ctx, g.ID, execIn, []string{"echo", "hi"}, 20*time.Second, 1<<20)
	if err != nil || r.ExitCode != 0 || string(r.Output) != "hi\n" || r.TimedOut || r.Truncated {
		t.Fatalf("exec echo hi in %s: %+v %v", execIn, r, err)
	}
	if r, err = p.Exec(ctx, g.ID, execIn, []string{"false"}, 20*time.Second, 1<<20); err != nil || r.ExitCode != 1 {
		t.Fatalf("exec false: %+v %v", r, err)
	}
	if _, err = p.Exec(ctx, g.ID, "no-such-service", []string{"echo"}, 20*time.Second, 1<<20); !errors.Is(err, compute.ErrNotRunning) {
		t.Fatalf("exec in a service the group lacks: %v, want ErrNotRunning", err)
	}
	var evs []string
	sr, err := p.ExecStream(ctx, g.ID, execIn, []string{"echo", "hi"}, 20*time.Second, func(ev compute.ProcessEvent) error {
		evs = append(evs, ev.Type)
		return nil
	})
	if err != nil || sr.ExitCode != 0 || len(evs) < 3 || evs[0] != compute.EventStart || evs[len(evs)-1] != compute.EventExit ||
		!slices.Contains(evs, compute.EventStdout) {
		t.Fatalf("exec stream: %+v %v %v", sr, err, evs)
	}

	// A second Bring (a restarted worker) adopts every member.
	res2, err := p.Bring(ctx, g)
	if err != nil || res2.Adopted != len(g.Services) {
		t.Fatalf("second bring: %+v %v", res2, err)
	}
	for svc, id := range res.Containers {
		if res2.Containers[svc] != id {
			t.Fatalf("second bring replaced %s: %s -> %s", svc, id, res2.Containers[svc])
		}
	}

	if err := p.Pause(ctx, g.ID); err != nil {
		t.Fatalf("pause: %v", err)
	}
	for svc, m := range members() {
		if m.State != string(compute.StatusPaused) {
			t.Fatalf("after pause, %s is %s", svc, m.State)
		}
	}
	if _, err = p.Exec(ctx, g.ID, execIn, []string{"echo", "hi"}, 20*time.Second, 1<<20); !errors.Is(err, compute.ErrNotRunning) {
		t.Fatalf("exec while paused: %v, want ErrNotRunning", err)
	}
	if err := p.Unpause(ctx, g.ID); err != nil {
		t.Fatalf("unpause: %v", err)
	}
	for svc, m := range members() {
		if m.State != string(compute.StatusRunning) {
			t.Fatalf("after unpause, %s is %s", svc, m.State)
		}
	}
	if r, err = p.Exec(ctx, g.ID, execIn, []string{"echo", "again"}, 20*time.Second, 1<<20); err != nil || string(r.Output) != "again\n" {
		t.Fatalf("exec after unpause: %+v %v", r, err)
	}

	n, err := p.RemoveCount(ctx, g.ID)
	if err != nil || n < len(g.Services) {
		t.Fatalf("remove: %d %v, want at least %d", n, err, len(g.Services))
	}
	if left := members(); len(left) != 0 {
		t.Fatalf("after remove: %v", left)
	}
	if n, err := p.RemoveCount(ctx, g.ID); err != nil || n != 0 {
		t.Fatalf("remove again: %d %v", n, err)
	}
	if _, err = p.Exec(ctx, g.ID, execIn, []string{"echo"}, 20*time.Second, 1<<20); !errors.Is(err, compute.ErrNotRunning) {
		t.Fatalf("exec after remove: %v, want ErrNotRunning", err)
	}
}
