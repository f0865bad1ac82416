package quota

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
)

// Group is a resource group: the allocatable capacity that clusters and
// on-demand runs draw from, inside a resource package (C4).
type Group struct {
	ID       string    `json:"id"`
	Package  string    `json:"package"` // the resource package it belongs to
	Capacity Resources `json:"capacity"`
}

// Validate checks a resource group's registration: its id and package id
// are DNS labels of at most 63 characters (C4; the id is a metric label
// value and part of object names), and its capacity is not negative.
func (g Group) Validate() error {
	var fl errs.List
	fl = append(fl, check.ID("id", "C4", "resource group", g.ID)...)
	fl = append(fl, check.ID("package", "C4", "resource package", g.Package)...)
	if g.Capacity.AnyNegative() {
		fl = append(fl, errs.Invalid("capacity", "C4", g.Capacity.String(), "capacity is not negative"))
	}
	return fl.ToError()
}

// Usage is a resource group's capacity and what is reserved from it, as
// a caller reads it.
type Usage struct {
	Group
	Reserved    Resources            `json:"reserved"`
	Allocatable Resources            `json:"allocatable"` // Capacity − Reserved
	Holders     map[string]Resources `json:"holders"`     // reservation per holder (a cluster id)
}

// Hold is one holder's reservation, when it was last set, and the
// holder's generation it was made for (a cluster's Generation), which
// fences it: a decision made from an older generation of the holder
// leaves a newer hold alone.
type Hold struct {
	Resources  Resources `json:"resources"`
	Since      time.Time `json:"since"`
	Generation int64     `json:"generation,omitempty"`
}

// Account is a resource group as the platform stores it: its capacity
// and every reservation on it. It is the one object that serialises
// reservations across replicas: every change is a compare-and-swap of the
// whole account. Reserved never exceeds capacity and never goes below
// zero: a change that would is refused with an error that is errors.Is
// ErrQuota, and changes nothing.
type Account struct {
	Group
	Holders map[string]Hold `json:"holders,omitempty"`
	Version string          `json:"-"` // the store's version
}

// DeepCopy returns a copy of a that shares nothing with it.
func (a *Account) DeepCopy() *Account {
	out := *a
	out.Holders = maps.Clone(a.Holders)
	return &out
}

// Reserved returns the sum of the reservations, derived from the holders
// (never a stored sum). The sum saturates rather than wraps, and a
// negative component of a hold (which only an edit from outside the
// platform can make) counts as zero: a corrupt hold never makes room.
func (a *Account) Reserved() Resources { return a.reservedBut("") }

// reservedBut is Reserved without holder's reservation.
func (a *Account) reservedBut(holder string) Resources {
	var sum Resources
	for h, hold := range a.Holders {
		if h != holder {
			sum = sum.Add(hold.Resources.Max(Resources{}))
		}
	}
	return sum
}

// Allocatable returns what the group can still allocate.
func (a *Account) Allocatable() Resources { return a.Capacity.Sub(a.Reserved()) }

// Held returns holder's reservation.
func (a *Account) Held(holder string) Resources { return a.Holders[holder].Resources }

// Hold returns holder's reservation as it is kept, and whether it has one.
func (a *Account) Hold(holder string) (Hold, bool) {
	h, ok := a.Holders[holder]
	return h, ok
}

// Holds returns every holder's reservation, in no order: a copy, so that
// the account may change while the caller walks it.
func (a *Account) Holds() map[string]Hold { return maps.Clone(a.Holders) }

// Set makes holder's reservation exactly r (zero releases it), if the
// group can allocate the difference; otherwise it changes nothing and
// returns a *errs.QuotaError. It reports whether anything changed.
func (a *Account) Set(holder string, r Resources, now time.Time) (bool, error) {
	return a.SetFor(holder, r, 0, now)
}

