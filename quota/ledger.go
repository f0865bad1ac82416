package quota

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aidlc/dlc/errs"
)

// Group is a resource group: the allocatable capacity that clusters and
// on-demand runs draw from, inside a resource package (C4).
type Group struct {
	ID       string    `json:"id"`
	Package  string    `json:"package"` // the resource package it belongs to
	Capacity Resources `json:"capacity"`
}

// Usage is a resource group's capacity and what is reserved from it.
type Usage struct {
	Group
	Reserved    Resources            `json:"reserved"`
	Allocatable Resources            `json:"allocatable"` // Capacity − Reserved
	Holders     map[string]Resources `json:"holders"`     // reservation per holder (a cluster id)
}

// Ledger records which holder reserves what in which resource group.
// Reserved never exceeds capacity and never goes below zero: a request
// that would is refused with an error that is errors.Is ErrQuota.
// A Ledger is not safe for concurrent use; its owner locks around it.
type Ledger struct {
	groups map[string]*ledgerGroup
}

type ledgerGroup struct {
	Group
	reserved Resources
	holders  map[string]Resources
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{groups: map[string]*ledgerGroup{}} }

// Register adds a resource group, or changes its capacity. A capacity
// below what is already reserved is refused.
func (l *Ledger) Register(g Group) error {
	var fl errs.List
	if g.ID == "" {
		fl = append(fl, errs.Required("id", "C4", "a resource group id"))
	}
	if g.Package == "" {
		fl = append(fl, errs.Required("package", "C4", "the resource package the group belongs to"))
	}
	if g.Capacity.AnyNegative() {
		fl = append(fl, errs.Invalid("capacity", "C4", g.Capacity.String(), "capacity is not negative"))
	}
	if err := fl.ToError(); err != nil {
		return err
	}
	if old, ok := l.groups[g.ID]; ok {
		if old.Package != g.Package {
			return errs.Conflict("resource group", g.ID, fmt.Sprintf("belongs to package %q, not %q", old.Package, g.Package))
		}
		if !old.reserved.Fits(g.Capacity) {
			return &errs.QuotaError{ResourceGroup: g.ID, Requested: "capacity " + g.Capacity.String(),
				Available: "reserved " + old.reserved.String(), Reason: "the new capacity is below what is reserved"}
		}
		old.Capacity = g.Capacity
		return nil
	}
	l.groups[g.ID] = &ledgerGroup{Group: g, holders: map[string]Resources{}}
	return nil
}

// Lookup returns a resource group's usage.
func (l *Ledger) Lookup(id string) (Usage, bool) {
	g, ok := l.groups[id]
	if !ok {
		return Usage{}, false
	}
	u := Usage{Group: g.Group, Reserved: g.reserved, Allocatable: g.Capacity.Sub(g.reserved), Holders: map[string]Resources{}}
	for h, r := range g.holders {
		u.Holders[h] = r
	}
	return u, true
}

// Groups returns every resource group's usage, by id.
func (l *Ledger) Groups() []Usage {
	ids := make([]string, 0, len(l.groups))
	for id := range l.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]Usage, 0, len(ids))
	for _, id := range ids {
		u, _ := l.Lookup(id)
		out = append(out, u)
	}
	return out
}

// Allocatable returns what group can still allocate.
func (l *Ledger) Allocatable(group string) (Resources, error) {
	g, ok := l.groups[group]
	if !ok {
		return Resources{}, errs.NotFound("resource group", group)
	}
	return g.Capacity.Sub(g.reserved), nil
}

// Held returns what holder reserves in group.
func (l *Ledger) Held(group, holder string) Resources {
	if g, ok := l.groups[group]; ok {
		return g.holders[holder]
	}
	return Resources{}
}

// Set makes holder's reservation in group exactly r (zero releases it),
// if the group can allocate the difference; otherwise it changes nothing
// and returns a *errs.QuotaError.
func (l *Ledger) Set(group, holder string, r Resources) error {
	g, ok := l.groups[group]
	if !ok {
		return errs.NotFound("resource group", group)
	}
	if r.AnyNegative() {
		return errs.List{errs.Invalid("reservation", "", r.String(), "a reservation is not negative")}.ToError()
	}
	next := g.reserved.Sub(g.holders[holder]).Add(r)
	if !next.Fits(g.Capacity) {
		return &errs.QuotaError{ResourceGroup: group, Requested: r.String(),
			Available: g.Capacity.Sub(g.reserved).Add(g.holders[holder]).String()}
	}
	g.reserved = next
	if r.IsZero() {
		delete(g.holders, holder)
	} else {
		g.holders[holder] = r
	}
	return nil
}

// Release drops holder's reservation in group.
func (l *Ledger) Release(group, holder string) {
	if g, ok := l.groups[group]; ok {
		g.reserved = g.reserved.Sub(g.holders[holder])
		delete(g.holders, holder)
	}
}

// Check verifies the ledger's invariants: every group's reservations add
// up, are not negative and fit its capacity. It returns the problems
// found, for tests and audits.
func (l *Ledger) Check() error {
	var bad []string
	for id, g := range l.groups {
		var sum Resources
		for h, r := range g.holders {
			if r.AnyNegative() {
				bad = append(bad, fmt.Sprintf("%s: holder %s negative %s", id, h, r))
			}
			sum = sum.Add(r)
		}
		if sum != g.reserved {
			bad = append(bad, fmt.Sprintf("%s: holders add to %s, reserved %s", id, sum, g.reserved))
		}
		if g.reserved.AnyNegative() || !g.reserved.Fits(g.Capacity) {
			bad = append(bad, fmt.Sprintf("%s: reserved %s outside capacity %s", id, g.reserved, g.Capacity))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("quota ledger: %s", strings.Join(bad, "; "))
	}
	return nil
}
