package platform

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/internal/queue"
	"github.com/aidlc/dlc/job"
)

// queues is each resource group's queue of waiting on-demand runs, derived
// from the stored runs as the store's watch reports them: an index in
// memory that a restart rebuilds from the store, never the truth. A run
// joins when it is stored pending and leaves when it is not; the quota
// reconciler takes admitted runs out (their reservation on the resource
// group is the truth of the admission) and puts back any whose admission
// did not go through.
type queues struct {
	mu      sync.Mutex
	maxWait queue.QueueOptions
	byRG    map[string]*queue.Queue
	rgOf    map[string]string          // pending run → its resource group
	prioOf  map[string]int             // pending run → its priority
	adds    map[string]map[string]bool // resource group → runs to push, read at the next pass
	queued  map[string]map[string]bool // resource group → runs stored queued, not yet told to wait
	held    map[string]map[string]bool // resource group → pending runs admitted at its last pass
}

func newQueues(o queue.QueueOptions) *queues {
	return &queues{maxWait: o, byRG: map[string]*queue.Queue{}, rgOf: map[string]string{}, prioOf: map[string]int{},
		adds: map[string]map[string]bool{}, queued: map[string]map[string]bool{}, held: map[string]map[string]bool{}}
}

// growthPrefix starts the queue entry of a cluster's request to grow
// (cluster.Growth): "growth/" + the cluster id, which no run id can be.
const growthPrefix = "growth/"

func growthEntry(clusterID string) string { return growthPrefix + clusterID }

// isGrowthEntry reports whether a queue entry is a cluster's growth, not a run.
func isGrowthEntry(id string) bool { return strings.HasPrefix(id, growthPrefix) }

