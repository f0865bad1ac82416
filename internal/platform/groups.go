package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/group"
)

// GroupService is the cluster groups of an Engine (G1–G6).
type GroupService struct{ c *Engine }

// Groups returns the client's cluster groups.
func (c *Engine) Groups() *GroupService { return c.groups }

// Create creates a cluster group (G5) with the scheduling policy of opts
// (G3; only the first opts is read), random by default. The name and the
// policy are checked together (every problem at once). Group names are
// unique: the name is claimed before the group is stored.
func (s *GroupService) Create(ctx context.Context, name string, opts ...group.CreateOptions) (*group.Group, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var o group.CreateOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	var problems errs.List
	problems = append(problems, errs.Fields(group.ValidateName(name))...)
	problems = append(problems, errs.Fields(o.Scheduling.Validate())...)
	if err := problems.ToError(); err != nil {
		return nil, err
	}
	sched := o.Scheduling.Normalized()
	now := c.clock.Now()
	g := &group.Group{ID: newID("grp"), Name: name, Policy: sched.Policy, Order: sched.Order, Creator: UserFrom(ctx), CreatedAt: now, UpdatedAt: now}
	g.Events = event.Append(nil, c.event(ctx, "user", "create", name+", policy "+describePolicy(sched)))
	if err := c.names.claimName(ctx, kindGroup, name, g.ID); err != nil {
		return nil, err
	}
	v, err := c.acc.create(ctx, kindGroup, g.ID, nil, g)
	if err != nil {
		version, written, werr := c.clusters.wrote(ctx, kindGroup, g.ID, g)
		switch {
		case werr == nil && written:
			g.Version = version
			return g, nil // made, though the reply was lost
		case werr == nil:
			c.names.releaseName(ctx, kindGroup, name, g.ID)
		}
		return nil, err
	}
	g.Version = v
	return g, nil
}

// Get returns a cluster group.
func (s *GroupService) Get(ctx context.Context, id string) (*group.Group, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.getGroup(ctx, id)
}

func (s *GroupService) getGroup(ctx context.Context, id string) (*group.Group, error) {
	c := s.c
	g, v, err := get[group.Group](ctx, c.acc, kindGroup, "group", id)
	if err != nil {
		return nil, err
	}
	g.Version = v
	return g, nil
}

// List returns every cluster group, by id.
func (s *GroupService) List(ctx context.Context) ([]*group.Group, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return list(s.c.acc, kindGroup, nil, func(g *group.Group, v string) { g.Version = v })
}

// Rename renames a cluster group (G5); the new name is claimed first.
func (s *GroupService) Rename(ctx context.Context, id, name string) (*group.Group, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := group.ValidateName(name); err != nil {
		return nil, err
	}
	g, err := c.groups.getGroup(ctx, id)
	if err != nil {
		return nil, err
	}
	old := g.Name
	if old == name {
		return g, nil
	}
	if err := c.names.claimName(ctx, kindGroup, name, id); err != nil {
		return nil, err
	}
	g.Name, g.UpdatedAt = name, c.clock.Now()
	g.Events = event.Append(g.Events, c.event(ctx, "user", "rename", old+" → "+name))
	v, err := c.acc.update(ctx, kindGroup, id, g.Version, nil, g)
	if err != nil && !errors.Is(err, errs.ErrConflict) && !errs.IsNotFound(err) {
		if version, written, werr := c.clusters.wrote(ctx, kindGroup, id, g); werr != nil {
			return nil, err // cannot tell: a stale name claim is taken over after the grace
		} else if written {
			v, err = version, nil
		}
	}
	if err != nil {
		c.names.releaseName(ctx, kindGroup, name, id)
		return nil, notFoundAs(err, "group", id)
	}
	g.Version = v
	c.names.releaseName(ctx, kindGroup, old, id)
	return g, nil
}

