package lifecycle

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// The buffered exec answer is encoded a chunk at a time, and is byte for
// byte what encoding/json writes for the whole object: characters cut by a
// chunk boundary, invalid UTF-8, NUL and HTML characters included.
func TestWriteExecResultMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "é", "€", "😀", "\x00", "<&>", "\xff", "\xe2\x82", "\x80\x80\x80\x80", "\n", "\"\\", "\u2028"}
	for round := range 50 {
		var out, errOut bytes.Buffer
		for out.Len() < round*3000 {
			out.WriteString(pieces[rng.IntN(len(pieces))])
			errOut.WriteString(strings.Repeat("x", rng.IntN(3)) + pieces[rng.IntN(len(pieces))])
		}
		res := compute.ExecResult{ExitCode: round - 3, Stdout: out.Bytes(), Stderr: errOut.Bytes()}
		rec := httptest.NewRecorder()
		writeExecResult(rec, res)
		var want bytes.Buffer
		_ = json.NewEncoder(&want).Encode(map[string]any{"exitCode": res.ExitCode, "stdout": string(res.Stdout), "stderr": string(res.Stderr)})
		if !bytes.Equal(rec.Body.Bytes(), want.Bytes()) {
			t.Fatalf("round %d: the answer differs from encoding/json's (%d vs %d bytes)", round, rec.Body.Len(), want.Len())
		}
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("round %d: %d %q", round, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
}

// The hand-encoded answer is the document's ExecResult: byte for byte what
// encoding/json writes for the generated type.
func TestWriteExecResultIsTheDocumentsExecResult(t *testing.T) {
	for _, truncated := range []bool{false, true} {
		res := compute.ExecResult{ExitCode: 7, Stdout: []byte("out\n<é>"), Stderr: []byte("err\x00"), Truncated: truncated}
		rec := httptest.NewRecorder()
		writeExecResult(rec, res)
		var want bytes.Buffer
		doc := apitypes.ExecResult{ExitCode: res.ExitCode, Stdout: string(res.Stdout), Stderr: string(res.Stderr)}
		if truncated {
			doc.Truncated = &truncated
		}
		_ = json.NewEncoder(&want).Encode(doc)
		if !bytes.Equal(rec.Body.Bytes(), want.Bytes()) {
			t.Fatalf("answer %s, the generated ExecResult encodes as %s", rec.Body.Bytes(), want.Bytes())
		}
	}
}
