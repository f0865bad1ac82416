package platform

import (
	"slices"
	"sync"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/job"
)

// runOrder keeps each job config's runs in list order (submission, then
// id), as the store's watch reports them, so that a page of one job's
// runs is found by a binary search and read in order: its cost follows
// the page, not the job's runs. A run's key is fixed at its submission;
// the index changes on a run's create and delete only (or an edit from
// outside that changes its job or submission time). Like the other
// indexes it is derived, in memory, never the truth.
type runOrder struct {
	mu    sync.RWMutex
	byJob map[string][]pageKey // job config → its runs' keys, sorted
	keyOf map[string]runPlace  // run → where it is indexed
}

type runPlace struct {
	job string
	key pageKey
}

func newRunOrder() *runOrder {
	return &runOrder{byJob: map[string][]pageKey{}, keyOf: map[string]runPlace{}}
}

// cmpKeys orders list keys, as slices.SortFunc wants.
func cmpKeys(a, b pageKey) int {
	switch {
	case b.after(a):
		return -1
	case a.after(b):
		return 1
	}
	return 0
}

// observe follows a stored run, as finishedRuns.observe does.
func (o *runOrder) observe(d backend.Doc, obj any) {
	if d.Kind != kindRun {
		return
	}
	r, _ := obj.(*job.Run)
	o.mu.Lock()
	defer o.mu.Unlock()
	was, indexed := o.keyOf[d.ID]
	var now runPlace
	if r != nil {
		now = runPlace{job: r.JobID, key: pageKey{r.SubmittedAt, d.ID}}
		if indexed && was.job == now.job && was.key.At.Equal(now.key.At) {
			return // unchanged: the common case, a state change
		}
	}
	if indexed {
		keys := o.byJob[was.job]
		if i, found := slices.BinarySearchFunc(keys, was.key, cmpKeys); found {
			keys = slices.Delete(keys, i, i+1)
		}
		if len(keys) == 0 {
			delete(o.byJob, was.job)
		} else {
			o.byJob[was.job] = keys
		}
		delete(o.keyOf, d.ID)
	}
	if r == nil {
		return
	}
	keys := o.byJob[now.job]
	i, _ := slices.BinarySearchFunc(keys, now.key, cmpKeys)
	o.byJob[now.job] = slices.Insert(keys, i, now.key)
	o.keyOf[d.ID] = now
}

// keys returns at most n of job config jobID's run keys in list order,
// those after from (nil: from the first), copied out of the index.
func (o *runOrder) keys(jobID string, from *pageKey, n int) []pageKey {
	o.mu.RLock()
	defer o.mu.RUnlock()
	keys := o.byJob[jobID]
	i := 0
	if from != nil {
		i, _ = slices.BinarySearchFunc(keys, *from, cmpKeys)
		if i < len(keys) && cmpKeys(keys[i], *from) == 0 {
			i++
		}
	}
	return slices.Clone(keys[i:min(len(keys), i+n)])
}
