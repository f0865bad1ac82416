package platform

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aidlc/dlc/backend"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
)

// Names are claimed by create: a claim is a stored document whose id is
// the kind and the name, holding the id of the object that owns it, so two
// replicas can never give one name to two objects. A claim whose owner is
// gone or renamed (left by a crash between two writes) is stale: the next
// claim of the name takes it over.

type nameClaim struct {
	Owner string    `json:"owner"`
	At    time.Time `json:"at"`
}

func claimID(kind, name string) string { return kind + ":" + name }

// maxClaimAttempts bounds the creates of one claim: a claim taken over
// from a stale owner, or released meanwhile, takes a second; a third
// that still finds the name taken by a claim the store cannot read (an
// object someone else made under the claim's name) gives up.
const maxClaimAttempts = 3

// names claims and releases the names of clusters and cluster groups,
// and remembers, behind its own lock, the claims it has seen without
// their owner (and the started duplicates it has logged).
type names struct {
	acc   *access
	clock backend.Clock
	grace time.Duration // the repair grace: a claim younger is not stale

	mu   sync.Mutex
	seen map[string]claimSeen // claim id (or "duplicate:<cluster>") → when first seen so
}

func newNames(acc *access, clock backend.Clock, grace time.Duration) *names {
	return &names{acc: acc, clock: clock, grace: grace, seen: map[string]claimSeen{}}
}

// forget forgets the sighting id.
func (n *names) forget(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.seen, id)
}

// sighting returns when id was first seen, if it was.
func (n *names) sighting(id string) (claimSeen, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s, ok := n.seen[id]
	return s, ok
}

// claimName claims name for owner, or fails with ErrConflict naming the
// object that has it.
func (n *names) claimName(ctx context.Context, kind, name, owner string) error {
	id := claimID(kind, name)
	for attempt := 0; ; attempt++ {
		_, err := n.acc.create(ctx, kindName, id, nil, nameClaim{Owner: owner, At: n.clock.Now()})
		if err == nil {
			return nil
		}
		if !errors.Is(err, errs.ErrConflict) {
			// The claim may have been made though its reply was lost.
			if cl, _, gerr := fresh[nameClaim](ctx, n.acc, kindName, id); gerr == nil && cl.Owner == owner {
				return nil
			}
			return err
		}
		cl, v, gerr := fresh[nameClaim](ctx, n.acc, kindName, id)
		switch {
		case errs.IsNotFound(gerr) && attempt+1 >= maxClaimAttempts:
			// Taken, yet not there to read: not a claim of ours (the
			// store's conflict says what holds the name).
			return errs.Conflict(kind, name, fmt.Sprintf(
				"the name's claim cannot be made, and what holds it cannot be read as a claim: %v", err))
		case errs.IsNotFound(gerr):
			continue // released meanwhile: try again
		case gerr != nil:
			return gerr
		case cl.Owner == owner:
			return nil
		case n.ownsName(ctx, kind, name, cl.Owner):
			return errs.Conflict(kind, name, "the name is taken by "+kind+" "+cl.Owner)
		case n.claimAge(id, v) < n.grace || attempt >= 2:
			// A young claim's owner may be on its way (being created, or
			// renamed to this name): only an old one can be stale. Its age
			// is how long this client has seen it unchanged, on its own
			// clock, never the date another replica's clock wrote on it: a
			// replica whose clock is ahead must not take a fresh claim over.
			return errs.Conflict(kind, name, fmt.Sprintf(
				"the name is taken by %s %s, which does not exist (yet); if it stays so, the claim is taken over after %s", kind, cl.Owner, n.grace))
		}
		n.mu.Lock()
		delete(n.seen, id)
		n.mu.Unlock()
		// Stale: its owner is gone or has another name, for longer than the
		// repair grace.
		if err := n.acc.store.Delete(ctx, kindName, id, v); err != nil && !errs.IsNotFound(err) && !errors.Is(err, errs.ErrConflict) {
			return err
		}
	}
}