// SetPolicy changes a group's scheduling policy (G3), and for the
// ordered-failover policy the order of its members; it is checked first
// (group.Scheduling.Validate). Runs placed already stay where they are;
// the runs placed from then on follow the new policy. Setting the policy
// a group has already changes nothing.
func (s *GroupService) SetPolicy(ctx context.Context, id string, sched group.Scheduling) (*group.Group, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := sched.Validate(); err != nil {
		return nil, err
	}
	sched = sched.Normalized()
	g, err := c.groups.getGroup(ctx, id)
	for attempt := 0; ; attempt++ {
		if err != nil {
			return nil, notFoundAs(err, "group", id)
		}
		old := g.Scheduling()
		if old.Policy == sched.Policy && slices.Equal(old.Order, sched.Order) {
			return g, nil
		}
		next := g.DeepCopy()
		next.Policy, next.Order, next.UpdatedAt = sched.Policy, sched.Order, c.clock.Now()
		next.Events = event.Append(next.Events, c.event(ctx, "user", "policy", describePolicy(old)+" → "+describePolicy(sched)))
		v, uerr := c.acc.update(ctx, kindGroup, id, g.Version, nil, next)
		if uerr == nil {
			next.Version = v
			return next, nil
		}
		if !errors.Is(uerr, errs.ErrConflict) || attempt >= conflictRetries {
			return nil, notFoundAs(uerr, "group", id)
		}
		g, err = c.groups.freshGroup(ctx, id)
	}
}

// describePolicy says a scheduling policy in a line of a group's log: its
// name, and the first members of its order.
func describePolicy(s group.Scheduling) string {
	out := string(s.Policy)
	if len(s.Order) == 0 {
		return out
	}
	const named = 3
	shown := s.Order[:min(len(s.Order), named)]
	out += " (order " + strings.Join(shown, ", ")
	if more := len(s.Order) - len(shown); more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out + ")"
}

// Members returns the clusters in a group (G1), by id.
func (s *GroupService) Members(ctx context.Context, groupID string) ([]*cluster.Cluster, error) {
	if _, err := s.Get(ctx, groupID); err != nil {
		return nil, err
	}
	return s.c.clusters.listClusters(map[string]string{labelMemberOf + groupID: "1"})
}

// AddMembers puts clusters into a group; a cluster may be in many groups,
// from any resource group (G1, G2). Every cluster is checked before any is
// changed; a cluster that changed meanwhile is read again, and if one
// cannot be changed the ones already changed are put back. A group whose
// delete is in progress takes no members (*errs.StateError). A delete of
// the group that begins while the clusters are being put into it, through
// any client, either finds them (and moves them into its target) or
// deletes the group without them: then the clusters are put back as they
// were, and AddMembers returns ErrNotFound, or the *errs.StateError when
// the delete is still in progress (see group.Deletion).
func (s *GroupService) AddMembers(ctx context.Context, groupID string, clusterIDs ...string) error {
	return s.changeMembers(ctx, groupID, clusterIDs, true, func(gs []string) ([]string, error) {
		if slices.Contains(gs, groupID) {
			return gs, nil
		}
		return append(slices.Clone(gs), groupID), nil
	})
}

// RemoveMembers takes clusters out of a group. A cluster keeps at least
// one group (C2): removing its last is refused.
func (s *GroupService) RemoveMembers(ctx context.Context, groupID string, clusterIDs ...string) error {
	return s.changeMembers(ctx, groupID, clusterIDs, false, func(gs []string) ([]string, error) {
		out := make([]string, 0, len(gs))
		for _, g := range gs {
			if g != groupID {
				out = append(out, g)
			}
		}
		if len(out) == 0 && len(gs) > 0 {
			return nil, errs.List{errs.Invalid("groups", "C2", groupID, "a cluster stays in at least one group; add it to another group first")}.ToError()
		}
		return out, nil
	})
}

