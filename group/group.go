// Package group models cluster groups (G1–G6): a logical set of compute
// clusters, possibly from different resource groups, that runs are
// scheduled onto by the group's policy. A cluster may be in many groups.
//
// It does no I/O. Membership is kept on the clusters (cluster.Spec.Groups),
// so a group and its members can never disagree.
package group

import (
	"slices"
	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/internal/check"
	"github.com/aidlc/dlc/internal/codec"
)

// MaxNameLen is the longest group name, in characters.
const MaxNameLen = 64

// Policy names a group's scheduling policy (G3): how a run of a job in
// cluster-group mode picks the member it goes to, among the members that
// are running and not abnormal (a run waits while there is none, J18).
type Policy string

// The scheduling policies (G3), for the uses the product gives groups
// (G4). Package scheduler holds what each does.
const (
	// Random picks a running member at random: the product's own policy,
	// and the default.
	Random Policy = "random"
	// LeastLoaded picks the running member with the fewest active runs
	// (placed and not ended), a tie broken by the run's id: one entry that
	// spreads runs over clusters of the same kind.
	LeastLoaded Policy = "least-loaded"
	// OrderedFailover picks the first running member in the group's Order
	// (primary, then standbys), then the other members by id: primary and
	// backup (主备容灾).
	OrderedFailover Policy = "ordered-failover"
	// MostFreeQuota picks the running member whose resource group can
	// allocate most (GPUs first, then CPU, then memory), a tie broken by
	// the run's id: peak-shifting across resource groups (跨资源组错峰).
	MostFreeQuota Policy = "most-free-quota"
)

// Policies lists the scheduling policies, the default first.
func Policies() []Policy { return []Policy{Random, LeastLoaded, OrderedFailover, MostFreeQuota} }

// MaxOrder bounds a group's failover order, in clusters.
const MaxOrder = 64

// Scheduling is how a group's runs pick their member (G3): the policy and,
// for OrderedFailover, the order of the members. It is the form a group's
// policy is given in at create (CreateOptions) and changed in
// (GroupService.SetPolicy), in Go or as YAML/JSON (UnmarshalSchedulingYAML).
type Scheduling struct {
	// Policy is the scheduling policy; "" means Random.
	Policy Policy `json:"policy,omitempty"`
	// Order is, for OrderedFailover, the member cluster ids in the order
	// they take runs: the primary first. Members not in it come after, by
	// id. A listed cluster that is not a member (not yet, or no longer) is
	// passed over: membership is kept on the clusters, and a cluster may
	// leave the group, or be deleted, after the order names it. At most
	// MaxOrder ids, each once. Other policies take no order.
	Order []string `json:"order,omitempty"`
}

// CreateOptions are the options of a group's create.
type CreateOptions struct {
	// Scheduling is the group's scheduling policy; the zero value is Random.
	Scheduling Scheduling
}

// Validate checks a scheduling policy (G3): a known policy, and an order
// only for OrderedFailover, of at most MaxOrder well-formed cluster ids,
// each once. Every problem is reported, with its field path.
func (s Scheduling) Validate() error {
	var l errs.List
	if err := ValidatePolicy(s.Policy); err != nil {
		l = append(l, errs.NotSupported("policy", "G3", string(s.Policy), policyNames()))
	}
	if len(s.Order) > 0 && s.Policy != OrderedFailover {
		l = append(l, errs.Forbidden("order", "G3", "only the "+string(OrderedFailover)+" policy takes an order"))
	}
	if len(s.Order) > MaxOrder {
		l = append(l, errs.TooMany("order", "G3", len(s.Order), MaxOrder))
		return l.ToError()
	}
	seen := make(map[string]bool, len(s.Order))
	for i, id := range s.Order {
		p := errs.NewPath("order").Index(i)
		if bad := check.ID(p, "G3", "cluster", id); len(bad) > 0 {
			l = append(l, bad...)
			continue
		}
		if seen[id] {
			l = append(l, errs.Duplicate(p, "G3", id))
		}
		seen[id] = true
	}
	return l.ToError()
}

