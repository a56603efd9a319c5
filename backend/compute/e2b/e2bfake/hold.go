package e2bfake

import "context"

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
