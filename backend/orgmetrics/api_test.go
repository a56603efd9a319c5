package orgmetrics_test

import (
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/appenv"
)

// The native routes answer the document's OrgMetrics and OrgMetricMax
// (apitest validates every response against it), with every field present.
func TestNativeRoutesAnswerTheDocumentsShapes(t *testing.T) {
	e := appenv.New(t, appenv.Opts{NoLoops: true})
	s := e.Must(200, "GET", "/api/v1/org/org1/metrics", nil)
	for _, k := range []string{"start", "end", "step_seconds", "points"} {
		if _, ok := s[k]; !ok {
			t.Fatalf("series lacks %s: %v", k, s)
		}
	}
	if _, ok := s["points"].([]any); !ok { // empty: the org has run nothing yet
		t.Fatalf("series points: %v", s["points"])
	}
	m := e.Must(200, "GET", "/api/v1/org/org1/metrics/max?metric=sandbox_start_rate", nil)
	if m["metric"] != "sandbox_start_rate" || m["value"] != float64(0) || m["timestamp"] == nil {
		t.Fatalf("max: %v", m)
	}
	if r := e.Req("GET", "/api/v1/org/org1/metrics/max", nil); r.Code != 400 {
		t.Fatalf("max without metric: %s", r)
	}
}
