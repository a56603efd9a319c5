package store

import (
	"context"
	"testing"
)

// WatchKey: a revocation calls the watches of that key once (not another
// key's, not a stopped one's), and a watch of a key already revoked is
// called at once (a revocation between authentication and the watch is
// not missed).
func TestWatchKey(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	org, _, err := db.EnsureOrg(ctx, "o1", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"key-a", "key-b"} {
		if err := db.EnsureAPIKey(ctx, org.ID, k); err != nil {
			t.Fatal(err)
		}
	}
	a, err := db.Authenticate(ctx, "key-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.Authenticate(ctx, "key-b")
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	db.WatchKey(ctx, a.Hash, func() { calls["a"]++ })
	stop := db.WatchKey(ctx, a.Hash, func() { calls["a stopped"]++ })
	stop()
	db.WatchKey(ctx, b.Hash, func() { calls["b"]++ })
	if err := db.RevokeAPIKey(ctx, org.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeAPIKey(ctx, org.ID, a.ID); err != nil { // again: no second call
		t.Fatal(err)
	}
	if calls["a"] != 1 || calls["a stopped"] != 0 || calls["b"] != 0 {
		t.Fatalf("after revoking a: calls %v, want a once only", calls)
	}
	db.WatchKey(ctx, a.Hash, func() { calls["a late"]++ })
	if calls["a late"] != 1 {
		t.Fatalf("a watch of a revoked key was not called at once: %v", calls)
	}
}
