package quota

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
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
	// Headroom is what is reserved but not running: what the group's
	// running autoscaling clusters hold above what Ray's autoscaler runs
	// of them (their headroom, lent so that the autoscaler can ask for
	// more; issue 42), as Ray answered when the usage was read. While runs
	// or growths wait in the group's queue it comes down to zero, the
	// headroom given back to them. Zero where Ray runs no autoscaler of
	// its own (the memory backend), and not part of the account: the
	// platform fills it in when it reads the usage.
	Headroom Resources `json:"headroom,omitzero"`
}

// Hold is one holder's reservation, when it was last set, and the
// holder's generation it was made for (a cluster's Generation), which
// fences it: a decision made from an older generation of the holder
// leaves a newer hold alone. Seq is the account's count of changes when
// it was set (Account.Seq): it orders the writes of one holder's hold.
// A hold of no resources is a release, kept as such until it is settled.
type Hold struct {
	Resources  Resources `json:"resources"`
	Since      time.Time `json:"since"`
	Generation int64     `json:"generation,omitempty"`
	Seq        int64     `json:"seq,omitempty"`
}

// PendingHolds are an account's holds changed since they were last settled,
// by holder. In JSON each is one string (Hold.Encode), not an object: an
// account keeps up to MaxPending of them in the one object every
// reservation is a compare-and-swap of, and what a Kubernetes API server
// spends on a write grows with the fields it validates and tracks (300
// holds as objects made a ResourceGroup's status update take 20 times as
// long as with none; as strings, 3.7 times). Holds as objects, as earlier versions stored them, are
// read too.
type PendingHolds map[string]Hold

// MarshalJSON encodes each hold as one string.
func (p PendingHolds) MarshalJSON() ([]byte, error) {
	out := make(map[string]string, len(p))
	for holder, h := range p {
		out[holder] = h.Encode()
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads holds encoded as strings, or as objects.
func (p *PendingHolds) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*p = nil
		return nil
	}
	out := make(PendingHolds, len(raw))
	for holder, v := range raw {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v) // an object, as stored before
		}
		h, err := DecodeHold(s)
		if err != nil {
			return fmt.Errorf("pending hold of %s: %w", holder, err)
		}
		out[holder] = h
	}
	*p = out
	return nil
}

// maxEncodedHold bounds an encoded hold: five integers of at most 20
// characters and a date of at most 35, with their commas.
const maxEncodedHold = 160

// Encode returns h as one string: its milli-CPUs, bytes of memory, GPUs,
// generation and seq, and when it was set (RFC 3339 with nanoseconds,
// UTC), separated by commas: "8000,17179869184,0,3,42,2026-12-05T06:00:00.5Z".
func (h Hold) Encode() string {
	return strings.Join([]string{strconv.FormatInt(h.Resources.MilliCPU, 10), strconv.FormatInt(h.Resources.Memory, 10),
		strconv.FormatInt(h.Resources.GPU, 10), strconv.FormatInt(h.Generation, 10), strconv.FormatInt(h.Seq, 10),
		h.Since.UTC().Format(time.RFC3339Nano)}, ",")
}

// DecodeHold reads a hold as Encode writes it, or as a JSON object (the
// form earlier versions stored). What someone else may have written is
// bounded and checked: an error says what is wrong.
func DecodeHold(s string) (Hold, error) {
	if len(s) > maxEncodedHold*4 {
		return Hold{}, fmt.Errorf("a hold of %d bytes", len(s))
	}
	if strings.HasPrefix(s, "{") {
		var h Hold
		err := json.Unmarshal([]byte(s), &h)
		return h, err
	}
	f := strings.Split(s, ",")
	if len(s) > maxEncodedHold || len(f) != 6 {
		return Hold{}, fmt.Errorf("hold %q is not milli-CPUs,memory,GPUs,generation,seq,since", s)
	}
	var n [5]int64
	for i := range n {
		var err error
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return Hold{}, fmt.Errorf("hold %q: %w", s, err)
		}
	}
	since, err := time.Parse(time.RFC3339Nano, f[5])
	if err != nil {
		return Hold{}, fmt.Errorf("hold %q: %w", s, err)
	}
	return Hold{Resources: Resources{MilliCPU: n[0], Memory: n[1], GPU: n[2]}, Generation: n[3], Seq: n[4], Since: since}, nil
}

// Same reports whether h and o are one hold: the same change, amount,
// generation and date (compared as instants, whatever their zones).
func (h Hold) Same(o Hold) bool {
	return h.Resources == o.Resources && h.Generation == o.Generation && h.Seq == o.Seq && h.Since.Equal(o.Since)
}

