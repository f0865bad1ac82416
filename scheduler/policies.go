package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/aidlc/dlc/internal/check"
	"github.com/aidlc/dlc/quota"
)

// Choice is the member a policy picked for a run, and why.
type Choice struct {
	// ClusterID is the chosen member's id.
	ClusterID string
	// Reason says in one line why this member: the policy's name, then
	// what decided it, e.g. "least-loaded: 2 active runs, fewest of 4
	// running members". At most MaxReasonLen bytes.
	Reason string
}

// MaxReasonLen bounds a Choice's Reason, in bytes.
const MaxReasonLen = 200

// Placer is a Policy that knows which run it places and says why it chose
// a member: the engine calls Place rather than Pick on a Placer. Place
// returns the choice and true, or a zero Choice and false when no member
// is both Running and not Abnormal ([WhyNone] then says why). It does not
// keep or change members.
type Placer interface {
	Policy
	Place(runID string, members []Candidate) (Choice, bool)
}

// Place picks the member run runID goes to with p: p's Place when p is a
// [Placer], else its Pick, with a Reason saying only that p chose among
// the running members. The Reason is cut to MaxReasonLen bytes.
func Place(p Policy, runID string, members []Candidate) (Choice, bool) {
	if pl, ok := p.(Placer); ok {
		ch, ok := pl.Place(runID, members)
		ch.Reason = clip(ch.Reason)
		return ch, ok
	}
	id, ok := p.Pick(members)
	if !ok {
		return Choice{}, false
	}
	return Choice{ClusterID: id, Reason: clip(fmt.Sprintf("%T: one of %s", p, running(countEligible(members))))}, true
}

// Place implements [Placer]: Pick, with the number of members it chose
// among as the reason.
func (p *Random) Place(_ string, members []Candidate) (Choice, bool) {
	id, ok := p.Pick(members)
	if !ok {
		return Choice{}, false
	}
	return Choice{ClusterID: id, Reason: "random: one of " + running(countEligible(members))}, true
}

// LeastLoaded sends a run to the running member with the fewest active
// runs (Candidate.ActiveRuns), so that runs spread evenly over the
// members (G4: one entry for many clusters). Among members tied on the
// fewest, the run's id decides (a hash of the run and cluster ids, highest
// wins), so the choice depends only on what the members are and hold, not
// on their order or on who asks. The zero value is ready to use; it holds
// no state and is safe for concurrent use.
//
// The counts are the engine's view of the store: runs placed at the same
// moment (by other workers or replicas) do not see each other, so a burst
// of runs may leave the members a few runs apart until they end.
type LeastLoaded struct{}

var _ Placer = LeastLoaded{}

// Pick implements [Policy]: Place for a run with an empty id.
func (p LeastLoaded) Pick(members []Candidate) (string, bool) {
	ch, ok := p.Place("", members)
	return ch.ClusterID, ok
}

// Place implements [Placer].
func (LeastLoaded) Place(runID string, members []Candidate) (Choice, bool) {
	i, tied, n := best(runID, members, func(a, b Candidate) int { return cmp.Compare(b.ActiveRuns, a.ActiveRuns) })
	if i < 0 {
		return Choice{}, false
	}
	m := members[i]
	return Choice{ClusterID: m.ClusterID, Reason: fmt.Sprintf("least-loaded: %s, fewest of %s%s",
		plural(m.ActiveRuns, "active run"), running(n), tie(tied))}, true
}

// MostFreeQuota sends a run to the running member whose resource group
// can allocate most (Candidate.Allocatable), so that runs go where quota
// is free (G4: off-peak sharing across resource groups). Groups are
// compared by [CompareAllocatable]: GPUs first, then CPU, then memory.
// Among members tied (members of one resource group always are), the
// run's id decides, as for [LeastLoaded]. The zero value is ready to use;
// it holds no state and is safe for concurrent use.
//
// A member's cluster already holds its own reservation: what its group
// can allocate is room for other clusters and on-demand runs, which a run
// sent to the member competes with on the group's nodes.
type MostFreeQuota struct{}

var _ Placer = MostFreeQuota{}

// Pick implements [Policy]: Place for a run with an empty id.
func (p MostFreeQuota) Pick(members []Candidate) (string, bool) {
	ch, ok := p.Place("", members)
	return ch.ClusterID, ok
}

// Place implements [Placer].
func (MostFreeQuota) Place(runID string, members []Candidate) (Choice, bool) {
	i, tied, n := best(runID, members, func(a, b Candidate) int { return CompareAllocatable(a.Allocatable, b.Allocatable) })
	if i < 0 {
		return Choice{}, false
	}
	m := members[i]
	rg := m.ResourceGroup
	if rg == "" {
		rg = "?"
	}
	return Choice{ClusterID: m.ClusterID, Reason: fmt.Sprintf("most-free-quota: resource group %s can allocate gpu=%d cpu=%s memory=%s, most of %s%s",
		rg, m.Allocatable.GPU, cores(m.Allocatable.MilliCPU), gib(m.Allocatable.Memory), running(n), tie(tied))}, true
}

// CompareAllocatable orders what two resource groups can allocate for
// [MostFreeQuota]: by GPUs, then CPU, then memory (the scarcest first).
// It returns a positive number when a can allocate more than b, negative
// when less, 0 when they are equal.
func CompareAllocatable(a, b quota.Resources) int {
	return cmp.Or(cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.MilliCPU, b.MilliCPU), cmp.Compare(a.Memory, b.Memory))
}

// OrderedFailover sends a run to the first running member in the group's
// failover order (Candidate.Order): the primary while it runs, the first
// standby when it does not (it is abnormal, hibernated, starting), and the
// primary again once it runs (G4: primary/backup failover). When no member
// in the order runs, the other running members are taken in cluster id
// order. Runs already placed stay where they are. The zero value is ready
// to use; it holds no state and is safe for concurrent use.
type OrderedFailover struct{}

