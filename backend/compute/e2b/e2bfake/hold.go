package e2bfake

import (
	"context"
	"time"
)

// Hold (one per route at a time) makes requests to route wait (a slow E2B) until release is called or
// the client gives up. release is idempotent; the test's cleanup releases
// every hold anyway, so a failed test never leaves requests hanging.
func (s *Server) Hold(route string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	if s.holds == nil {
		s.holds = map[string]chan struct{}{}
	}
	s.holds[route] = ch
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.holds[route] == ch {
			close(ch)
			delete(s.holds, route)
		}
	}
}

func (s *Server) releaseHolds() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for route, ch := range s.holds {
		close(ch)
		delete(s.holds, route)
	}
}

// Held reports how many requests wait in a Hold now.
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func (s *Server) waitHold(ctx context.Context, route string) {
	s.mu.Lock()
	ch := s.holds[route]
	if ch != nil {
		s.held++
	}
	s.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
	s.mu.Lock()
	s.held--
	s.mu.Unlock()
}

// SetLatency makes every request to route take at least d before it is
// answered, as E2B's own API does (a create takes hundreds of milliseconds
// in the cloud, ~0 in this fake): benchmarks then measure how many
// operations a backend keeps in flight rather than this machine's CPU.
func (s *Server) SetLatency(route string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latency == nil {
		s.latency = map[string]time.Duration{}
	}
	s.latency[route] = d
}

func (s *Server) waitLatency(ctx context.Context, route string) {
	s.mu.Lock()
	d := s.latency[route]
	s.mu.Unlock()
	if d <= 0 {
		return
	}
	t := time.NewTimer(d) // the simulated cloud's response time, not synchronisation
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