// nameFree refuses, before anything is written, a name that the cache
// shows claimed by another object of kind that has it: what claimName
// would refuse once called. A name it lets through may still be taken by
// the time claimName runs.
func (n *names) nameFree(ctx context.Context, kind, name, owner string) error {
	cl, _, err := fromCache[nameClaim](n.acc, kindName, claimID(kind, name))
	if err != nil {
		return nil
	}
	return n.takenBy(ctx, kind, name, owner, cl)
}

// takenBy returns ErrConflict when claim cl of kind's name is another
// object's than owner's and that object has the name; else nil.
func (n *names) takenBy(ctx context.Context, kind, name, owner string, cl *nameClaim) error {
	if cl.Owner == owner || !n.ownsName(ctx, kind, name, cl.Owner) {
		return nil
	}
	return errs.Conflict(kind, name, "the name is taken by "+kind+" "+cl.Owner)
}

// nameTaken is what a plan checks of a name its operation would claim
// for owner: ErrConflict when the store has the name's claim and the
// claim's owner, another object of kind, has the name (what claimName
// refuses); nil when the name is free, owner's, or held by a claim whose
// owner does not have it (claimName takes that over, or refuses it
// while it is younger than the grace: a plan cannot tell which). It
// writes nothing.
func (n *names) nameTaken(ctx context.Context, kind, name, owner string) error {
	cl, _, err := fresh[nameClaim](ctx, n.acc, kindName, claimID(kind, name))
	switch {
	case errs.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return n.takenBy(ctx, kind, name, owner, cl)
}

// maxClaimsSeen bounds the claims a client remembers seeing without their
// owner; past it, the oldest sightings are forgotten (and seen anew).
const maxClaimsSeen = 4096

// claimSeen is a claim as a client first saw it without its owner: its
// version, and when on the client's clock.
type claimSeen struct {
	version string
	at      time.Time
}

// claimAge returns how long this client has seen the claim id at version
// unchanged (0 the first time).
func (n *names) claimAge(id, version string) time.Duration {
	now := n.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.seen[id]; ok && s.version == version {
		return now.Sub(s.at)
	}
	if len(n.seen) >= maxClaimsSeen {
		for k, s := range n.seen {
			if now.Sub(s.at) >= 2*n.grace || len(n.seen) >= maxClaimsSeen {
				delete(n.seen, k)
			}
		}
	}
	n.seen[id] = claimSeen{version, now}
	return 0
}

// ownsName reports whether the object owner of kind still has name. An
// owner the cache has not seen is looked for in the store itself: a
// lagging cache must not make a live owner's claim look stale.
func (n *names) ownsName(ctx context.Context, kind, name, owner string) bool {
	d, ok := n.acc.cache.Get(kind, owner)
	if !ok {
		var err error
		if d, err = n.acc.latest(ctx, kind, owner); errs.IsNotFound(err) {
			return false
		} else if err != nil {
			return true // cannot tell: keep the claim
		}
	}
	var v struct {
		Name string `json:"name"`
		Spec struct {
			Name string `json:"name"`
		} `json:"spec"`
	}
	if decodeInto(d.Data, &v) != nil {
		return true // cannot tell: keep the claim
	}
	return v.Name == name || v.Spec.Name == name
}

// releaseName drops owner's claim of name; a claim left behind by a
// failure here is stale and taken over by the next claim.
func (n *names) releaseName(ctx context.Context, kind, name, owner string) {
	id := claimID(kind, name)
	cl, v, err := fresh[nameClaim](context.WithoutCancel(ctx), n.acc, kindName, id)
	if err != nil || cl.Owner != owner {
		return
	}
	_ = n.acc.store.Delete(context.WithoutCancel(ctx), kindName, id, v)
}

// dupRecheck is how often a started cluster whose name another cluster
// holds is looked at again on the store (and logged).
const dupRecheck = 10 * time.Minute

// actionNameUnclaimed is the log entry of a started cluster whose name
// another cluster holds.
const actionNameUnclaimed = "name-unclaimed"

// checkNameClaim checks that cl holds the claim of its name, which its
// create made beside storing it (createCluster): a cluster stored by a
// client that died before its claim was made, or stored by someone else,
// holds none. Looked up in the cache; a cluster younger than the repair
// grace is looked at again then (its claim may be on its way, and reach
// the cache after the cluster). An older one is read again from the store
// with its claim: a name nobody holds is claimed for it (should its
// create's own claim be on its way after all, both claim for the same
// owner, and both succeed); a name another cluster holds and has makes it
// a duplicate, deleted as a create whose claim failed is, if it was never
// started (one that was is left as it is, logged and said once in its own
// log, and read again on the store only once per dupRecheck: deleting
// what runs is not a repair). It returns when to look again. Temporary
// clusters hold no claim (their names are their runs').
func (c clusterReconciler) checkNameClaim(ctx context.Context, cl *cluster.Cluster) (time.Duration, error) {
	if cl.Temporary || cl.State == cluster.Deleting {
		return 0, nil
	}
	id := claimID(kindCluster, cl.Spec.Name)
	if got, _, err := fromCache[nameClaim](c.acc, kindName, id); err == nil && got.Owner == cl.ID {
		return 0, nil
	}
	// Its age on this client's clock, from its creator's: a skew makes the
	// repair come sooner or later, never wrong.
	if age := c.clock.Now().Sub(cl.CreatedAt); age < c.o.grace {
		return c.o.grace - max(age, 0), nil
	}
	// A started duplicate found before is read again (and logged) once per
	// dupRecheck, not at each of its reconciles.
	dup := "duplicate:" + cl.ID
	seen, known := c.names.sighting(dup)
	if known && c.clock.Now().Sub(seen.at) < dupRecheck {
		return 0, nil
	}
	cl, err := c.clusters.getFresh(ctx, cl.ID)
	if errs.IsNotFound(err) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	if cl.Temporary || cl.State == cluster.Deleting || claimID(kindCluster, cl.Spec.Name) != id {
		return 0, nil // it moved on (renamed, deleted): that version comes here too
	}
	got, _, err := fresh[nameClaim](ctx, c.acc, kindName, id)
	switch {
	case err == nil && got.Owner == cl.ID:
	case err != nil && !errs.IsNotFound(err):
		return 0, err
	case err == nil && c.names.ownsName(ctx, kindCluster, cl.Spec.Name, got.Owner):
		why := "its name " + cl.Spec.Name + " is held by cluster " + got.Owner + ": its create did not claim it"
		if cl.Generation > 1 || (cl.State != cluster.Creating && cl.State != cluster.Created) {
			c.names.forget(dup)
			c.names.claimAge(dup, "") // seen now
			c.o.log.Error(errs.Conflict(kindCluster, cl.Spec.Name, why), "a started cluster holds no claim of its name; left as it is", "cluster", cl.ID)
			// Said on the cluster too, once: its log is where its owner
			// looks.
			msg := why + "; two clusters have one name until one of them is renamed or deleted"
			if !logged(cl.Events, actionNameUnclaimed, msg) { // the cluster just read: noteCluster would read it again
				if _, err := c.noteCluster(ctx, cl.ID, actionNameUnclaimed, msg); err != nil {
					c.names.forget(dup) // not said yet: the retry says it
					return 0, err
				}
			}
			return 0, nil
		}
		if err := c.clusters.undoCreate(ctx, cl.ID, why); err != nil {
			return 0, err
		}
	default:
		// Nobody holds it, or a claim whose owner has it not (stale):
		// claimName makes it, or takes the stale one over.
		if err := c.names.claimName(ctx, kindCluster, cl.Spec.Name, cl.ID); errors.Is(err, errs.ErrConflict) {
			return c.o.grace, nil // taken meanwhile, or not yet stale: look again
		} else if err != nil {
			return 0, err
		}
		c.o.log.Info("claimed the name of a cluster that held no claim of it", "cluster", cl.ID, "name", cl.Spec.Name)
	}
	return 0, nil
}