// changeMembers edits the groups of every named cluster, all or none;
// adds says that edit puts clusters into the group, which is then fenced
// against the group's delete (fences.go).
func (s *GroupService) changeMembers(ctx context.Context, groupID string, ids []string, adds bool, edit func([]string) ([]string, error)) error {
	c := s.c
	if err := ctx.Err(); err != nil {
		return err
	}
	g, err := c.groups.getGroup(ctx, groupID)
	if err != nil {
		return err
	}
	if adds && c.markHolds(g.Deleting.At, g.Deleting.Replica) {
		return groupDeleting(g, "add members")
	}
	check := func(cl *cluster.Cluster) error {
		if cl.Temporary {
			return &errs.StateError{Kind: "cluster", ID: cl.ID, Op: "join a group", State: string(cl.State), Reason: "an on-demand cluster belongs to its run"}
		}
		_, err := edit(cl.Spec.Groups)
		return err
	}
	for _, id := range ids {
		cl, err := c.clusters.getCluster(ctx, id)
		if err != nil {
			return err
		}
		if err := check(cl); err != nil {
			return err
		}
	}
	var changed []groupsChange
	for _, id := range ids {
		var before, written []string
		err := s.editCluster(ctx, id, func(cl *cluster.Cluster) (bool, error) {
			if err := check(cl); err != nil {
				return false, err
			}
			gs, _ := edit(cl.Spec.Groups)
			if slices.Equal(gs, cl.Spec.Groups) {
				return false, nil
			}
			before, written = cl.Spec.Groups, gs
			cl.Spec.Groups = gs
			cl.Events = event.Append(cl.Events, c.event(ctx, "user", "groups", "now in "+joinSorted(gs)))
			return true, nil
		})
		if err != nil {
			// All or none: put back what was changed. A put-back that fails
			// too is said, with the cluster it left changed.
			failed := []error{err}
			for _, d := range changed {
				if perr := s.editCluster(context.WithoutCancel(ctx), d.id, func(cl *cluster.Cluster) (bool, error) {
					cl.Spec.Groups = d.before
					cl.Events = event.Append(cl.Events, c.event(ctx, "system", "groups", "put back: now in "+joinSorted(d.before)))
					return true, nil
				}); perr != nil {
					failed = append(failed, fmt.Errorf("cluster %s was changed and could not be put back (it is in %s): %w", d.id, joinSorted(d.written), perr))
				}
			}
			if len(failed) == 1 {
				return err
			}
			return errors.Join(failed...)
		}
		if before != nil {
			changed = append(changed, groupsChange{id, before, written})
		}
	}
	if adds && len(changed) > 0 {
		if target, err := c.groups.groupLive(ctx, groupID, "add members"); err != nil {
			c.groups.takeOut(ctx, groupID, target, changed, "group "+groupID+" was deleted meanwhile: put back")
			return err
		}
	}
	return nil
}

// actionGroupMissing is the log entry of a cluster one of whose groups
// does not exist.
const actionGroupMissing = "group-missing"

// checkGroups finds a cluster in a group that does not exist: one put
// into it (created, edited, added) while the group was deleted, whose
// undo failed then (the caller was told; nothing else would look again),
// or one whose group someone deleted outside the platform. It says so in
// the cluster's log, once: which group it belongs in is its owner's to
// say (an edit, or a delete), and the platform deletes nothing for it. A
// group the cache has is taken as there without decoding it; one it has
// not is read as every read by id is (cached: the store, unless the watch
// saw it deleted).
func (s *GroupService) checkGroups(ctx context.Context, cl *cluster.Cluster) error {
	c := s.c
	if cl.Temporary || cl.State == cluster.Deleting {
		return nil
	}
	for _, g := range cl.Spec.Groups {
		msg := "its cluster group " + g + " does not exist (deleted while the cluster was put into it, or outside the platform): edit its groups"
		if _, ok := c.cache.Get(kindGroup, g); ok || logged(cl.Events, actionGroupMissing, msg) {
			continue
		}
		if _, _, err := cached[group.Group](ctx, c.acc, kindGroup, g); !errs.IsNotFound(err) {
			if err != nil {
				return err
			}
			continue // the cache lags its create
		}
		c.o.log.Error(errs.NotFound("group", g), "a cluster is in a group that does not exist", "cluster", cl.ID)
		if _, err := c.noteCluster(ctx, cl.ID, actionGroupMissing, msg); err != nil {
			return err
		}
	}
	return nil
}

// groupsChange is one cluster's groups as a change found them (before)
// and as it wrote them.
type groupsChange struct {
	id              string
	before, written []string
}

// groupDeleting is the refusal of op on a group whose delete is in
// progress.
func groupDeleting(g *group.Group, op string) error {
	return &errs.StateError{Kind: "group", ID: g.ID, Op: op, State: "deleting",
		Reason: fmt.Sprintf("%s is deleting the group (since %s), moving its clusters into %s",
			g.Deleting.By, g.Deleting.At.Format(time.RFC3339), g.Deleting.Target)}
}

// freshGroup reads a cluster group from the store itself.
func (s *GroupService) freshGroup(ctx context.Context, id string) (*group.Group, error) {
	c := s.c
	g, v, err := fresh[group.Group](ctx, c.acc, kindGroup, id)
	if err != nil {
		return nil, notFoundAs(err, "group", id)
	}
	g.Version = v
	return g, nil
}

