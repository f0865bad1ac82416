package platform

import "strings"

// admission reports whether key is in the admission lane (package
// runner): a resource group's steps, which admit its queued runs, and its
// settling steps (settleReconciler). Behind a backlog of run steps those
// would be late, and the account would grow with pending holds towards
// its bound, which refuses new ones.
func admission(key string) bool {
	return strings.HasPrefix(key, kindResourceGroup+"/") || strings.HasPrefix(key, keySettle+"/")
}
