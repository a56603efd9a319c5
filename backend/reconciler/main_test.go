package reconciler

import (
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// One PostgreSQL cluster for the package; each test gets its own database.
func TestMain(m *testing.M) { pgtest.Main(m) }
