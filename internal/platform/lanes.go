package platform

import (
	"strings"

	"k8s.io/client-go/util/workqueue"
)

// Admission has a lane of its own. A resource group's step admits every
// queued run that fits in one compare-and-swap of its account; the steps
// of the runs it admits (their clusters made, placed, submitted) each
// write several objects. In one queue the group's next step waits behind
// every run step queued before it, so that admission runs at the pace of
// provisioning; in its own lane, with workers of its own, it runs as soon
// as a run is queued. The group's settling steps (settleReconciler) are
// in that lane too: behind a backlog of run steps they would be late, and
// the account would grow with pending holds towards its bound, which
// refuses new ones; beside the group's steps, with two workers at least,
// one settling step never holds the lane alone. A key is in one lane
// only, so the queue's promise (one key, one worker at a time) holds
// across the lanes.

// lane returns the queue key belongs in.
func (c *Engine) lane(key string) workqueue.TypedInterface[string] {
	if strings.HasPrefix(key, kindResourceGroup+"/") || strings.HasPrefix(key, keySettle+"/") {
		return c.admit
	}
	return c.queue
}

// admitWorkers is how many workers the admission lane has beside n
// workers of the other: a quarter as many, at least two, none with none.
func admitWorkers(n int) int {
	if n <= 0 {
		return 0
	}
	return max(2, n/4)
}
