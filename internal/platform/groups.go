package platform

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/group"
)

// GroupService is the cluster groups of an Engine (G1–G6).
type GroupService struct{ c *Engine }

// Groups returns the client's cluster groups.
func (c *Engine) Groups() *GroupService { return &GroupService{c} }

// Create creates a cluster group (G5) with the random policy (G3). Group
// names are unique: the name is claimed before the group is stored.
func (s *GroupService) Create(ctx context.Context, name string) (*group.Group, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := group.ValidateName(name); err != nil {
		return nil, err
	}
	now := c.clock.Now()
	g := &group.Group{ID: newID("grp"), Name: name, Policy: group.Random, Creator: UserFrom(ctx), CreatedAt: now, UpdatedAt: now}
	g.Events = cluster.AppendEvent(nil, c.event(ctx, "user", "create", name))
	if err := c.claimName(ctx, kindGroup, name, g.ID); err != nil {
		return nil, err
	}
	v, err := c.create(ctx, kindGroup, g.ID, nil, g)
	if err != nil {
		version, written, werr := c.wrote(ctx, kindGroup, g.ID, g)
		switch {
		case werr == nil && written:
			g.Version = version
			return g, nil // made, though the reply was lost
		case werr == nil:
			c.releaseName(ctx, kindGroup, name, g.ID)
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
	return s.c.getGroup(ctx, id)
}

func (c *Engine) getGroup(ctx context.Context, id string) (*group.Group, error) {
	g, v, err := get[group.Group](ctx, c, kindGroup, "group", id)
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
	return list(s.c, kindGroup, nil, func(g *group.Group, v string) { g.Version = v })
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
	g, err := c.getGroup(ctx, id)
	if err != nil {
		return nil, err
	}
	old := g.Name
	if old == name {
		return g, nil
	}
	if err := c.claimName(ctx, kindGroup, name, id); err != nil {
		return nil, err
	}
	g.Name, g.UpdatedAt = name, c.clock.Now()
	g.Events = cluster.AppendEvent(g.Events, c.event(ctx, "user", "rename", old+" → "+name))
	v, err := c.update(ctx, kindGroup, id, g.Version, nil, g)
	if err != nil && !errors.Is(err, errs.ErrConflict) && !errs.IsNotFound(err) {
		if version, written, werr := c.wrote(ctx, kindGroup, id, g); werr != nil {
			return nil, err // cannot tell: a stale name claim is taken over after the grace
		} else if written {
			v, err = version, nil
		}
	}
	if err != nil {
		c.releaseName(ctx, kindGroup, name, id)
		return nil, notFoundAs(err, "group", id)
	}
	g.Version = v
	c.releaseName(ctx, kindGroup, old, id)
	return g, nil
}

// Members returns the clusters in a group (G1), by id.
func (s *GroupService) Members(ctx context.Context, groupID string) ([]*cluster.Cluster, error) {
	if _, err := s.Get(ctx, groupID); err != nil {
		return nil, err
	}
	return s.c.listClusters(map[string]string{labelMemberOf + groupID: "1"})
}

// AddMembers puts clusters into a group; a cluster may be in many groups,
// from any resource group (G1, G2). Every cluster is checked before any is
// changed; a cluster that changed meanwhile is read again, and if one
// cannot be changed the ones already changed are put back.
func (s *GroupService) AddMembers(ctx context.Context, groupID string, clusterIDs ...string) error {
	return s.c.changeMembers(ctx, groupID, clusterIDs, func(gs []string) ([]string, error) {
		if slices.Contains(gs, groupID) {
			return gs, nil
		}
		return append(slices.Clone(gs), groupID), nil
	})
}

// RemoveMembers takes clusters out of a group. A cluster keeps at least
// one group (C2): removing its last is refused.
func (s *GroupService) RemoveMembers(ctx context.Context, groupID string, clusterIDs ...string) error {
	return s.c.changeMembers(ctx, groupID, clusterIDs, func(gs []string) ([]string, error) {
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

// changeMembers edits the groups of every named cluster, all or none.
func (c *Engine) changeMembers(ctx context.Context, groupID string, ids []string, edit func([]string) ([]string, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := c.getGroup(ctx, groupID); err != nil {
		return err
	}
	check := func(cl *cluster.Cluster) error {
		if cl.Temporary {
			return &errs.StateError{Kind: "cluster", ID: cl.ID, Op: "join a group", State: string(cl.State), Reason: "an on-demand cluster belongs to its run"}
		}
		_, err := edit(cl.Spec.Groups)
		return err
	}
	for _, id := range ids {
		cl, err := c.getCluster(ctx, id)
		if err != nil {
			return err
		}
		if err := check(cl); err != nil {
			return err
		}
	}
	type done struct {
		id     string
		before []string
	}
	var changed []done
	for _, id := range ids {
		var before []string
		err := c.editCluster(ctx, id, func(cl *cluster.Cluster) (bool, error) {
			if err := check(cl); err != nil {
				return false, err
			}
			gs, _ := edit(cl.Spec.Groups)
			if slices.Equal(gs, cl.Spec.Groups) {
				return false, nil
			}
			before = cl.Spec.Groups
			cl.Spec.Groups = gs
			cl.Events = cluster.AppendEvent(cl.Events, c.event(ctx, "user", "groups", "now in "+joinSorted(gs)))
			return true, nil
		})
		if err != nil {
			// All or none: put back what was changed.
			for _, d := range changed {
				_ = c.editCluster(context.WithoutCancel(ctx), d.id, func(cl *cluster.Cluster) (bool, error) {
					cl.Spec.Groups = d.before
					cl.Events = cluster.AppendEvent(cl.Events, c.event(ctx, "system", "groups", "put back: now in "+joinSorted(d.before)))
					return true, nil
				})
			}
			return err
		}
		if before != nil {
			changed = append(changed, done{id, before})
		}
	}
	return nil
}

// editCluster applies f to a cluster by compare-and-swap, reading it again
// on a conflict.
func (c *Engine) editCluster(ctx context.Context, id string, f func(*cluster.Cluster) (bool, error)) error {
	cl, err := c.getCluster(ctx, id)
	for attempt := 0; ; attempt++ {
		if err != nil {
			return notFoundAs(err, "cluster", id)
		}
		next := cl.DeepCopy()
		ok, ferr := f(next)
		if ferr != nil || !ok {
			return ferr
		}
		err = c.putCluster(ctx, next, cl.Version)
		if err == nil || !errors.Is(err, errs.ErrConflict) || attempt >= conflictRetries {
			return err
		}
		var v string
		cl, v, err = fresh[cluster.Cluster](ctx, c, kindCluster, id)
		if cl != nil {
			cl.Version = v
		}
	}
}

// Delete deletes a cluster group and moves its clusters into the target
// group (G6). The clusters are otherwise unaffected; job configs that
// name the deleted group are left as they are, and their next run fails
// saying the group does not exist (J19). Runs waiting for it fail so.
func (s *GroupService) Delete(ctx context.Context, id, targetID string) error {
	c := s.c
	if err := ctx.Err(); err != nil {
		return err
	}
	g, err := c.getGroup(ctx, id)
	if err != nil {
		return err
	}
	if targetID == id || targetID == "" {
		return errs.List{errs.Invalid("target", "G6", targetID, "name another existing group to move the members into")}.ToError()
	}
	if ok, err := c.exists(ctx, kindGroup, targetID); err != nil {
		return err
	} else if !ok {
		return errs.List{errs.Invalid("target", "G6", targetID, "no cluster group with this id")}.ToError()
	}
	members, err := c.listClusters(map[string]string{labelMemberOf + id: "1"})
	if err != nil {
		return err
	}
	for _, m := range members {
		if err := c.editCluster(ctx, m.ID, func(cl *cluster.Cluster) (bool, error) {
			if !slices.Contains(cl.Spec.Groups, id) {
				return false, nil
			}
			cl.Spec.Groups = group.MoveMembers(cl.Spec.Groups, id, targetID)
			cl.Events = cluster.AppendEvent(cl.Events, c.event(ctx, "user", "groups", "group "+id+" deleted: now in "+joinSorted(cl.Spec.Groups)))
			return true, nil
		}); err != nil {
			return err
		}
	}
	if err := c.store.Delete(ctx, kindGroup, id, g.Version); err != nil {
		return notFoundAs(err, "group", id)
	}
	c.releaseName(ctx, kindGroup, g.Name, id)
	return nil
}

func joinSorted(list []string) string {
	s := slices.Clone(list)
	sort.Strings(s)
	return strings.Join(s, ", ")
}
