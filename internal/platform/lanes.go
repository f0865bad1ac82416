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
// as a run is queued. A key is in one lane only, so the queue's promise
// (one key, one worker at a time) holds across the lanes.

// lane returns the queue key belongs in.
func (c *Engine) lane(key string) workqueue.TypedInterface[string] {
	if strings.HasPrefix(key, kindResourceGroup+"/") {
		return c.admit
	}
	return c.queue
}

// admitWorkers is how many workers the admission lane has beside n
// workers of the other: a quarter as many, at least one, none with none.
func admitWorkers(n int) int {
	if n <= 0 {
		return 0
	}
	return max(1, n/4)
}
