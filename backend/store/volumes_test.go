package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// Volumes are per org: a name is unique within its org only, another org's
// volume is not found, the count limit holds, and a deleted volume is gone.
func TestVolumesPerOrg(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		a := &Volume{ID: "vol_a", OrgID: "acme", Name: "data", Provider: "docker"}
		if err := db.CreateVolume(ctx, a, 2); err != nil {
			t.Fatal(err)
		}
		if err := db.CreateVolume(ctx, &Volume{ID: "vol_b", OrgID: "acme", Name: "data"}, 0); !errors.Is(err, ErrVolumeExists) {
			t.Fatalf("a name taken in the org: %v", err)
		}
		if err := db.CreateVolume(ctx, &Volume{ID: "vol_c", OrgID: "other", Name: "data"}, 1); err != nil {
			t.Fatalf("the same name in another org: %v", err)
		}
		if err := db.CreateVolume(ctx, &Volume{ID: "vol_d", OrgID: "acme", Name: "second"}, 2); err != nil {
			t.Fatal(err)
		}
		if err := db.CreateVolume(ctx, &Volume{ID: "vol_e", OrgID: "acme", Name: "third"}, 2); !errors.Is(err, ErrVolumeCount) {
			t.Fatalf("past max 2: %v", err)
		}
		if _, err := db.GetVolume(ctx, "other", "vol_a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another org's volume: %v", err)
		}
		got, err := db.VolumeByName(ctx, "acme", "data")
		if err != nil || got.ID != "vol_a" || got.Provider != "docker" || !got.BytesAt.IsZero() {
			t.Fatalf("by name: %+v %v", got, err)
		}
		at := time.Now()
		if err := db.SetVolumeBytes(ctx, "vol_a", 4096, at); err != nil {
			t.Fatal(err)
		}
		if err := db.SetVolumeBytes(ctx, "vol_d", 1000, at); err != nil {
			t.Fatal(err)
		}
		n, bytes, err := db.VolumeUsage(ctx, "acme")
		if err != nil || n != 2 || bytes != 5096 {
			t.Fatalf("usage: %d %d %v", n, bytes, err)
		}
		list, err := db.ListVolumes(ctx, "acme")
		if err != nil || len(list) != 2 || list[0].ID != "vol_a" || list[0].Bytes != 4096 || list[0].BytesAt.UnixNano() != at.UnixNano() {
			t.Fatalf("list: %+v %v", list, err)
		}
		if all, err := db.ListVolumes(ctx, ""); err != nil || len(all) != 3 {
			t.Fatalf("every org's: %d %v", len(all), err)
		}
		if err := db.DeleteVolume(ctx, "other", "vol_a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleting another org's volume: %v", err)
		}
		if err := db.DeleteVolume(ctx, "acme", "vol_a"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.GetVolume(ctx, "acme", "vol_a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		if err := db.CreateVolume(ctx, &Volume{ID: "vol_f", OrgID: "acme", Name: "data"}, 2); err != nil {
			t.Fatalf("the name is free again: %v", err)
		}
	})
}

// The count quota holds under concurrent creates of one org: on
// PostgreSQL (READ COMMITTED) each create counted the org's volumes before
// any of the others had committed, so several passed a quota of 1.
func TestVolumeQuotaUnderConcurrentCreates(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for round := range 5 {
			org := fmt.Sprintf("racing%d", round)
			const n = 8
			errs := make(chan error, n)
			start := make(chan struct{})
			for i := range n {
				go func() {
					<-start
					errs <- db.CreateVolume(ctx, &Volume{ID: fmt.Sprintf("vol_%s_%d", org, i), OrgID: org, Name: fmt.Sprintf("v%d", i), Provider: "docker"}, 1)
				}()
			}
			close(start)
			made := 0
			for range n {
				switch err := <-errs; {
				case err == nil:
					made++
				case !errors.Is(err, ErrVolumeCount):
					t.Fatalf("a racing create: %v", err)
				}
			}
			if count, _, err := db.VolumeUsage(ctx, org); err != nil || made != 1 || count != 1 {
				t.Fatalf("round %d: %d creates passed a max_volumes of 1, the org holds %d (%v)", round, made, count, err)
			}
		}
	})
}
