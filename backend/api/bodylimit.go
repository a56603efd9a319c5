package api

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// limitBody refuses a body announced larger than MaxBodyBytes at once, and
// cuts one that grows past it while read. A handler whose read was cut
// often reports it as something else (a provider's upload failed, 502 or
// 503), so an error answer after the cut is replaced by the 413 that is
// its real cause.
func (s *server) limitBody(next http.Handler) http.Handler {
	limit := s.cfg.MaxBodyBytes
	if limit <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			httpx.WriteErr(w, &http.MaxBytesError{Limit: limit})
			return
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		g := &bodyGuard{ResponseWriter: w, limit: limit}
		r.Body = &cutBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), cut: &g.cut}
		next.ServeHTTP(g, r)
	})
}

// cutBody notes that the body went past the limit.
type cutBody struct {
	io.ReadCloser
	cut *atomic.Bool
}

func (b *cutBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		b.cut.Store(true)
	}
	return n, err
}

// bodyGuard answers 413 in place of an error status written after the
// body was cut.
type bodyGuard struct {
	http.ResponseWriter
	limit    int64
	cut      atomic.Bool
	wrote    bool
	replaced bool
}

func (g *bodyGuard) WriteHeader(code int) {
	if g.wrote {
		return
	}
	g.wrote = true
	if code >= 400 && g.cut.Load() {
		g.replaced = true
		httpx.WriteErr(g.ResponseWriter, &http.MaxBytesError{Limit: g.limit})
		return
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *bodyGuard) Write(b []byte) (int, error) {
	if !g.wrote {
		g.WriteHeader(http.StatusOK)
	}
	if g.replaced {
		return len(b), nil // the handler's own error body, superseded
	}
	return g.ResponseWriter.Write(b)
}

// Flush lets streaming responses through.
func (g *bodyGuard) Flush() {
	if f, ok := g.ResponseWriter.(http.Flusher); ok && !g.replaced {
		f.Flush()
	}
}

func (g *bodyGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }
