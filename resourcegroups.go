package dlc

import (
	"context"
	"github.com/aidlc/dlc/auth"

	"github.com/aidlc/dlc/internal/platform"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// ResourceGroups returns the client's resource groups.
func (c *Client) ResourceGroups() *ResourceGroupService {
	return &ResourceGroupService{c.e.ResourceGroups(), c.gate(), c}
}

// ResourceGroupService is the resource groups of a Client: capacity that
// clusters and on-demand runs reserve from (C4, C14, J3, J12). A resource
// group is a stored object and its reservations live on it, so every
// client over the store sees and changes the same ones.
type ResourceGroupService struct {
	s *platform.ResourceGroupService
	g gate
	c *Client
}

// Pending lists the runs waiting in a resource group's queue in admission
// order (priority, then submission), each with its position, as Kueue's
// visibility API does. Admitted runs are not listed.
func (s *ResourceGroupService) Pending(ctx context.Context, rg string) ([]job.Pending, error) {
	if err := s.g.allow(ctx, auth.DescribeResourceGroup, resourceGroupResource(rg)); err != nil {
		return nil, err
	}
	ps, err := s.s.Pending(ctx, rg)
	if err != nil || !s.g.on() {
		return ps, err
	}
	// Only the runs the user may describe: the queue's order (Position,
	// Ahead) still counts every run.
	return keepAllowed(ctx, s.g, auth.DescribeRun, ps, func(p job.Pending) auth.Resource {
		return s.c.runs().resourceOf(ctx, p.RunID)
	})
}

// Register adds a resource group with its allocatable capacity inside a
// resource package, or changes its capacity (never below what is
// reserved). Runs waiting for quota are reconsidered.
func (s *ResourceGroupService) Register(ctx context.Context, g quota.Group) (quota.Usage, error) {
	if err := s.g.allow(ctx, auth.RegisterResourceGroup, resourceGroupResource(g.ID)); err != nil {
		return quota.Usage{}, err
	}
	return s.s.Register(ctx, g)
}

// Delete deletes a resource group. It is refused (a *StateError, ErrState)
// while anything holds quota in it or a run queues, runs or is being
// cleaned up in it, as the store has them, not this client's cache. A
// cluster or a job config that only names the group is not refused: the
// cluster cannot start until its spec names another group (C4), and the
// config's next run fails saying the group does not exist (J12).
func (s *ResourceGroupService) Delete(ctx context.Context, id string) error {
	if err := s.g.allow(ctx, auth.DeleteResourceGroup, resourceGroupResource(id)); err != nil {
		return err
	}
	return s.s.Delete(ctx, id)
}

// Get returns a resource group's capacity, reservations and what it can
// still allocate.
func (s *ResourceGroupService) Get(ctx context.Context, id string) (quota.Usage, error) {
	if err := s.g.allow(ctx, auth.DescribeResourceGroup, resourceGroupResource(id)); err != nil {
		return quota.Usage{}, err
	}
	return s.s.Get(ctx, id)
}

// List returns every resource group's usage, by id.
func (s *ResourceGroupService) List(ctx context.Context) ([]quota.Usage, error) {
	us, err := s.s.List(ctx)
	if err != nil {
		return nil, err
	}
	return keepAllowed(ctx, s.g, auth.DescribeResourceGroup, us, func(u quota.Usage) auth.Resource { return resourceGroupResource(u.ID) })
}
