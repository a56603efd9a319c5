package app

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkGetSandbox measures the server-side cost of GET /sandboxes/{id}
// (no network): auth, the record read and the JSON view.
func BenchmarkGetSandbox(b *testing.B) {
	ta := newTestAppB(b)
	id, _ := ta.createB(b)
	req := httptest.NewRequest("GET", "/sandboxes/"+id, nil)
	req.Header.Set("X-API-Key", ta.key)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := httptest.NewRecorder()
			ta.app.Handler.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("GET: %d %s", w.Code, w.Body)
			}
		}
	})
}
