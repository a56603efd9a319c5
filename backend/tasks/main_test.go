package tasks_test

import (
	"os"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// TestMain shares one throwaway PostgreSQL cluster among the tests that run
// on both databases, except in the helper process TestCrashKill9 starts
// (it is SIGKILLed, and opens the database it is given, and the agent
// built by the test that started it). The agent the tests built is removed
// at the end.
func TestMain(m *testing.M) {
	if os.Getenv("TASKS_HELPER_DB") != "" {
		os.Exit(m.Run())
	}
	pgtest.Main(m, agentbin.Cleanup)
}
