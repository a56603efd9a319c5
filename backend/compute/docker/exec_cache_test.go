package docker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Once the agent's address is known, exec starts at once and the inspect
// runs beside it: a paused sandbox still answers KindConflict (its frozen
// agent would hold the call for a minute), a stopped one too, and a
// stale address is retried at the container's own.
func TestExecAtCachedAgentAddress(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	inst := mustCreate(t, p, testSpec())
	if res := exec(t, p, inst, "echo", "hi"); string(res.Stdout) != "hi\n" {
		t.Fatalf("exec: %+v", res)
	}
	if _, ok := p.envds.get(inst.Ref.ID); !ok {
		t.Fatal("the agent's address is not cached after an exec")
	}
	var out strings.Builder
	err := p.ExecStream(context.Background(), inst.Ref, compute.ExecRequest{Cmd: []string{"echo", "streamed"}}, nil, func(ev compute.ProcessEvent) error {
		if ev.Type == compute.EventStdout {
			out.Write(ev.Data)
		}
		return nil
	})
	if err != nil || out.String() != "streamed\n" {
		t.Fatalf("exec stream at the cached address: %q %v", out.String(), err)
	}

	if err := p.Pause(context.Background(), inst.Ref); err != nil {
		t.Fatal(err)
	}
	// Well under the agent client's one-minute header timeout: the
	// inspect beside the call must end it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = p.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"true"}})
	wantKind(t, err, compute.KindConflict)
	err = p.ExecStream(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"true"}}, nil, func(compute.ProcessEvent) error { return nil })
	wantKind(t, err, compute.KindConflict)
	if _, err := p.Resume(context.Background(), inst.Ref); err != nil {
		t.Fatal(err)
	}

	// A stale address (nothing listens there) is retried at the right one.
	a, _ := p.envds.get(inst.Ref.ID)
	p.envds.put(inst.Ref.ID, envdAddr{url: "http://127.0.0.1:1", token: a.token})
	if res := exec(t, p, inst, "echo", "moved"); string(res.Stdout) != "moved\n" {
		t.Fatalf("exec after a stale address: %+v", res)
	}
	if got, _ := p.envds.get(inst.Ref.ID); got != a {
		t.Fatalf("the cache holds %+v after the retry, want %+v", got, a)
	}
}