// Settled is where an account's settled holds are kept, out of the
// account: one document per holder in the platform. Get returns holder's
// hold (a hold of no resources is none); All returns every holder's.
type Settled interface {
	Get(holder string) (Hold, bool)
	All() map[string]Hold
}

// HoldMap is settled holds kept in a map, by holder: a Settled as read
// once (an audit, a resource group's step, a test, a watcher of the
// store).
type HoldMap map[string]Hold

// Get returns holder's hold.
func (m HoldMap) Get(holder string) (Hold, bool) {
	h, ok := m[holder]
	return h, ok
}

// All returns a copy of every hold.
func (m HoldMap) All() map[string]Hold { return maps.Clone(m) }

// MaxPending bounds the holds an account keeps itself (Pending): past it
// a new hold or a renewal is refused as unavailable (errors.Is
// ErrUnavailable) until some are settled; a release is still made (it
// makes room), up to twice the bound, which the store's schema enforces.
const MaxPending = 1000

// Account is a resource group as the platform stores it: its capacity,
// the sum of every reservation on it, and the reservations changed and
// not yet settled. It is the one object that serialises reservations
// across replicas: every change is a compare-and-swap of the account,
// and it stays small whatever the holders: a change adds its hold to
// Pending and to the sum, and settling moves it out to where settled
// holds are kept (Settled, one document per holder), once that document
// carries it. A holder's hold is its pending one if it has one, else its
// settled one. Reserved never exceeds capacity and never goes below
// zero: a change that would is refused with an error that is errors.Is
// ErrQuota, and changes nothing.
type Account struct {
	Group
	// Sum is every hold added up, pending and settled, changed with each
	// of them in the same compare-and-swap.
	Sum Resources `json:"reserved"`
	// Pending are the holds changed since they were last settled.
	Pending PendingHolds `json:"pending,omitempty"`
	// Seq counts the changes of holds: each change's hold carries it.
	Seq int64 `json:"seq,omitempty"`
	// Settled is the store's version of the newest hold document settled:
	// a reader of the settled holds whose copy of them has not reached it
	// may miss one.
	Settled string `json:"settled,omitempty"`
	Version string `json:"-"` // the store's version

	settled Settled
}

// Bind tells a where its settled holds are kept.
func (a *Account) Bind(s Settled) { a.settled = s }

// DeepCopy returns a copy of a that shares nothing with it but where its
// settled holds are kept.
func (a *Account) DeepCopy() *Account {
	out := *a
	out.Pending = maps.Clone(a.Pending)
	return &out
}

// Reserved returns the sum of the reservations. It never goes below zero
// (a sum edited from outside the platform counts as zero there).
func (a *Account) Reserved() Resources { return a.Sum.Max(Resources{}) }

// Allocatable returns what the group can still allocate.
func (a *Account) Allocatable() Resources { return a.Capacity.Sub(a.Reserved()) }

// Held returns holder's reservation.
func (a *Account) Held(holder string) Resources {
	h, _ := a.Hold(holder)
	return h.Resources
}

// Hold returns holder's reservation as it is kept, and whether it has one.
func (a *Account) Hold(holder string) (Hold, bool) {
	if h, ok := a.Pending[holder]; ok {
		return h, !h.Resources.IsZero()
	}
	if a.settled == nil {
		return Hold{}, false
	}
	h, ok := a.settled.Get(holder)
	return h, ok && !h.Resources.IsZero()
}

// Holds returns every holder's reservation, in no order: a copy, so that
// the account may change while the caller walks it.
func (a *Account) Holds() map[string]Hold {
	var out map[string]Hold
	if a.settled != nil {
		out = a.settled.All()
	}
	if out == nil {
		out = make(map[string]Hold, len(a.Pending))
	}
	for holder, h := range a.Pending {
		out[holder] = h
	}
	for holder, h := range out {
		if h.Resources.IsZero() {
			delete(out, holder)
		}
	}
	return out
}

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
	cur, had := a.Hold(holder)
	if had && cur.Resources == r && cur.Generation == gen {
		return false, nil
	}
	if r.IsZero() {
		return a.Release(holder), nil
	}
	others := a.Reserved()
	if had {
		others = others.Sub(cur.Resources.Max(Resources{})).Max(Resources{})
	}
	if !others.Add(r).Fits(a.Capacity) {
		return false, &errs.QuotaError{ResourceGroup: a.ID, Requested: r.String(),
			Available: a.Capacity.Sub(others).Max(Resources{}).String()}
	}
	if err := a.room(holder); err != nil {
		return false, err
	}
	a.Sum = others.Add(r)
	a.put(holder, Hold{Resources: r, Since: now, Generation: gen})
	return true, nil
}