// groupLive is the create side of a group's fenced delete (fences.go):
// clusters were just written into group id (op names how), and it checks
// on the store itself that the group is there and not being deleted. It
// returns ErrNotFound when the group is gone, and, when its delete is in
// progress, a *errs.StateError and the target that delete moves members
// into; the caller then takes the clusters out again (takeOut). A mark
// no longer held is taken off by compare-and-swap, so that its delete, if
// it was only slow, conflicts and lists the members again.
//
// Linearisable with GroupService.Delete (mark, list the members in the
// store, move them, delete on the marked version): a cluster written into
// the group before the delete's list is moved by it; one written after was
// written after the mark, and this read, later still, finds the mark or
// finds the group gone.
func (s *GroupService) groupLive(ctx context.Context, id, op string) (target string, err error) {
	c := s.c
	ctx = context.WithoutCancel(ctx) // written: see it through
	for attempt := 0; ; attempt++ {
		g, err := c.groups.freshGroup(ctx, id)
		switch {
		case err != nil:
			return "", err
		case g.Deleting.IsZero():
			return "", nil
		case c.markHolds(g.Deleting.At, g.Deleting.Replica):
			return g.Deleting.Target, groupDeleting(g, op)
		}
		next := g.DeepCopy()
		next.Deleting = group.Deletion{}
		_, err = c.acc.update(ctx, kindGroup, id, g.Version, nil, next)
		if err == nil {
			return "", nil
		}
		if !errors.Is(err, errs.ErrConflict) || attempt >= conflictRetries {
			return "", notFoundAs(err, "group", id)
		}
	}
}

// groupsLive checks groups with groupLive (op as there), all at once, and
// returns their errors in the order of ids.
func (s *GroupService) groupsLive(ctx context.Context, ids []string, op string) []error {
	c := s.c
	out := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { _, out[i] = c.groups.groupLive(ctx, id, op) })
	}
	wg.Wait()
	return out
}

// takeOut undoes what changes wrote into the groups of their clusters,
// for a group (into) that was deleted, or whose delete (into target, when
// known) is in progress, while they were put into it: each cluster's
// groups lose into, and the target too where into's delete has moved the
// cluster there already, and get back what the change took out (see
// putBackGroups). Failures are logged: what stays is a cluster in a group
// that is gone, as before the fence.
func (s *GroupService) takeOut(ctx context.Context, into, target string, changes []groupsChange, why string) {
	c := s.c
	ctx = context.WithoutCancel(ctx)
	for _, ch := range changes {
		err := c.groups.editFreshCluster(ctx, ch.id, func(cl *cluster.Cluster) (bool, error) {
			next := putBackGroups(cl.Spec.Groups, ch.before, ch.written, into, target)
			if slices.Equal(next, cl.Spec.Groups) {
				return false, nil
			}
			cl.Spec.Groups = next
			cl.Events = event.Append(cl.Events, c.event(ctx, "system", "groups", why+": now in "+joinSorted(next)))
			return true, nil
		})
		if err != nil {
			c.o.log.Error(err, "a cluster put into a deleted group could not be taken out", "cluster", ch.id, "group", into)
		}
	}
}

// putBackGroups returns a cluster's groups, now cur, with a change from
// before to written undone as far as it concerns group into, which was
// deleted (or is being deleted, into target when known) meanwhile: into
// goes (unless the cluster was in it before); if into's delete has moved
// the cluster on already (into replaced by one group the change did not
// write, the target when known), that group goes too; what the change
// took out comes back. Other changes made meanwhile stay. A cluster keeps
// at least one group (C2): if nothing would be left, cur is returned.
func putBackGroups(cur, before, written []string, into, target string) []string {
	next := slices.Clone(cur)
	if !slices.Contains(before, into) {
		next = slices.DeleteFunc(next, func(g string) bool { return g == into })
	}
	if !slices.Contains(cur, into) {
		var extra []string
		for _, g := range cur {
			if !slices.Contains(written, g) {
				extra = append(extra, g)
			}
		}
		if len(extra) == 1 && (target == "" || extra[0] == target) && !slices.Contains(before, extra[0]) {
			next = slices.DeleteFunc(next, func(g string) bool { return g == extra[0] })
		}
	}
	for _, g := range before {
		if !slices.Contains(written, g) && !slices.Contains(next, g) {
			next = append(next, g)
		}
	}
	if len(next) == 0 {
		return cur
	}
	return next
}

// editCluster applies f to a cluster by compare-and-swap, reading it again
// on a conflict.
func (s *GroupService) editCluster(ctx context.Context, id string, f func(*cluster.Cluster) (bool, error)) error {
	c := s.c
	cl, err := c.clusters.getCluster(ctx, id)
	return c.groups.editClusterFrom(ctx, id, cl, err, f)
}