// SetFor is Set for the holder's generation gen: the hold records it, and
// a hold whose amount is unchanged is still renewed for a new generation.
func (a *Account) SetFor(holder string, r Resources, gen int64, now time.Time) (bool, error) {
	if r.AnyNegative() {
		return false, errs.List{errs.Invalid("reservation", "", r.String(), "a reservation is not negative")}.ToError()
	}
	cur, had := a.Holders[holder]
	if had && cur.Resources == r && cur.Generation == gen {
		return false, nil
	}
	if r.IsZero() {
		return a.Release(holder), nil
	}
	others := a.reservedBut(holder)
	if !others.Add(r).Fits(a.Capacity) {
		return false, &errs.QuotaError{ResourceGroup: a.ID, Requested: r.String(),
			Available: a.Capacity.Sub(others).Max(Resources{}).String()}
	}
	if a.Holders == nil {
		a.Holders = map[string]Hold{}
	}
	a.Holders[holder] = Hold{Resources: r, Since: now, Generation: gen}
	return true, nil
}

// ReleaseUpTo drops holder's reservation if it was made for generation
// gen or an older one; it reports whether it did.
func (a *Account) ReleaseUpTo(holder string, gen int64) bool {
	if h, ok := a.Holders[holder]; !ok || h.Generation > gen {
		return false
	}
	return a.Release(holder)
}

// Renew makes holder's reservation as young as now; it reports whether
// there was one (and so whether it changed the account). An operation
// that finds its hold already made (by an earlier try of its own, or by
// another operation for the same generation) renews it, so that the
// account changes: a release decided on the hold as it was then conflicts
// with the renewal. A hold dated at or after now (set at this very
// instant, or on a clock that runs ahead) moves on by a nanosecond
// instead: a renewal always changes the hold, whatever the clocks say.
func (a *Account) Renew(holder string, now time.Time) bool {
	h, ok := a.Holders[holder]
	if !ok {
		return false
	}
	if now.After(h.Since) {
		h.Since = now
	} else {
		h.Since = h.Since.Add(time.Nanosecond)
	}
	a.Holders[holder] = h
	return true
}

// Release drops holder's reservation; it reports whether there was one.
func (a *Account) Release(holder string) bool {
	_, ok := a.Holders[holder]
	delete(a.Holders, holder)
	return ok
}

// SetCapacity changes the capacity, never below what is reserved.
func (a *Account) SetCapacity(c Resources) error {
	if r := a.Reserved(); !r.Fits(c) {
		return &errs.QuotaError{ResourceGroup: a.ID, Requested: "capacity " + c.String(),
			Available: "reserved " + r.String(), Reason: "the new capacity is below what is reserved"}
	}
	a.Capacity = c
	return nil
}

// Usage returns the account as a caller reads it.
func (a *Account) Usage() Usage {
	u := Usage{Group: a.Group, Reserved: a.Reserved(), Holders: make(map[string]Resources, len(a.Holders))}
	u.Allocatable = a.Capacity.Sub(u.Reserved)
	for h, r := range a.Holders {
		u.Holders[h] = r.Resources
	}
	return u
}

// Corrupt reports whether holder's reservation is one the platform never
// makes, so that only an edit from outside it can have: a negative
// component, or more than the group's whole capacity.
func (a *Account) Corrupt(holder string) bool {
	h, ok := a.Holders[holder]
	return ok && (h.Resources.AnyNegative() || !h.Resources.Fits(a.Capacity))
}

// Check verifies the account's invariants as read back from the store: no
// reservation is negative or larger than the capacity, and together they
// fit the capacity. It returns the problems found.
func (a *Account) Check() error {
	var bad []string
	for h, r := range a.Holders {
		switch {
		case r.Resources.AnyNegative():
			bad = append(bad, fmt.Sprintf("%s: holder %s negative %s", a.ID, h, r.Resources))
		case !r.Resources.Fits(a.Capacity):
			bad = append(bad, fmt.Sprintf("%s: holder %s holds %s, more than the capacity %s", a.ID, h, r.Resources, a.Capacity))
		}
	}
	if a.Capacity.AnyNegative() {
		bad = append(bad, fmt.Sprintf("%s: negative capacity %s", a.ID, a.Capacity))
	}
	if r := a.Reserved(); !r.Fits(a.Capacity) {
		bad = append(bad, fmt.Sprintf("%s: reserved %s outside capacity %s", a.ID, r, a.Capacity))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("resource group %s: %s", a.ID, strings.Join(bad, "; "))
	}
	return nil
}