var _ Placer = OrderedFailover{}

// Pick implements [Policy]: Place for a run with an empty id (the run does
// not matter to this policy).
func (p OrderedFailover) Pick(members []Candidate) (string, bool) {
	ch, ok := p.Place("", members)
	return ch.ClusterID, ok
}

// Place implements [Placer].
func (OrderedFailover) Place(_ string, members []Candidate) (Choice, bool) {
	pick := -1
	for i, m := range members {
		if !m.eligible() {
			continue
		}
		if pick < 0 || before(m, members[pick]) {
			pick = i
		}
	}
	if pick < 0 {
		return Choice{}, false
	}
	chosen := members[pick]
	// The members in the order ahead of the chosen one (all of them, when
	// it is not in the order): none is running, and the reason says so.
	var passed []Candidate
	listed := 0
	for _, m := range members {
		if m.Order > 0 {
			listed++
			if chosen.Order == 0 || m.Order < chosen.Order {
				passed = append(passed, m)
			}
		}
	}
	slices.SortFunc(passed, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(a.Order, b.Order), strings.Compare(a.ClusterID, b.ClusterID))
	})
	var why string
	switch {
	case listed == 0:
		why = "ordered-failover: no member is in the order; first running member by id"
	case chosen.Order == 0:
		why = "ordered-failover: no member in the order is running; first running member by id"
	case len(passed) == 0:
		why = fmt.Sprintf("ordered-failover: #%d in order, the first", chosen.Order)
	default:
		why = fmt.Sprintf("ordered-failover: #%d in order, the first running", chosen.Order)
	}
	return Choice{ClusterID: chosen.ClusterID, Reason: why + states(passed)}, true
}

// before reports whether a comes before b in the failover order: members
// in the order first, by their place, then the rest by id.
func before(a, b Candidate) bool {
	switch {
	case a.Order > 0 && b.Order > 0 && a.Order != b.Order:
		return a.Order < b.Order
	case (a.Order > 0) != (b.Order > 0):
		return a.Order > 0
	}
	return a.ClusterID < b.ClusterID
}

// maxNamed bounds the members a reason names.
const maxNamed = 3

// states says why members were passed over: " (cls-a abnormal, cls-b not
// running)", at most maxNamed of them named.
func states(ms []Candidate) string {
	if len(ms) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(" (")
	for i, m := range ms {
		if i == maxNamed {
			fmt.Fprintf(&b, ", %d more", len(ms)-maxNamed)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.ClusterID)
		if m.Abnormal {
			b.WriteString(" abnormal")
		} else {
			b.WriteString(" not running")
		}
	}
	b.WriteString(")")
	return b.String()
}

// best returns the index of the eligible member that cmp ranks highest
// (cmp(a, b) > 0: a is better), ties broken by tieScore of runID; how
// many eligible members tied with it; and how many are eligible. The index
// is -1 when none is.
func best(runID string, members []Candidate, rank func(a, b Candidate) int) (pick, tied, eligible int) {
	pick = -1
	for i, m := range members {
		if !m.eligible() {
			continue
		}
		eligible++
		if pick < 0 {
			pick, tied = i, 1
			continue
		}
		switch c := rank(m, members[pick]); {
		case c > 0:
			pick, tied = i, 1
		case c == 0:
			tied++
			if wins(runID, m.ClusterID, members[pick].ClusterID) {
				pick = i
			}
		}
	}
	return pick, tied, eligible
}

// wins reports whether cluster a beats cluster b in a tie for run runID:
// the higher tieScore, and on equal scores the lower id.
func wins(runID, a, b string) bool {
	sa, sb := tieScore(runID, a), tieScore(runID, b)
	if sa != sb {
		return sa > sb
	}
	return a < b
}

// tieScore is a rendezvous hash of a run and a cluster: FNV-1a over both
// ids, mixed by splitmix64's finalizer (FNV alone keeps ids that differ in
// one character close). Every replica computes the same score, and a
// member joining or leaving changes no other member's.
func tieScore(runID, clusterID string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(runID); i++ {
		h = (h ^ uint64(runID[i])) * prime
	}
	h = (h ^ 0xff) * prime // a separator no id holds
	for i := 0; i < len(clusterID); i++ {
		h = (h ^ uint64(clusterID[i])) * prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

func countEligible(members []Candidate) int {
	n := 0
	for _, m := range members {
		if m.eligible() {
			n++
		}
	}
	return n
}

// running says "3 running members" ("1 running member").
func running(n int) string { return plural(n, "running member") }

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// tie says how a tie was broken, if there was one.
func tie(tied int) string {
	if tied < 2 {
		return ""
	}
	return fmt.Sprintf(" (%d tied: the run id chose)", tied)
}

// cores writes millicores as whole cores ("28") or millicores ("3500m").
func cores(milli int64) string {
	if milli%1000 == 0 {
		return fmt.Sprintf("%d", milli/1000)
	}
	return fmt.Sprintf("%dm", milli)
}

// gib writes bytes in GiB ("112Gi") or bytes.
func gib(b int64) string {
	if b%quota.GiB == 0 {
		return fmt.Sprintf("%dGi", b/quota.GiB)
	}
	return fmt.Sprintf("%d", b)
}

// clip cuts s to MaxReasonLen bytes on a character boundary, marking the
// cut with "…".
func clip(s string) string {
	if len(s) <= MaxReasonLen {
		return s
	}
	const mark = "…"
	return check.Prefix(s, MaxReasonLen-len(mark)) + mark
}