// editFreshCluster is editCluster from the store's newest version of the
// cluster, not the cache's: for a change where f finding nothing to do
// must not rest on a cache that lags (a fenced delete's move of the
// members it listed in the store, putting a cluster back).
func (s *GroupService) editFreshCluster(ctx context.Context, id string, f func(*cluster.Cluster) (bool, error)) error {
	c := s.c
	cl, err := c.clusters.getFresh(ctx, id)
	return c.groups.editClusterFrom(ctx, id, cl, err, f)
}

func (s *GroupService) editClusterFrom(ctx context.Context, id string, cl *cluster.Cluster, err error, f func(*cluster.Cluster) (bool, error)) error {
	c := s.c
	for attempt := 0; ; attempt++ {
		if err != nil {
			return notFoundAs(err, "cluster", id)
		}
		next := cl.DeepCopy()
		ok, ferr := f(next)
		if ferr != nil || !ok {
			return ferr
		}
		err = c.clusters.putCluster(ctx, next, cl.Version)
		if err == nil || !errors.Is(err, errs.ErrConflict) || attempt >= conflictRetries {
			return err
		}
		var v string
		cl, v, err = fresh[cluster.Cluster](ctx, c.acc, kindCluster, id)
		if cl != nil {
			cl.Version = v
		}
	}
}

// Delete deletes a cluster group and moves its clusters into the target
// group (G6). The clusters are otherwise unaffected; job configs that
// name the deleted group are left as they are, and their next run fails
// saying the group does not exist (J19). Runs waiting for it fail so.
//
// It is fenced against clusters put into the group meanwhile, through any
// client (AddMembers, a cluster's create or edit): it marks the group
// (group.Deletion, with the target), lists the members in the store
// itself, moves them, and deletes the group on the version it marked,
// while a cluster put into the group reads it again once written and is
// taken out again if it finds the mark or finds the group gone (see
// fences.go). Moving the members into the target is fenced the same way
// against a delete of the target: if the target is deleted, or its delete
// is in progress, meanwhile, the members are put back, the mark taken off,
// and Delete fails (ErrInvalid: name another target). A group whose delete
// is in progress is not deleted again (*errs.StateError); a mark its
// delete left when it died is taken over after two minutes.
func (s *GroupService) Delete(ctx context.Context, id, targetID string) error {
	c := s.c
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := c.groups.getGroup(ctx, id); err != nil {
		return err
	}
	if targetID == id || targetID == "" {
		return errs.List{errs.Invalid("target", "G6", targetID, "name another existing group to move the members into")}.ToError()
	}
	var mark group.Deletion // this delete's, once written
	// failed takes this delete's mark off, if it wrote one, and returns
	// err: a delete that fails leaves nothing that blocks creates.
	failed := func(err error) error {
		if !mark.IsZero() {
			s.unmarkGroup(ctx, id, mark)
		}
		return err
	}
	for attempt := 0; ; attempt++ {
		g, err := c.groups.freshGroup(ctx, id)
		if err != nil {
			return failed(err)
		}
		own := !mark.IsZero() && sameMark(g.Deleting, mark)
		if c.markHolds(g.Deleting.At, g.Deleting.Replica) && !own {
			return groupDeleting(g, "delete") // not this delete's mark (a mark of its own taken off meanwhile is not put back)
		}
		if err := s.checkTarget(ctx, targetID); err != nil {
			return failed(err)
		}
		fence := g.Version // carries this delete's mark (written before, then a rename) or gets it now
		if !own {
			marked := g.DeepCopy()
			marked.Deleting = group.Deletion{Target: targetID, At: c.clock.Now(), By: UserFrom(ctx), Replica: c.share.self()}
			fence, err = c.acc.update(ctx, kindGroup, id, g.Version, nil, marked)
			if errors.Is(err, errs.ErrConflict) && attempt < conflictRetries {
				continue
			}
			if err != nil {
				return failed(notFoundAs(err, "group", id))
			}
			mark = marked.Deleting
			// A create that read the group just before the mark may
			// still be writing its cluster (see joinWindow).
			if err := sleepCtx(ctx, joinWindow+joinWindow/10); err != nil {
				return failed(err)
			}
		}
		if err := s.moveMembers(ctx, id, targetID); err != nil {
			return failed(err)
		}
		err = c.store.Delete(ctx, kindGroup, id, fence)
		if errors.Is(err, errs.ErrConflict) && attempt < conflictRetries {
			continue // written meanwhile (a rename, a mark taken off): mark and look again
		}
		if err != nil {
			return failed(notFoundAs(err, "group", id))
		}
		c.names.releaseName(ctx, kindGroup, g.Name, id)
		return nil
	}
}

