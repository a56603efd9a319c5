package client

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// What the server encodes with the generated type, the client reads back
// whole: the timeout an import needs, service URLs as {url, host, port},
// times, the diagnostic.
func TestSandboxReadsTheServersType(t *testing.T) {
	t.Parallel()
	started := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	diag := "image missing"
	exit := 3
	served := apitypes.Sandbox{SandboxID: "sb1", TemplateID: "base", State: SandboxFailed, CreatedAt: started,
		StartedAt: &started, CPUCount: 2, MemoryMB: 512, Metadata: map[string]string{"k": "v"}, AutoPause: true,
		Timeout: 900, EnvdURL: "http://127.0.0.1:8080/sandboxes/sb1", Diagnostic: &diag, ExitCode: &exit,
		ServiceURLs: map[string]apitypes.ServiceURL{"8080": {URL: "http://127.0.0.1:8080/sandboxes/sb1/proxy/8080/", Host: "127.0.0.1", Port: 8080}},
		Timeline:    []apitypes.SandboxTimelineEntry{{Phase: apitypes.SandboxTimelineEntryPhasePending, At: started}}}
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, served) }))
	sb, err := c.GetSandbox(context.Background(), "sb1")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Timeout != 900 || sb.CPUCount != 2 || !sb.AutoPause || sb.ExitCode == nil || *sb.ExitCode != 3 {
		t.Errorf("fields: %+v", sb.Sandbox)
	}
	if got := TimeText(sb.StartedAt); got != "2026-01-02T03:04:05.0000006Z" {
		t.Errorf("startedAt = %q", got)
	}
	if sb.EndAt != nil || TimeText(sb.EndAt) != "" {
		t.Errorf("endAt = %v", sb.EndAt)
	}
	if sb.DiagnosticText() != diag {
		t.Errorf("diagnostic = %q", sb.DiagnosticText())
	}
	if ep := sb.ServiceURLs["8080"]; ep != served.ServiceURLs["8080"] {
		t.Errorf("serviceURLs = %+v", sb.ServiceURLs)
	}
	if len(sb.Timeline) != 1 || sb.Timeline[0].Phase != "pending" {
		t.Errorf("timeline = %+v", sb.Timeline)
	}
}
