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

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
)

// MaxNameLen is the longest group name, in characters.
const MaxNameLen = 64

// Policy names a group's scheduling policy (G3).
type Policy string

// Random picks a running member at random; the only policy the product
// has today (G3).
const Random Policy = "random"

// Group is a cluster group as the platform keeps it.
type Group struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Policy    Policy    `json:"policy"`
	Version   string    `json:"-"` // the store's version
	Creator   string    `json:"creator"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Events is the group's operation log, newest last.
	Events []cluster.Event `json:"events,omitempty"`
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
// mark is held (it is less than two minutes old) putting clusters into
// the group is refused; a mark left by a delete that died is then
// ignored, and taken off by the next cluster put into the group.
type Deletion struct {
	// Target is the group the members move into.
	Target string `json:"target,omitempty"`
	// At is when the delete began, on the deleting client's clock.
	At time.Time `json:"at,omitzero"`
	// By is who asked for it.
	By string `json:"by,omitempty"`
}

// IsZero reports whether d is no mark.
func (d Deletion) IsZero() bool { return d.At.IsZero() }

// ValidateName checks a group name (G5): required, at most 64 characters,
// no control, zero-width or bidirectional formatting characters, and at
// least one visible character.
func ValidateName(name string) error {
	return check.Name(errs.NewPath("name"), "G5", "cluster group", name, MaxNameLen).ToError()
}

// ValidatePolicy checks a scheduling policy (G3); "" means Random.
func ValidatePolicy(p Policy) error {
	if p == "" || p == Random {
		return nil
	}
	return errs.List{errs.NotSupported("policy", "G3", string(p), []string{string(Random)})}.ToError()
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
	out.Events = slices.Clone(g.Events)
	return &out
}
