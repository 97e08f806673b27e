package secrets

// Wait waits for a read in progress, if any, so that a test reads what the
// refresh left.
func (s *Source) Wait() { s.wg.Wait() }