// room refuses a change of a holder not pending when the account keeps
// MaxPending holds already.
func (a *Account) room(holder string) error {
	if _, ok := a.Pending[holder]; !ok && len(a.Pending) >= MaxPending {
		return errs.Unavailable("resource group "+a.ID, fmt.Errorf("%d reservation changes are waiting to be settled", len(a.Pending)))
	}
	return nil
}

// put makes h holder's pending hold, as the next change.
func (a *Account) put(holder string, h Hold) {
	a.Seq++
	h.Seq = a.Seq
	if a.Pending == nil {
		a.Pending = PendingHolds{}
	}
	a.Pending[holder] = h
}

// ReleaseUpTo drops holder's reservation if it was made for generation
// gen or an older one; it reports whether it did.
func (a *Account) ReleaseUpTo(holder string, gen int64) bool {
	if h, ok := a.Hold(holder); !ok || h.Generation > gen {
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
	h, ok := a.Hold(holder)
	if !ok || a.room(holder) != nil {
		return false
	}
	if now.After(h.Since) {
		h.Since = now
	} else {
		h.Since = h.Since.Add(time.Nanosecond)
	}
	a.put(holder, h)
	return true
}

// Release drops holder's reservation; it reports whether there was one.
// (Past MaxPending holds waiting to be settled, a release is made all the
// same: it makes room.)
func (a *Account) Release(holder string) bool {
	h, ok := a.Hold(holder)
	if !ok {
		return false
	}
	a.Sum = a.Reserved().Sub(h.Resources.Max(Resources{})).Max(Resources{})
	a.put(holder, Hold{Since: h.Since, Generation: h.Generation})
	return true
}

// Settle drops holder's pending hold of change seq, whose settled copy now
// carries it, stored at version; Settled becomes version when newer
// reports it newer than Settled. It reports whether it dropped the hold:
// a settled copy of another change than the pending one settles nothing.
func (a *Account) Settle(holder string, seq int64, version string, newer func(a, b string) bool) bool {
	h, ok := a.Pending[holder]
	if !ok || h.Seq != seq {
		return false
	}
	delete(a.Pending, holder)
	if a.Settled == "" || newer(version, a.Settled) {
		a.Settled = version
	}
	return true
}

// TrueUp makes the sum that of the holds, as a rebuild after an edit
// from outside the platform; it reports whether the sum changed.
func (a *Account) TrueUp() bool {
	var sum Resources
	for _, h := range a.Holds() {
		sum = sum.Add(h.Resources.Max(Resources{}))
	}
	if sum == a.Sum {
		return false
	}
	a.Sum = sum
	return true
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
	holds := a.Holds()
	u := Usage{Group: a.Group, Reserved: a.Reserved(), Holders: make(map[string]Resources, len(holds))}
	u.Allocatable = a.Capacity.Sub(u.Reserved)
	for h, r := range holds {
		u.Holders[h] = r.Resources
	}
	return u
}

// Corrupt reports whether holder's reservation is one the platform never
// makes, so that only an edit from outside it can have: a negative
// component, or more than the group's whole capacity.
func (a *Account) Corrupt(holder string) bool {
	h, ok := a.Hold(holder)
	return ok && (h.Resources.AnyNegative() || !h.Resources.Fits(a.Capacity))
}

// Check verifies the account's invariants as read back from the store: no
// reservation is negative or larger than the capacity, together they fit
// the capacity, and the sum is theirs. It returns the problems found.
func (a *Account) Check() error {
	var bad []string
	holds := a.Holds()
	var sum Resources
	for _, h := range holds {
		sum = sum.Add(h.Resources.Max(Resources{}))
	}
	if sum != a.Sum {
		bad = append(bad, fmt.Sprintf("%s: reserved %s, but its holds add up to %s", a.ID, a.Sum, sum))
	}
	if len(a.Pending) > MaxPending {
		bad = append(bad, fmt.Sprintf("%s: %d holds pending, more than %d", a.ID, len(a.Pending), MaxPending))
	}
	for h, r := range holds {
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
	if r := a.Sum; !r.Fits(a.Capacity) || r.AnyNegative() {
		bad = append(bad, fmt.Sprintf("%s: reserved %s outside capacity %s", a.ID, r, a.Capacity))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("resource group %s: %s", a.ID, strings.Join(bad, "; "))
	}
	return nil
}
