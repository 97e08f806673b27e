package gateway

// TryAdmit takes one of the server.max_in_flight slots the generation
// requests share, for other upstream work of a request (a count_tokens
// call), without waiting: ok is false when none is free. release gives the
// slot back; only its first call does.
func (s *Service) TryAdmit() (release func(), ok bool) {
	slot, err := s.admit(nil)
	if err != nil {
		return func() {}, false
	}
	return slot.release, true
}
