package dlc

import (
	"context"
	"github.com/aidlc/dlc/auth"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/internal/platform"
)

// Groups returns the client's cluster groups.
func (c *Client) Groups() *GroupService { return &GroupService{c.e.Groups(), c} }

// GroupService is the cluster groups of a Client (G1–G6).
type GroupService struct {
	s *platform.GroupService
	c *Client
}

// GroupCreateOptions are the options of a group's create: its scheduling
// policy (G3).
type GroupCreateOptions = group.CreateOptions

// Create creates a cluster group (G5) with the scheduling policy of opts
// (G3; only the first opts is read), random by default:
//
//	c.Groups().Create(ctx, "主备", dlc.GroupCreateOptions{Scheduling: group.Scheduling{Policy: group.OrderedFailover}})
//
// The name and the policy are checked together (every problem at once).
// Group names are unique: the name is claimed before the group is stored.
func (s *GroupService) Create(ctx context.Context, name string, opts ...GroupCreateOptions) (*group.Group, error) {
	if err := s.c.gate().allow(ctx, auth.CreateGroup, auth.Resource{Kind: auth.KindGroup, Creator: UserFrom(ctx)}); err != nil {
		return nil, err
	}
	return s.s.Create(ctx, name, opts...)
}

// SetPolicy changes a group's scheduling policy (G3): random,
// least-loaded, ordered failover (with the order of its members: the
// primary first) or most free quota; see group.Policy. It is checked
// first (group.Scheduling.Validate). Runs placed already stay where they
// are; the runs placed from then on follow the new policy, and each
// records which member it went to and why (job.Run.Placement).
func (s *GroupService) SetPolicy(ctx context.Context, id string, sched group.Scheduling) (*group.Group, error) {
	if err := s.c.groups().check(ctx, auth.UpdateGroup, id); err != nil {
		return nil, err
	}
	return s.s.SetPolicy(ctx, id, sched)
}

// Get returns a cluster group, with its scheduling policy (G3).
func (s *GroupService) Get(ctx context.Context, id string) (*group.Group, error) {
	return s.c.groups().may(ctx, auth.DescribeGroup, id)
}

// mayMembers asks UpdateGroup of the group and UpdateCluster of each
// cluster joining or leaving it.
func (s *GroupService) mayMembers(ctx context.Context, groupID string, clusterIDs []string) error {
	if err := s.c.groups().check(ctx, auth.UpdateGroup, groupID); err != nil {
		return err
	}
	for _, id := range clusterIDs {
		if err := s.c.clusters().check(ctx, auth.UpdateCluster, id); err != nil && !errs.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// List returns every cluster group, by id.
func (s *GroupService) List(ctx context.Context) ([]*group.Group, error) {
	gs, err := s.s.List(ctx)
	if err != nil {
		return nil, err
	}
	return keepAllowed(ctx, s.c.gate(), auth.DescribeGroup, gs, groupResource)
}

// Rename renames a cluster group (G5); the new name is claimed first.
func (s *GroupService) Rename(ctx context.Context, id, name string) (*group.Group, error) {
	if err := s.c.groups().check(ctx, auth.UpdateGroup, id); err != nil {
		return nil, err
	}
	return s.s.Rename(ctx, id, name)
}

// Members returns the clusters in a group (G1), by id.
func (s *GroupService) Members(ctx context.Context, groupID string) ([]*cluster.Cluster, error) {
	if err := s.c.groups().check(ctx, auth.DescribeGroup, groupID); err != nil {
		return nil, err
	}
	cls, err := s.s.Members(ctx, groupID)
	if err != nil {
		return nil, err
	}
	return keepAllowed(ctx, s.c.gate(), auth.DescribeCluster, cls, clusterResource)
}

// AddMembers puts clusters into a group; a cluster may be in many groups,
// from any resource group (G1, G2). Every cluster is checked before any is
// changed; a cluster that changed meanwhile is read again, and if one
// cannot be changed the ones already changed are put back. A group whose
// delete is in progress takes no members (*StateError). When a delete of
// the group, through any client, begins while the clusters are being put
// into it and does not see them, they are put back as they were and
// AddMembers returns ErrNotFound (deleted) or a *StateError (its delete
// still in progress); see group.Deletion.
func (s *GroupService) AddMembers(ctx context.Context, groupID string, clusterIDs ...string) error {
	if err := s.mayMembers(ctx, groupID, clusterIDs); err != nil {
		return err
	}
	return s.s.AddMembers(ctx, groupID, clusterIDs...)
}

// RemoveMembers takes clusters out of a group. A cluster keeps at least
// one group (C2): removing its last is refused.
func (s *GroupService) RemoveMembers(ctx context.Context, groupID string, clusterIDs ...string) error {
	if err := s.mayMembers(ctx, groupID, clusterIDs); err != nil {
		return err
	}
	return s.s.RemoveMembers(ctx, groupID, clusterIDs...)
}

// Delete deletes a cluster group and moves its clusters into the target
// group (G6). The clusters are otherwise unaffected; job configs that
// name the deleted group are left as they are, and their next run fails
// saying the group does not exist (J19). Runs waiting for it fail so.
//
// Clusters put into the group meanwhile through any client (AddMembers,
// Clusters().Create, Clone or Edit) are either moved with the others or
// taken out again, their call failing; no cluster is left in a deleted
// group. A target deleted meanwhile makes the delete fail (ErrInvalid:
// name another), its members put back. A group whose delete is in
// progress is not deleted again, nor named as a target (see
// group.Deletion).
func (s *GroupService) Delete(ctx context.Context, id, targetID string) error {
	if err := s.c.groups().check(ctx, auth.DeleteGroup, id); err != nil {
		return err
	}
	if targetID != "" {
		if err := s.c.groups().check(ctx, auth.UpdateGroup, targetID); err != nil {
			return err
		}
	}
	return s.s.Delete(ctx, id, targetID)
}
