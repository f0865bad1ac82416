package kube

// SetListPage sets how many objects one page of s's ListLatest holds, so
// that a test lists a few objects in several pages.
func SetListPage(s *Store, n int64) { s.listPage = n }
