package scaleout_test

import (
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/replicas"
)

// TestCutReplicaActsOnNothingItLost is TestFrozenReplicaActsOnNothingItLost
// with replica A cut from PostgreSQL instead of frozen: A keeps running and
// keeps its Docker engine while its leases run out and B takes its work
// over, so only its own judgement of its leases (mayAct) keeps it from
// starting or removing containers it no longer holds; once the link heals
// its late writes must affect nothing (fences) and it must bill nothing
// twice.
func TestCutReplicaActsOnNothingItLost(t *testing.T) {
	t.Parallel()
	db := pgtest.Database(t)
	link := startDBLink(t, db)
	s := replicas.Start(t, replicas.Options{N: 2, DatabaseURL: db,
		Env: map[string]string{"DREADNODE_SETTLE_INTERVAL": "300ms"},
		EnvOf: func(i int) map[string]string {
			if i == 0 {
				return map[string]string{"DREADNODE_DATABASE_URL": link.URL}
			}
			return nil
		}})
	replicaLosesItsWork(t, s, link.Cut, func() {
		if link.Held() == 0 {
			t.Fatal("A sent nothing to PostgreSQL while cut: the cut was not tested")
		}
		link.Heal()
	})
}
