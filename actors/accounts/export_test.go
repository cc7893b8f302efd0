package accounts

// FillHashSlots takes every password-hashing slot of s until release.
func FillHashSlots(s *Service) (release func()) {
	for range cap(s.hashing) {
		s.hashing <- struct{}{}
	}
	return func() {
		for range cap(s.hashing) {
			<-s.hashing
		}
	}
}
