// Package queue is the per-resource-group priority queue that admits
// on-demand runs as quota becomes free (J3, J18): BestEffortFIFO by
// priority, then submission, with a starvation bound. Plain Go: it does no
// I/O and reads no clock (the caller passes the time in).
package queue

import (
	"math"
	"slices"
	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// Item is one on-demand run waiting in a resource group's queue.
type Item struct {
	// RunID identifies the run; it is unique within a queue.
	RunID string
	// Priority is the run's queueing weight, 1–9 (J3); higher goes first.
	// The queue orders any int the same way and does not check the range.
	Priority int
	// Seq is the submission order: within a priority, lower goes first.
	Seq uint64
	// Enqueued is when the run joined the queue; it is what the starvation
	// bound (QueueOptions.MaxWait) measures from. The zero time counts as
	// long ago, so such an item is starving as soon as a bound is set.
	Enqueued time.Time
	// Demand is what admitting the run reserves from the resource group.
	Demand quota.Resources
}

// QueueOptions configure a Queue.
type QueueOptions struct {
	// MaxWait is the starvation bound: an item that has waited longer than
	// this and does not fit holds back every item behind it (see
	// Queue.Admit). Zero or negative means no bound: pure BestEffortFIFO.
	MaxWait time.Duration
}

// Queue is one resource group's queue of on-demand runs waiting for quota.
//
// Admission order is Priority descending, then Seq ascending, then RunID
// ascending (a tie-break that only matters when Seq values repeat).
//
// A Queue is NOT safe for concurrent use: the caller serialises access
// (typically under the lock that also guards the resource group's account).
// The zero value is an empty queue with no starvation bound.
//
// Internally it is a treap (a balanced search tree) kept in one slice, each
// node carrying, for its subtree, the size, the component-wise minimum
// demand and the earliest Enqueued time. Push, Remove and Position take
// O(log n) expected time. Admit skips every subtree in which nothing can fit
// and nothing is starving: when free is below the smallest queued demand it
// returns at once, and it takes about O((k+1)·log n) when it admits k items.
// The minimum is taken per component, so demands of very different shapes
// (one CPU-heavy, one memory-heavy, each too big, their minimum small enough)
// can make it look into subtrees where nothing fits, up to every item in the
// worst case; the answer is the same either way.
type Queue struct {
	opts  QueueOptions
	nodes []node           // nodes[0] is unused: index 0 means "no node"
	free  int32            // first unused node; unused nodes are linked through left
	buf   []Item           // Admit's scratch, reused between calls
	byID  map[string]int32 // RunID -> node index
	root  int32
	rnd   uint64 // state of the treap's priority generator (splitmix64)
}

type node struct {
	it          Item
	left, right int32
	size        int32
	heap        uint64          // treap priority: a parent's is ≥ its children's
	enq         int64           // wallNanos(it.Enqueued)
	minDemand   quota.Resources // component-wise minimum Demand in the subtree
	minEnq      int64           // earliest enq in the subtree
}

// wallNanos returns t's wall-clock time (its monotonic reading ignored) in
// nanoseconds since 1970, clamped to the int64 range (years 1678–2262). The
// clamp keeps order, so comparing the results compares the times for any
// time in that range; the zero time.Time counts as long ago.
func wallNanos(t time.Time) int64 {
	const maxSec = math.MaxInt64/int64(time.Second) - 1
	sec := t.Unix()
	switch {
	case sec > maxSec:
		return math.MaxInt64
	case sec < -maxSec:
		return math.MinInt64
	}
	return sec*int64(time.Second) + int64(t.Nanosecond())
}

// NewQueue returns an empty queue.
func NewQueue(opts QueueOptions) *Queue { return &Queue{opts: opts} }

// Push adds it to the queue. It changes nothing and returns an error when
// it.RunID is empty or any component of it.Demand is negative (errs.ErrInvalid),
// or when a run with the same RunID is already queued (errs.ErrConflict; the
// queued item is kept, not replaced — Remove it first to requeue).
func (q *Queue) Push(it Item) error {
	if it.RunID == "" {
		return errs.Required(errs.NewPath("runID"), "", "a queued run needs an id")
	}
	if it.Demand.AnyNegative() {
		return errs.Invalid(errs.NewPath("demand"), "", it.Demand.String(), "must not be negative")
	}
	if _, dup := q.byID[it.RunID]; dup {
		return errs.Conflict("run", it.RunID, "already queued")
	}
	if q.byID == nil {
		q.byID = make(map[string]int32)
	}
	if len(q.nodes) == 0 {
		q.nodes = append(q.nodes, node{})
	}
	var i int32
	if q.free != 0 {
		i = q.free
		q.free = q.nodes[i].left
	} else {
		q.nodes = append(q.nodes, node{})
		i = int32(len(q.nodes) - 1)
	}
	q.rnd += 0x9e3779b97f4a7c15
	z := q.rnd
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	q.nodes[i] = node{it: it, heap: z ^ z>>31, enq: wallNanos(it.Enqueued)}
	q.pull(i)
	q.byID[it.RunID] = i
	q.root = q.insert(q.root, i)
	return nil
}

// Remove takes the run out of the queue and reports whether it was there.
func (q *Queue) Remove(runID string) bool {
	i, ok := q.byID[runID]
	if !ok {
		return false
	}
	q.root = q.delete(q.root, i)
	q.release(i)
	return true
}

// Len returns the number of queued runs.
func (q *Queue) Len() int {
	if q.root == 0 {
		return 0
	}
	return int(q.nodes[q.root].size)
}

// Items returns a copy of the queued items in admission order.
func (q *Queue) Items() []Item {
	out := make([]Item, 0, q.Len())
	return q.appendInOrder(out, q.root)
}

// Ahead calls f, in admission order, on each item that the queue serves
// before an item of priority prio asking at now: every item of at least
// that priority, then each lower one that is starving (MaxWait > 0 and
// now − Enqueued > MaxWait, as Admit counts it). It stops at the first
// item f returns true for, and reports whether there was one. It visits
// only what it calls f on and the paths to it: O((k+1)·log n) expected
// for k calls, however long the queue.
func (q *Queue) Ahead(now time.Time, prio int, f func(Item) bool) bool {
	if q.eachFrom(q.root, prio, f) == aheadFound {
		return true
	}
	if q.opts.MaxWait <= 0 {
		return false
	}
	s := search{bounded: true, starvingOnly: true, cutoff: wallNanos(now.Round(0).Add(-q.opts.MaxWait))}
	var last node
	for i := q.first(q.root, &s); i != 0; i = q.firstAfter(q.root, &last, &s) {
		n := &q.nodes[i]
		if n.it.Priority < prio && f(n.it) {
			return true
		}
		last.it = n.it
	}
	return false
}

// The outcomes of eachFrom.
const (
	aheadMore  = iota // go on
	aheadEnd          // past the items of at least the priority
	aheadFound        // f returned true
)

// eachFrom calls f in order on t's subtree's items of at least priority
// prio (a prefix of the order), stopping as Ahead does.
func (q *Queue) eachFrom(t int32, prio int, f func(Item) bool) int {
	for t != 0 {
		n := &q.nodes[t]
		if r := q.eachFrom(n.left, prio, f); r != aheadMore {
			return r
		}
		if n.it.Priority < prio {
			return aheadEnd
		}
		if f(n.it) {
			return aheadFound
		}
		t = n.right
	}
	return aheadMore
}

// Position returns the run's 0-based place in admission order (0 = the
// head), and false when it is not queued. A run at position p is not
// necessarily admitted after p others: smaller runs behind a head that does
// not fit may be admitted first (see Admit).
func (q *Queue) Position(runID string) (int, bool) {
	i, ok := q.byID[runID]
	if !ok {
		return 0, false
	}
	target := &q.nodes[i]
	rank := 0
	for t := q.root; t != 0; {
		n := &q.nodes[t]
		if t == i {
			return rank + q.size(n.left), true
		}
		if before(target, n) {
			t = n.left
		} else {
			rank += q.size(n.left) + 1
			t = n.right
		}
	}
	panic("scheduler: queue index out of step with its tree")
}

// Admit removes from the queue and returns, in admission order, the runs
// admitted when free is what the resource group can still allocate.
//
// It walks the queue in admission order (Priority descending, then Seq
// ascending) with a running balance that starts at free:
//
//   - an item whose Demand fits the balance (quota.Resources.Fits: every
//     component ≤) is admitted and its Demand is subtracted from the balance;
//   - an item that does not fit is skipped and stays queued, and the walk
//     goes on, so a large head does not block smaller items behind it
//     (Kueue's BestEffortFIFO);
//   - except that an item that does not fit and is starving — MaxWait > 0
//     and now − Enqueued > MaxWait, compared on the wall clock (monotonic
//     clock readings are ignored) — ends the walk: nothing behind it is
//     admitted in this call, so the capacity that frees up accumulates until
//     it fits (like Volcano's sla-waiting-time). Items ahead of it are still
//     admitted when they fit, and a starving item that fits is admitted like
//     any other.
//
// The sum of the returned Demands therefore fits free, and each item is
// returned at most once: it leaves the queue when admitted. Admit returns
// nil when it admits nothing. It stops as soon as nothing still queued
// behind the walk can fit the balance or be starving, without visiting the
// rest; its only allocation is the returned slice, of exactly the length
// admitted.
func (q *Queue) Admit(now time.Time, free quota.Resources) []Item {
	return q.AdmitUpTo(now, free, math.MaxInt)
}

// AdmitUpTo is Admit, stopped after n items (none when n ≤ 0): what is
// behind them stays queued, in its order.
func (q *Queue) AdmitUpTo(now time.Time, free quota.Resources, n int) []Item {
	if q.root == 0 || n <= 0 {
		return nil
	}
	s := search{free: free}
	if q.opts.MaxWait > 0 {
		s.bounded = true
		s.cutoff = wallNanos(now.Round(0).Add(-q.opts.MaxWait))
	}
	out := q.buf[:0]
	var last node // the key of the last item admitted (it, left empty of links)
	for q.root != 0 && len(out) < n {
		var i int32
		if len(out) == 0 {
			i = q.first(q.root, &s)
		} else {
			i = q.firstAfter(q.root, &last, &s)
		}
		if i == 0 {
			break
		}
		n := &q.nodes[i]
		if !n.it.Demand.Fits(s.free) {
			break // starving and does not fit: hold back everything behind it
		}
		s.free = s.free.Sub(n.it.Demand)
		out = append(out, n.it)
		last.it = n.it
		q.root = q.delete(q.root, i)
		q.release(i)
	}
	if len(out) == 0 {
		return nil
	}
	res := slices.Clone(out)
	clear(out) // drop the RunID strings the scratch would keep alive
	q.buf = out[:0]
	return res
}

// search is what Admit looks for: the first item that fits free or, when
// bounded, was enqueued before cutoff.
type search struct {
	free         quota.Resources
	bounded      bool
	starvingOnly bool  // only what is starving, whatever fits (Ahead)
	cutoff       int64 // wallNanos(now − MaxWait)
}

// some reports whether n's subtree may hold an item the search wants.
func (s *search) some(n *node) bool {
	return (!s.starvingOnly && n.minDemand.Fits(s.free)) || (s.bounded && n.minEnq < s.cutoff)
}

// hit reports whether n's own item is one the search wants.
func (s *search) hit(n *node) bool {
	return (!s.starvingOnly && n.it.Demand.Fits(s.free)) || (s.bounded && n.enq < s.cutoff)
}

// first returns the first node in order in t's subtree that s wants, or 0.
func (q *Queue) first(t int32, s *search) int32 {
	for t != 0 {
		n := &q.nodes[t]
		if !s.some(n) {
			return 0
		}
		if n.left != 0 && s.some(&q.nodes[n.left]) {
			if r := q.first(n.left, s); r != 0 {
				return r
			}
		}
		if s.hit(n) {
			return t
		}
		t = n.right
	}
	return 0
}

// firstAfter is first restricted to nodes ordered after last.
func (q *Queue) firstAfter(t int32, last *node, s *search) int32 {
	for t != 0 {
		n := &q.nodes[t]
		if !s.some(n) {
			return 0
		}
		if !before(last, n) { // n ≤ last: only its right subtree can be after
			t = n.right
			continue
		}
		if r := q.firstAfter(n.left, last, s); r != 0 {
			return r
		}
		if s.hit(n) {
			return t
		}
		return q.first(n.right, s)
	}
	return 0
}

// before reports whether a's item goes before b's in admission order.
func before(a, b *node) bool {
	if a.it.Priority != b.it.Priority {
		return a.it.Priority > b.it.Priority
	}
	if a.it.Seq != b.it.Seq {
		return a.it.Seq < b.it.Seq
	}
	return a.it.RunID < b.it.RunID
}

func (q *Queue) size(t int32) int {
	if t == 0 {
		return 0
	}
	return int(q.nodes[t].size)
}

// pull recomputes t's subtree aggregates from its item and its children.
func (q *Queue) pull(t int32) {
	n := &q.nodes[t]
	n.size = 1
	n.minDemand = n.it.Demand
	n.minEnq = n.enq
	if n.left != 0 {
		c := &q.nodes[n.left]
		n.size += c.size
		n.minDemand = n.minDemand.Min(c.minDemand)
		n.minEnq = min(n.minEnq, c.minEnq)
	}
	if n.right != 0 {
		c := &q.nodes[n.right]
		n.size += c.size
		n.minDemand = n.minDemand.Min(c.minDemand)
		n.minEnq = min(n.minEnq, c.minEnq)
	}
}

// insert adds node i to the subtree t and returns the new subtree root.
func (q *Queue) insert(t, i int32) int32 {
	if t == 0 {
		return i
	}
	n, in := &q.nodes[t], &q.nodes[i]
	if in.heap > n.heap {
		in.left, in.right = q.split(t, in)
		q.pull(i)
		return i
	}
	if before(in, n) {
		l := q.insert(n.left, i)
		q.nodes[t].left = l
	} else {
		r := q.insert(n.right, i)
		q.nodes[t].right = r
	}
	q.pull(t)
	return t
}

// split splits subtree t into the nodes before k and the nodes after it.
func (q *Queue) split(t int32, k *node) (l, r int32) {
	if t == 0 {
		return 0, 0
	}
	n := &q.nodes[t]
	if before(n, k) {
		a, b := q.split(n.right, k)
		q.nodes[t].right = a
		q.pull(t)
		return t, b
	}
	a, b := q.split(n.left, k)
	q.nodes[t].left = b
	q.pull(t)
	return a, t
}

// merge joins subtrees a and b, every node of a being before every node of b.
func (q *Queue) merge(a, b int32) int32 {
	if a == 0 {
		return b
	}
	if b == 0 {
		return a
	}
	if q.nodes[a].heap > q.nodes[b].heap {
		r := q.merge(q.nodes[a].right, b)
		q.nodes[a].right = r
		q.pull(a)
		return a
	}
	l := q.merge(a, q.nodes[b].left)
	q.nodes[b].left = l
	q.pull(b)
	return b
}

// delete removes node i from subtree t and returns the new subtree root.
func (q *Queue) delete(t, i int32) int32 {
	if t == 0 {
		panic("scheduler: queue index out of step with its tree")
	}
	if t == i {
		n := &q.nodes[t]
		return q.merge(n.left, n.right)
	}
	if before(&q.nodes[i], &q.nodes[t]) {
		l := q.delete(q.nodes[t].left, i)
		q.nodes[t].left = l
	} else {
		r := q.delete(q.nodes[t].right, i)
		q.nodes[t].right = r
	}
	q.pull(t)
	return t
}

// release forgets node i, which is no longer in the tree.
func (q *Queue) release(i int32) {
	delete(q.byID, q.nodes[i].it.RunID)
	q.nodes[i] = node{left: q.free}
	q.free = i
}

func (q *Queue) appendInOrder(out []Item, t int32) []Item {
	for t != 0 {
		n := &q.nodes[t]
		out = q.appendInOrder(out, n.left)
		out = append(out, n.it)
		t = n.right
	}
	return out
}
