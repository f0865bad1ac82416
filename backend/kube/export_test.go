package kube

// SetListPage sets how many objects one page of s's ListLatest holds, so
// that a test lists a few objects in several pages.
func SetListPage(s *Store, n int64) { s.listPage = n }

// SetMaxLogRead sets how much of a logs answer is read, for a test of the
// bound that need not send a GiB; restore puts the bound back.
func SetMaxLogRead(n int64) (restore func()) {
	old := maxLogRead
	maxLogRead = n
	return func() { maxLogRead = old }
}