// checkTarget checks on the store itself that a delete's target group is
// there and not being deleted.
func (s *GroupService) checkTarget(ctx context.Context, targetID string) error {
	c := s.c
	t, err := c.groups.freshGroup(ctx, targetID)
	switch {
	case errs.IsNotFound(err):
		return errs.List{errs.Invalid("target", "G6", targetID, "no cluster group with this id")}.ToError()
	case err != nil:
		return err
	case c.markHolds(t.Deleting.At, t.Deleting.Replica):
		return errs.List{errs.Invalid("target", "G6", targetID, "this group is being deleted; name another")}.ToError()
	}
	return nil
}

// moveMembers moves the members of group id, as the store has them now,
// into target (G6), and checks that the target is still there and not
// being deleted (groupLive); if it is not, the members are put back and
// the error says to name another target.
func (s *GroupService) moveMembers(ctx context.Context, id, target string) error {
	c := s.c
	docs, err := c.acc.listLatest(ctx, kindCluster, map[string]string{labelMemberOf + id: "1"})
	if err != nil {
		return err
	}
	var moved []groupsChange
	for _, d := range docs {
		var before, written []string
		if err := c.groups.editFreshCluster(ctx, d.ID, func(cl *cluster.Cluster) (bool, error) {
			if !slices.Contains(cl.Spec.Groups, id) {
				return false, nil
			}
			before = cl.Spec.Groups
			cl.Spec.Groups = group.MoveMembers(cl.Spec.Groups, id, target)
			written = cl.Spec.Groups
			cl.Events = event.Append(cl.Events, c.event(ctx, "user", "groups", "group "+id+" deleted: now in "+joinSorted(cl.Spec.Groups)))
			return true, nil
		}); errs.IsNotFound(err) {
			continue // deleted meanwhile
		} else if err != nil {
			return err
		}
		if before != nil {
			moved = append(moved, groupsChange{d.ID, before, written})
		}
	}
	if len(moved) == 0 {
		return nil
	}
	then, err := c.groups.groupLive(ctx, target, "receive the members of a deleted group")
	if err == nil {
		return nil
	}
	c.groups.takeOut(ctx, target, then, moved, "group "+target+" was deleted meanwhile: put back")
	if errs.IsNotFound(err) || errors.Is(err, errs.ErrState) {
		return errs.List{errs.Invalid("target", "G6", target, "this group was deleted, or began to be, while the members moved into it; name another")}.ToError()
	}
	return err
}

// unmarkGroup takes the mark of a failed delete off the group id: mark,
// if the group carries it still, by compare-and-swap on the group as it
// is now (a rename or a policy change meanwhile kept the mark), read
// again after a conflict. Another delete's mark is left alone. A failure
// leaves the mark until it is no longer held (markLife), and is logged.
func (s *GroupService) unmarkGroup(ctx context.Context, id string, mark group.Deletion) {
	c := s.c
	ctx = context.WithoutCancel(ctx)
	for attempt := 0; ; attempt++ {
		g, err := c.groups.freshGroup(ctx, id)
		if errs.IsNotFound(err) {
			return
		}
		if err == nil {
			if !sameMark(g.Deleting, mark) {
				return
			}
			next := g.DeepCopy()
			next.Deleting = group.Deletion{}
			if _, err = c.acc.update(ctx, kindGroup, id, g.Version, nil, next); err == nil {
				return
			}
		}
		if !errors.Is(err, errs.ErrConflict) || attempt >= conflictRetries {
			c.o.log.V(1).Info("a failed delete's mark stays until it expires", "group", id, "error", err.Error())
			return
		}
	}
}

// sameMark reports whether a and b are one delete's mark. The replica is
// not compared: a release before Deletion.Replica rewrites a marked group
// without it.
func sameMark(a, b group.Deletion) bool {
	return a.At.Equal(b.At) && a.By == b.By && a.Target == b.Target
}

func joinSorted(list []string) string {
	s := slices.Clone(list)
	sort.Strings(s)
	return strings.Join(s, ", ")
}
