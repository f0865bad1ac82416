// Package scheduler holds the policies that pick the member cluster of a
// cluster group a run goes to (G3), for the uses the product gives groups
// (G4): [Random] (the default, and what a user may plug in instead),
// [LeastLoaded] (spread runs over the members), [OrderedFailover]
// (primary and standby: the first running member in a set order) and
// [MostFreeQuota] (peak-shifting across resource groups: the member whose
// resource group can allocate most). The per-resource-group priority
// queue that admits on-demand runs as quota becomes free (J3, J18) is the
// engine's own.
//
// It is plain Go: values in, values out. It does no I/O, starts no
// goroutines and reads no clock, so what it decides is deterministic for
// given inputs and, for [Random], a given seed. The engine fills each
// [Candidate] with what the policies read (its active runs, its resource
// group's allocatable quota, its place in the failover order) from its
// view of the store; the policies other than Random break ties from the
// run's id, so that two replicas that see the same store pick the same
// member for the same run.
package scheduler

import (
	"math/rand/v2"
	"sync"

	"github.com/aidlc/dlc/quota"
)

// Candidate is one member of a cluster group as the scheduler sees it.
type Candidate struct {
	// ClusterID is the member cluster's id.
	ClusterID string
	// Running reports whether the cluster is in the running state.
	Running bool
	// Abnormal reports whether the cluster is unhealthy (for example
	// unreachable, or its head not ready); an abnormal member is skipped
	// even when Running.
	Abnormal bool
	// ActiveRuns is how many runs are placed on the member and have not
	// ended (provisioning or running); [LeastLoaded] reads it.
	ActiveRuns int
	// ResourceGroup is the resource group the member draws from (C4), and
	// Allocatable what that group can still allocate; [MostFreeQuota]
	// reads them.
	ResourceGroup string
	Allocatable   quota.Resources
	// Order is the member's place in the group's failover order, counted
	// from 1 over the members the order names (the engine passes over a
	// listed cluster that is not a member); 0 means the member is not in
	// the order. [OrderedFailover] reads it.
	Order int
}

// eligible reports whether a run may be sent to c.
func (c Candidate) eligible() bool { return c.Running && !c.Abnormal }

// Policy picks the member cluster a run goes to, among running members.
//
// Pick returns the chosen member's ClusterID and true, or "" and false when
// no member is both Running and not Abnormal; [WhyNone] then says why.
// Pick does not keep or change members. A Policy that is also a [Placer]
// is asked through Place, with the run's id.
type Policy interface {
	Pick(members []Candidate) (clusterID string, ok bool)
}

// Random is the random policy (G3, the product's own and the default): it
// picks uniformly among the members that are Running and not Abnormal.
//
// A Random is safe for concurrent use. Its sequence of picks is fixed by its
// seed and the calls made: two Randoms made with the same seed and given the
// same members in the same order return the same clusters.
type Random struct {
	mu  sync.Mutex
	rng *rand.Rand // guarded by mu
}

var _ Placer = (*Random)(nil)

// NewRandom returns a Random policy whose choices come from a PCG source
// seeded with seed.
func NewRandom(seed int64) *Random {
	s := uint64(seed)
	return &Random{rng: rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))}
}

// Pick implements [Policy]. It chooses uniformly among the eligible
// members (Running and not Abnormal), so a member listed twice is twice as
// likely. It does not allocate, and it draws from the source only when there
// are two or more eligible members (one is picked without a draw).
func (p *Random) Pick(members []Candidate) (string, bool) {
	n := countEligible(members)
	if n == 0 {
		return "", false
	}
	k := 0
	if n > 1 {
		p.mu.Lock()
		k = p.rng.IntN(n)
		p.mu.Unlock()
	}
	for _, m := range members {
		if m.eligible() {
			if k == 0 {
				return m.ClusterID, true
			}
			k--
		}
	}
	panic("unreachable")
}

// Reason says why a policy found no member to pick (J18). Its values are
// the same strings as job.WaitReason's, so a caller may convert one to the
// other.
type Reason string

// The reasons a cluster-group run waits.
const (
	// NoMemberRunning: no member of the group is running (including a group
	// with no members), or the running ones are abnormal while others are
	// merely stopped.
	NoMemberRunning Reason = "no member running"
	// AllMembersAbnormal: the group has at least one member and every
	// member is abnormal.
	AllMembersAbnormal Reason = "all members abnormal"
)

// WhyNone says why there is no member to pick: AllMembersAbnormal when
// members is not empty and every member is Abnormal, else NoMemberRunning.
// It is meant to be called after Pick reported none; it does not itself
// check whether some member is eligible.
func WhyNone(members []Candidate) Reason {
	if len(members) == 0 {
		return NoMemberRunning
	}
	for _, m := range members {
		if !m.Abnormal {
			return NoMemberRunning
		}
	}
	return AllMembersAbnormal
}
