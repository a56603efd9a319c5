package scaleout_test

import (
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