// observe follows a stored run, or a stored cluster's request to grow;
// it only touches memory, so it can run inside the store's watch. It
// returns the resource group whose queue the change took an entry out of
// ("" for none): what waits there changed, and the group looks again
// (headroom yielded to what waited is lent again once nothing does).
func (q *queues) observe(d backend.Doc, deleted bool) (left string) {
	var rg, key string
	var pending bool
	switch d.Kind {
	case kindRun:
		var onDemand bool
		rg, onDemand = strings.CutPrefix(d.Labels[labelTarget], targetResourceGroup)
		key, pending = d.ID, !deleted && onDemand && d.Labels[labelPhase] == phasePending
	case kindCluster:
		rg, key = d.Labels[labelResourceGroup], growthEntry(d.ID)
		pending = !deleted && d.Labels[labelGrowth] == "1" && rg != ""
	default:
		return ""
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	was, known := q.rgOf[key]
	if pending && known && d.Kind == kindCluster {
		// A growth's entry follows its cluster (what it wants, what it
		// has, its priority): taken out and pushed again at the next pass.
		q.forget(was, key)
		known = false
	}
	switch {
	case pending && !known:
		q.rgOf[key] = rg
		q.prioOf[key], _ = strconv.Atoi(d.Labels[labelPriority])
		set(q.adds, rg)[key] = true
		if d.Kind == kindRun && d.Labels[labelState] == string(job.Queued) {
			set(q.queued, rg)[key] = true
		}
	case !pending && known:
		q.forget(was, key)
		return was
	}
	return ""
}

// forget takes key out of rg's queue and its indexes; the caller holds q.mu.
func (q *queues) forget(rg, key string) {
	delete(q.rgOf, key)
	delete(q.prioOf, key)
	delete(q.adds[rg], key)
	delete(q.queued[rg], key)
	if qu := q.byRG[rg]; qu != nil {
		qu.Remove(key)
	}
}

func set(m map[string]map[string]bool, k string) map[string]bool {
	if m[k] == nil {
		m[k] = map[string]bool{}
	}
	return m[k]
}

// take returns rg's queue with its newly pending runs pushed (item makes
// each one's entry; false when it is no longer pending) and the runs
// stored queued since the last take. The caller owns the queue until it
// calls put; a pass of one resource group runs on one worker at a time.
func (q *queues) take(rg string, item func(runID string) (queue.Item, bool)) (*queue.Queue, []string) {
	q.mu.Lock()
	adds := q.adds[rg]
	delete(q.adds, rg)
	var queued []string
	for id := range q.queued[rg] {
		queued = append(queued, id)
	}
	delete(q.queued, rg)
	qu := q.queue(rg)
	q.mu.Unlock()
	q.pushAll(rg, adds, item)
	return qu, queued
}

// queue returns rg's queue, made if need be; the caller holds q.mu.
func (q *queues) queue(rg string) *queue.Queue {
	qu := q.byRG[rg]
	if qu == nil {
		qu = queue.NewQueue(q.maxWait)
		q.byRG[rg] = qu
	}
	return qu
}

func (q *queues) pushAll(rg string, ids map[string]bool, item func(string) (queue.Item, bool)) {
	for id := range ids {
		if it, ok := item(id); ok {
			q.push(rg, it)
		}
	}
}

// order returns rg's queue in admission order, its newly pending runs
// pushed first (as take does, leaving the runs stored queued for the
// quota reconciler).
func (q *queues) order(rg string, item func(string) (queue.Item, bool)) []queue.Item {
	q.pushAdds(rg, item)
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.byRG[rg].Items()
}

// pushAdds pushes rg's newly pending runs into its queue.
func (q *queues) pushAdds(rg string, item func(string) (queue.Item, bool)) {
	q.mu.Lock()
	adds := q.adds[rg]
	delete(q.adds, rg)
	q.queue(rg)
	q.mu.Unlock()
	q.pushAll(rg, adds, item)
}

// ahead calls f on what rg's queue serves before an entry of priority
// prio asking at now (queue.Queue.Ahead), its newly pending entries
// pushed first, and reports whether f returned true for one. f runs under
// q.mu: it does no I/O.
func (q *queues) ahead(rg string, now time.Time, prio int, item func(string) (queue.Item, bool), f func(queue.Item) bool) bool {
	q.pushAdds(rg, item)
	q.mu.Lock()
	defer q.mu.Unlock()
	qu := q.byRG[rg]
	return qu != nil && qu.Ahead(now, prio, f)
}

// position returns runID's 0-based place in rg's admission order, its
// newly pending runs pushed first (as order does), in O(log n); false
// when it is not queued there.
func (q *queues) position(rg, runID string, item func(string) (queue.Item, bool)) (int, bool) {
	q.pushAdds(rg, item)
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.byRG[rg].Position(runID)
}

// push puts a run (back) in rg's queue if it is still pending there.
func (q *queues) push(rg string, it queue.Item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rgOf[it.RunID] == rg {
		_ = q.byRG[rg].Push(it)
	}
}

// remove takes a run out of rg's queue (it is admitted).
func (q *queues) remove(rg, runID string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qu := q.byRG[rg]; qu != nil {
		qu.Remove(runID)
	}
}

// admit is Queue.Admit under the lock.
func (q *queues) admit(qu *queue.Queue, f func(*queue.Queue) []queue.Item) []queue.Item {
	q.mu.Lock()
	defer q.mu.Unlock()
	return f(qu)
}

// pending reports whether runID is a pending run of rg.
func (q *queues) pending(rg, runID string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rgOf[runID] == rg
}

// swapHeld records the pending runs admitted in rg now and returns those
// of the last pass.
func (q *queues) swapHeld(rg string, now map[string]bool) map[string]bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	prev := q.held[rg]
	q.held[rg] = now
	return prev
}

type rgPriority struct {
	rg       string
	priority int
	growth   bool // clusters' growths, not runs
}

// counts returns how many runs wait, admitted ones not counted, and how
// many clusters' growths wait, per resource group and priority.
func (q *queues) counts() map[rgPriority]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[rgPriority]int{}
	for id, rg := range q.rgOf {
		if !q.held[rg][id] {
			out[rgPriority{rg, q.prioOf[id], isGrowthEntry(id)}]++
		}
	}
	return out
}
