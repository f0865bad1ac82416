package platform

import "time"

// Deletes fenced against concurrent creates. A delete that is refused
// while something depends on the object (a job config's runs, J17) or
// that carries its dependents along (a cluster group's members, G6) must
// see every dependent that another client creates meanwhile. Each such
// delete
//
//  1. marks the object (job.Deletion, group.Deletion) by compare-and-swap,
//  2. lists the dependents in the store itself (listLatest, not the cache,
//     which may lag another replica's write),
//  3. deletes the object on the version it marked (a refused delete takes
//     the mark off again),
//
// and each create of a dependent, once it is stored, reads the object from
// the store itself and undoes itself when it finds it marked or gone. The
// two are linearisable: a dependent stored before the delete's list is
// seen by it; one stored after was stored after the mark, so its read
// (later still) finds the mark or, once the delete is done, nothing. A
// mark never stands in for the object's version: anything else that
// writes the object (an edit, a rename, a stale mark taken off) makes the
// delete's last step conflict, and the delete begins again.
//
// A mark left by a delete that died between its steps holds for markLife;
// after that it is ignored, and whoever meets it takes it off by
// compare-and-swap (so that a delete that was only slow conflicts, and
// looks again). Time decides only when a mark stops blocking creates,
// never whether a dependent is missed, with one exception: a group delete
// whose target is deleted meanwhile puts the members it moved back into
// the group, and if it has by then run for longer than markLife and
// another delete of the group has taken the mark over, that delete may
// miss them.

// markLife is how long a delete's mark holds.
const markLife = 2 * time.Minute

// markHeld reports whether a mark made at is held: made less than
// markLife ago on this client's clock, or less than markLife ahead of it
// (another client's clock may be ahead).
func (c *Engine) markHeld(at time.Time) bool {
	if at.IsZero() {
		return false
	}
	age := c.clock.Now().Sub(at)
	return age < markLife && age > -markLife
}
