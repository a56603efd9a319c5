package tasks

// RemoteChanged wakes the waiters (GET …/status?wait=) of environment id,
// which another replica sharing the database changed. It never blocks.
func (s *Service) RemoteChanged(id string) { s.hub.Notify(id) }

// Resync wakes every waiter: changes of other replicas may have been missed.
func (s *Service) Resync() { s.hub.NotifyAll() }
