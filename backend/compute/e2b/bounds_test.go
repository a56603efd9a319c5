package e2b_test

import (
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// envd is the sandbox's own process: a listing larger than the bounds
// (compute.MaxListEntries entries, compute.MaxMessageBytes per message) is
// refused with a message naming the path, not held.
func TestListingIsBounded(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := ctxT(t)
	inst, err := e.prov.Create(ctx, spec("rec-bounds"))
	if err != nil {
		t.Fatal(err)
	}
	fs := e.prov.(compute.Files)
	long := strings.Repeat("n", 200)
	for i := range compute.MaxListEntries + 1 {
		e.fake.SetFile(inst.Ref.ID, fmt.Sprintf("/big/%s%06d", long, i), nil)
	}
	_, err = fs.ListDir(ctx, inst.Ref, "/big", 1)
	wantKind(t, err, compute.KindInvalid, "/big holds more than 10000 entries")
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("a listing over %d bytes was read: %v", compute.MaxMessageBytes, err)
	}
	// Short names: under the byte bound, over the entry bound.
	for i := range compute.MaxListEntries + 1 {
		e.fake.SetFile(inst.Ref.ID, fmt.Sprintf("/many/%06d", i), nil)
	}
	_, err = fs.ListDir(ctx, inst.Ref, "/many", 1)
	wantKind(t, err, compute.KindInvalid, "/many holds more than 10000 entries")
	e.fake.SetFile(inst.Ref.ID, "/few/a", nil)
	if list, err := fs.ListDir(ctx, inst.Ref, "/few", 1); err != nil || len(list) != 1 {
		t.Fatalf("a small listing: %v %v", list, err)
	}
}
