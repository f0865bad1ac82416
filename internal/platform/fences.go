package platform

import (
	"context"
	"time"

	"github.com/aidlc/dlc/cluster"
)

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
// A mark left by a delete that died between its steps holds for markLife,
// or until the replica that made it (its membership id is in the mark) is
// seen gone (markHolds); after that it is ignored, and whoever meets it
// takes it off by compare-and-swap (so that a delete that was only slow
// conflicts, and looks again). Time and membership decide only when a
// mark stops blocking creates, never whether a dependent is missed, with
// two exceptions: a cluster create's early read of its groups (below)
// rests on two clients' clocks measuring a second alike within a tenth;
// and a group delete whose target is deleted meanwhile puts the members
// it moved back into the group, and if its mark no longer holds by then
// (it ran for longer than markLife, or its replica was taken for gone)
// and another delete of the group has taken the mark over, that delete
// may miss them.

// A cluster's create does not wait for its write before it reads its
// groups: it reads them beside the write (the read's round trip is then
// off the caller's path), and the group's delete waits joinWindow after
// its mark before it lists the members. That is still linearisable, with
// time measured as an interval on each client's own clock, never compared
// across clocks. The create takes the time (began) before it sends the
// read, and counts the read only if its write returned within joinWindow
// of began: the write took effect at the latest then. If the read found
// no mark, the mark was made after began, and the delete lists the
// members at least joinWindow after its mark, so after the write: the
// list sees the cluster. A write that took longer (a slow API server, a
// paused process) makes the create read its groups again after it, as
// before. Both clocks must measure a second alike within a tenth (the
// delete waits 11/10 of joinWindow; quartz drifts by parts per million),
// and the create's must not stop while its process runs on: a machine's
// monotonic clock stops while the machine sleeps, so the create checks the
// interval on the wall clock too (a suspended machine's wall clock is set
// forward when it wakes). What neither catches: a virtual machine paused
// between the read and the write's return whose both clocks stand still
// and whose wall clock is set right only later. And during an upgrade
// from a version whose group delete does not wait, a delete through an
// old client may miss a create through a new one (the cluster, in a
// group that is gone, says so in its log: checkGroups).
//
// An edit or AddMembers that puts clusters into a group reads it after
// its write (fenceJoins), as before: they are rarer, and their readers
// wait for them less.

// joinWindow bounds how long after its read a create's write may return
// for the read to count (see above); a group's delete waits a tenth more
// after its mark.
const joinWindow = time.Second

// withinJoinWindow reports whether a write that returned at done, for a
// read begun at began (both time.Now() of this process), counts the read:
// no more than joinWindow between them on the monotonic clock and on the
// wall clock.
func withinJoinWindow(began, done time.Time) bool {
	return inJoinWindow(done.Sub(began), done.Round(0).Sub(began.Round(0)))
}

// inJoinWindow reports whether an interval measured as mono on the
// monotonic clock and as wall on the wall clock is within joinWindow on
// both.
func inJoinWindow(mono, wall time.Duration) bool {
	return mono >= 0 && mono <= joinWindow && wall >= 0 && wall <= joinWindow
}

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

// markHolds reports whether a mark made at, by the replica whose
// membership id is by, holds: made within markLife (markHeld), and by a
// replica not seen gone (workSharing.gone). A replica killed between its
// mark and its operation's last write leaves the mark behind; what it
// holds up (the runs placed on a cluster being hibernated, a job
// config's runs and edits, the clusters joining a group) waited for
// markLife before, and since 2026-12-08 waits until its maker's
// membership lapses (the soak's replica killed during an idle hibernate
// held every new run of the cluster for two minutes). A mark that no
// longer holds is taken off, or taken over, by compare-and-swap, as one
// past its life always was: an operation that was only slow conflicts,
// and looks again.
func (c *Engine) markHolds(at time.Time, by string) bool {
	return c.markHeld(at) && !c.share.gone(by, c.clock.Now().Sub(at))
}

// stopMarkHeld reports whether cl's Stopping mark holds (markHolds).
func (c *Engine) stopMarkHeld(cl *cluster.Cluster) bool {
	return c.markHolds(cl.Stopping, cl.StoppingBy)
}

// sleepCtx waits d of real time, or until ctx is done (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
