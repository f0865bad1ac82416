package dlc

import (
	"context"
	"sort"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/group"
)

// groupRecord is how a group is stored.
type groupRecord = group.Group

// CreateGroup creates a cluster group (G5) with the random policy (G3).
// Group names are unique.
func (c *Client) CreateGroup(ctx context.Context, name string) (*group.Group, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := group.ValidateName(name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.groupNameFreeLocked(ctx, "", name); err != nil {
		return nil, err
	}
	now := c.clock.Now()
	g := &group.Group{ID: newID("grp"), Name: name, Policy: group.Random, Creator: UserFrom(ctx), CreatedAt: now, UpdatedAt: now}
	v, err := save(ctx, c.be, kindGroup, g.ID, 0, g)
	if err != nil {
		return nil, err
	}
	g.Version = v
	c.event(ctx, kindGroup+"/"+g.ID, "user", "create", name)
	return g, nil
}

func (c *Client) groupNameFreeLocked(ctx context.Context, self, name string) error {
	all, _, err := loadAll[group.Group](ctx, c.be, kindGroup)
	if err != nil {
		return err
	}
	for _, g := range all {
		if g.ID != self && g.Name == name {
			return errs.Conflict("group", name, "the name is taken by group "+g.ID)
		}
	}
	return nil
}

// GetGroup returns a cluster group.
func (c *Client) GetGroup(ctx context.Context, id string) (*group.Group, error) {
	g, v, err := load[group.Group](ctx, c.be, kindGroup, id)
	if err != nil {
		return nil, notFoundAs(err, "group", id)
	}
	g.Version = v
	return g, nil
}

// ListGroups returns every cluster group.
func (c *Client) ListGroups(ctx context.Context) ([]*group.Group, error) {
	all, vs, err := loadAll[group.Group](ctx, c.be, kindGroup)
	for i := range all {
		all[i].Version = vs[i]
	}
	return all, err
}

// RenameGroup renames a cluster group (G5).
func (c *Client) RenameGroup(ctx context.Context, id, name string) (*group.Group, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := group.ValidateName(name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g, v, err := load[group.Group](ctx, c.be, kindGroup, id)
	if err != nil {
		return nil, notFoundAs(err, "group", id)
	}
	if err := c.groupNameFreeLocked(ctx, id, name); err != nil {
		return nil, err
	}
	old := g.Name
	g.Name, g.UpdatedAt = name, c.clock.Now()
	if g.Version, err = save(ctx, c.be, kindGroup, id, v, g); err != nil {
		return nil, err
	}
	c.event(ctx, kindGroup+"/"+id, "user", "rename", old+" → "+name)
	return g, nil
}

// Members returns the clusters in a group (G1), by id.
func (c *Client) Members(ctx context.Context, groupID string) ([]*cluster.Cluster, error) {
	if _, err := c.GetGroup(ctx, groupID); err != nil {
		return nil, err
	}
	all, err := c.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	var out []*cluster.Cluster
	for _, cl := range all {
		if contains(cl.Spec.Groups, groupID) {
			out = append(out, cl)
		}
	}
	return out, nil
}

// AddMembers puts clusters into a group; a cluster may be in many groups,
// from any resource group (G1, G2).
func (c *Client) AddMembers(ctx context.Context, groupID string, clusterIDs ...string) error {
	return c.changeMembers(ctx, groupID, clusterIDs, func(gs []string) ([]string, error) {
		if contains(gs, groupID) {
			return gs, nil
		}
		return append(gs, groupID), nil
	})
}

// RemoveMembers takes clusters out of a group. A cluster keeps at least
// one group (C2): removing its last is refused.
func (c *Client) RemoveMembers(ctx context.Context, groupID string, clusterIDs ...string) error {
	return c.changeMembers(ctx, groupID, clusterIDs, func(gs []string) ([]string, error) {
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
func (c *Client) changeMembers(ctx context.Context, groupID string, ids []string, edit func([]string) ([]string, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, _, err := load[group.Group](ctx, c.be, kindGroup, groupID); err != nil {
		return notFoundAs(err, "group", groupID)
	}
	type change struct {
		cl *cluster.Cluster
		v  int64
	}
	var changes []change
	for _, id := range ids {
		cl, v, err := c.loadCluster(ctx, id)
		if err != nil {
			return err
		}
		if cl.Temporary {
			return &errs.StateError{Kind: "cluster", ID: id, Op: "join a group", State: string(cl.State), Reason: "an on-demand cluster belongs to its run"}
		}
		gs, err := edit(cl.Spec.Groups)
		if err != nil {
			return err
		}
		cl.Spec.Groups = gs
		changes = append(changes, change{cl, v})
	}
	for _, ch := range changes {
		if err := c.putCluster(ctx, ch.cl, ch.v); err != nil {
			return err
		}
		c.event(ctx, kindCluster+"/"+ch.cl.ID, "user", "groups", "now in "+joinSorted(ch.cl.Spec.Groups))
	}
	c.dispatchLocked(ctx)
	return nil
}

// DeleteGroup deletes a cluster group and moves its clusters into the
// target group (G6). The clusters are otherwise unaffected; job configs
// that name the deleted group are left as they are, and their next run
// fails saying the group does not exist (J19).
func (c *Client) DeleteGroup(ctx context.Context, id, targetID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, v, err := load[group.Group](ctx, c.be, kindGroup, id)
	if err != nil {
		return notFoundAs(err, "group", id)
	}
	if targetID == id || targetID == "" {
		return errs.List{errs.Invalid("target", "G6", targetID, "name another existing group to move the members into")}.ToError()
	}
	if _, _, err := load[group.Group](ctx, c.be, kindGroup, targetID); err != nil {
		if errs.IsNotFound(err) {
			return errs.List{errs.Invalid("target", "G6", targetID, "no cluster group with this id")}.ToError()
		}
		return err
	}
	all, vs, err := loadAll[cluster.Cluster](ctx, c.be, kindCluster)
	if err != nil {
		return err
	}
	for i, cl := range all {
		if !contains(cl.Spec.Groups, id) {
			continue
		}
		cl.Spec.Groups = group.MoveMembers(cl.Spec.Groups, id, targetID)
		if err := c.putCluster(ctx, cl, vs[i]); err != nil {
			return err
		}
	}
	if err := c.be.Delete(ctx, kindGroup, id, v); err != nil {
		return err
	}
	c.event(ctx, kindGroup+"/"+id, "user", "delete", "members moved to "+targetID)
	c.dispatchLocked(ctx)
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func joinSorted(list []string) string {
	s := append([]string(nil), list...)
	sort.Strings(s)
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}