// Normalized returns s with its default made explicit (Random for ""),
// sharing nothing with s.
func (s Scheduling) Normalized() Scheduling {
	if s.Policy == "" {
		s.Policy = Random
	}
	s.Order = slices.Clone(s.Order)
	return s
}

// UnmarshalSchedulingYAML reads a scheduling policy from YAML or JSON,
// strictly: an unknown field, a duplicate key or a value of the wrong
// shape is an error (errors.Is ErrInvalid), each with its path. It does
// not Validate.
func UnmarshalSchedulingYAML(data []byte) (*Scheduling, error) { return codec.Decode[Scheduling](data) }

func policyNames() []string {
	var out []string
	for _, p := range Policies() {
		out = append(out, string(p))
	}
	return out
}

// Group is a cluster group as the platform keeps it.
type Group struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Policy is the group's scheduling policy (G3); see Scheduling.
	Policy Policy `json:"policy"`
	// Order is the OrderedFailover policy's order of members (see
	// Scheduling.Order); empty for the other policies.
	Order     []string  `json:"order,omitempty"`
	Version   string    `json:"-"` // the store's version
	Creator   string    `json:"creator"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Events is the group's operation log, newest last.
	Events []event.Event `json:"events,omitempty"`
	// Deleting marks a group whose delete is in progress (G6).
	Deleting Deletion `json:"deleting,omitzero"`
}

// Deletion marks a cluster group whose delete is in progress (G6): the
// delete writes it on the group by compare-and-swap, with the target its
// members move into, before it lists the members in the store, and
// deletes the group on the version it marked. A cluster put into the
// group meanwhile (AddMembers, a cluster's create or edit), through any
// client, reads the group again once it is written and, finding it marked
// or gone, is taken out of it again (put back as it was), so that no
// cluster is left in a deleted group. The zero value is no mark. While a
// mark is held (it is less than two minutes old, and the replica that
// made it is not seen gone) putting clusters into the group is refused;
// a mark left by a delete that died is then ignored, and taken off by the
// next cluster put into the group.
type Deletion struct {
	// Target is the group the members move into.
	Target string `json:"target,omitempty"`
	// At is when the delete began, on the deleting client's clock.
	At time.Time `json:"at,omitzero"`
	// By is who asked for it.
	By string `json:"by,omitempty"`
	// Replica is the membership id of the replica whose delete made the
	// mark ("" when it shares no work, or for a mark made by a release
	// before this field): once that replica is seen gone, the mark no
	// longer holds, however young.
	Replica string `json:"replica,omitempty"`
}

// IsZero reports whether d is no mark.
func (d Deletion) IsZero() bool { return d.At.IsZero() }

// ValidateName checks a group name (G5): required, at most 64 characters,
// no control, zero-width or bidirectional formatting characters, and at
// least one visible character.
func ValidateName(name string) error {
	return check.Name(errs.NewPath("name"), "G5", "cluster group", name, MaxNameLen).ToError()
}

// ValidatePolicy checks a scheduling policy's name (G3); "" means Random.
// Scheduling.Validate checks a policy with its order.
func ValidatePolicy(p Policy) error {
	if p == "" || slices.Contains(Policies(), p) {
		return nil
	}
	return errs.List{errs.NotSupported("policy", "G3", string(p), policyNames())}.ToError()
}

// Scheduling returns the group's scheduling policy, with its default made
// explicit (a group stored before policies had one reads Random).
func (g *Group) Scheduling() Scheduling {
	return Scheduling{Policy: g.Policy, Order: g.Order}.Normalized()
}

// MoveMembers returns a cluster's groups with from replaced by to, once
// (G6: deleting a group moves its clusters into a target group).
func MoveMembers(groups []string, from, to string) []string {
	out := make([]string, 0, len(groups))
	seen := map[string]bool{}
	for _, g := range groups {
		if g == from {
			g = to
		}
		if !seen[g] {
			out = append(out, g)
			seen[g] = true
		}
	}
	return out
}

// DeepCopy returns a copy of g that shares nothing with it.
func (g *Group) DeepCopy() *Group {
	out := *g
	out.Order = slices.Clone(g.Order)
	out.Events = slices.Clone(g.Events)
	return &out
}
