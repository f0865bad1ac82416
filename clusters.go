package dlc

import (
	"context"
	"slices"

	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/internal/platform"
)

// Clusters returns the client's compute clusters.
func (c *Client) Clusters() *ClusterService {
	return &ClusterService{c.e.Clusters(), c.gate(), c}
}

// ClusterService is the compute clusters of a Client (C1–C16).
type ClusterService struct {
	s *platform.ClusterService
	g gate
	c *Client
}

// Create validates spec, checks that its cluster groups (C2) and resource
// group (C4) exist, claims its name, and stores the cluster. It starts in
// state creating and becomes created once Ray has it (suspended); call
// Start to run it. A group whose delete is in progress is refused (C2);
// if one of its groups is deleted, or its delete begins, while the
// cluster is being created (through any client), the create is undone
// (the cluster is deleted again, saying why) and fails C2 (see
// group.Deletion). With a RequestID in opts (at most one options value),
// a retry after a lost reply returns the cluster the first attempt stored.
func (s *ClusterService) Create(ctx context.Context, spec *cluster.Spec, opts ...ClusterCreateOptions) (*cluster.Cluster, error) {
	o, err := oneOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := s.mayCreate(ctx, spec); err != nil {
		return nil, err
	}
	cl, err := s.s.Create(ctx, spec, o)
	// A replay of another user's request id returns their cluster only to
	// one who may describe it.
	return replayed(ctx, auth.KindCluster, o.RequestID, cl, err, clusterCreator)
}

// Get returns the cluster with this id.
func (s *ClusterService) Get(ctx context.Context, id string) (*cluster.Cluster, error) {
	return s.c.clusters().may(ctx, auth.DescribeCluster, id)
}

// Wait waits until cond holds for the cluster and returns it as cond last
// saw it: cond is called with the cluster as it is now, then at each
// change this client sees (changes it did not see in time are merged: it
// sees the latest), until it reports done or fails. Wait fails when ctx
// is done (wrapping ctx's error and saying the state it last saw), when
// the cluster is deleted (ErrNotFound), or when the client closes
// (ErrUnavailable). cluster.InState makes the usual condition:
//
//	cl, err := c.Clusters().Wait(ctx, id, cluster.InState(cluster.Created))
func (s *ClusterService) Wait(ctx context.Context, id string, cond func(*cluster.Cluster) (bool, error)) (*cluster.Cluster, error) {
	if err := s.c.clusters().check(ctx, auth.DescribeCluster, id); err != nil {
		return nil, err
	}
	return s.s.Wait(ctx, id, cond)
}

// Watch tells of every change of the selected clusters, as this client's
// cache sees them (the store's watch), on the channel it returns, until
// ctx is done or the client closes, and then closes the channel. A slow
// reader misses nothing: the changes it has not read are merged per
// cluster, and it reads each cluster as it last is.
func (s *ClusterService) Watch(ctx context.Context, opts ClusterWatchOptions) (<-chan ClusterEvent, error) {
	in, err := s.s.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watchAllowed(ctx, s.g, auth.DescribeCluster, auth.KindCluster, in, func(e ClusterEvent) string { return e.ID },
		func(e ClusterEvent) (auth.Resource, bool) {
			if e.Cluster == nil {
				return auth.Resource{}, false
			}
			return clusterResource(e.Cluster), true
		},
		func(id string) ClusterEvent { return ClusterEvent{Type: Deleted, ID: id} }), nil
}

// ListPage returns one page of the clusters opts selects (by state,
// creator, resource group, cluster group, standing or on-demand, created
// after), by id: at most opts.Limit, and Continue, the token of the next
// page. It reads the client's cache and copies only the page.
func (s *ClusterService) ListPage(ctx context.Context, opts ClusterListOptions) (*ClusterPage, error) {
	return filteredPage(ctx, s.g, auth.DescribeCluster, clusterResource, func(keep func(*cluster.Cluster) bool) (*ClusterPage, error) {
		return s.s.ListPage(ctx, opts, keep)
	})
}

// List returns every cluster, on-demand ones included (Temporary), or
// those the options select (their Limit and Continue are ListPage's), by
// id.
func (s *ClusterService) List(ctx context.Context, opts ...ClusterListOptions) ([]*cluster.Cluster, error) {
	o, err := oneOptions(opts)
	if err != nil {
		return nil, err
	}
	o.Limit, o.Continue = 0, ""
	p, err := s.ListPage(ctx, o)
	if err != nil {
		return nil, err
	}
	return p.Items, nil
}

// Events returns a cluster's operation and event log (C13), oldest first;
// a system entry repeated is one entry, counted (event.Event.Count).
func (s *ClusterService) Events(ctx context.Context, id string) ([]event.Event, error) {
	if err := s.c.clusters().check(ctx, auth.DescribeCluster, id); err != nil {
		return nil, err
	}
	return s.s.Events(ctx, id)
}

// Start starts a created, hibernated or abnormal cluster (C11): it
// reserves the head (twice with high availability) and the workers'
// minimum in the resource group, or fails with ErrQuota and changes
// nothing. The cluster is starting until Ray reports it running.
func (s *ClusterService) Start(ctx context.Context, id string) (*cluster.Cluster, error) {
	if err := s.c.clusters().check(ctx, auth.StartCluster, id); err != nil {
		return nil, err
	}
	return s.s.Start(ctx, id)
}

// Hibernate releases a running or abnormal cluster's compute and keeps
// its configuration and storage (C11). Active runs on it refuse the
// hibernate unless opts.Force, which stops them.
func (s *ClusterService) Hibernate(ctx context.Context, id string, opts HibernateOptions) (*cluster.Cluster, error) {
	if err := s.c.clusters().check(ctx, auth.HibernateCluster, id); err != nil {
		return nil, err
	}
	return s.s.Hibernate(ctx, id, opts)
}

// Delete deletes a cluster and releases everything attached (C11); it is
// irreversible. Active runs on it refuse the delete unless opts.Force,
// which stops them; Force also deletes in a transitional state. Runs
// still waiting for this cluster fail, saying it was deleted. The cluster
// is deleting until Ray has released it, then it is gone.
func (s *ClusterService) Delete(ctx context.Context, id string, opts DeleteOptions) error {
	if err := s.c.clusters().check(ctx, auth.DeleteCluster, id); err != nil {
		return err
	}
	return s.s.Delete(ctx, id, opts)
}

// Clone copies a cluster's spec, in any state, into a new cluster called
// newName (C11); the copy starts as a new cluster does.
func (s *ClusterService) Clone(ctx context.Context, id, newName string) (*cluster.Cluster, error) {
	if s.g.on() {
		src, err := s.c.clusters().may(ctx, auth.DescribeCluster, id)
		if err != nil {
			return nil, err
		}
		if err := s.mayCreate(ctx, &src.Spec); err != nil {
			return nil, err
		}
	}
	return s.s.Clone(ctx, id, newName)
}

// Update replaces the spec of in.ID with in.Spec (C11). in.Version must be
// the version read: a stale edit is a conflict. On a running or abnormal
// cluster, worker instance ranges and metadata apply at once (the
// reservation follows, or ErrQuota changes nothing); the rest is listed
// in NeedsRestart and applies at the next start. A group the edit puts the
// cluster into that is deleted, or whose delete begins, meanwhile is
// taken out again: the edit then fails C2 naming it, the rest of the edit
// saved (see group.Deletion).
func (s *ClusterService) Update(ctx context.Context, in *cluster.Cluster) (*EditResult, error) {
	if err := s.mayUpdate(ctx, in); err != nil {
		return nil, err
	}
	return s.s.Update(ctx, in)
}

// Autoscale is what Ray's autoscaler asks for: replicas workers in the
// running cluster's worker group (C14). The count is kept within the
// group's instance range, and a scale-up is granted only as far as the
// resource group can still allocate; the result says when quota refused
// part of it, and the cluster's log records it.
func (s *ClusterService) Autoscale(ctx context.Context, clusterID, group string, replicas int) (AutoscaleResult, error) {
	if err := s.c.clusters().check(ctx, auth.UpdateCluster, clusterID); err != nil {
		return AutoscaleResult{}, err
	}
	return s.s.Autoscale(ctx, clusterID, group, replicas)
}

// Details returns the details page of a cluster (C13): basic info, its
// reservation, job history, operation and event log, pods, and the Ray
// dashboard while running.
func (s *ClusterService) Details(ctx context.Context, id string) (*cluster.Details, error) {
	if err := s.c.clusters().check(ctx, auth.DescribeCluster, id); err != nil {
		return nil, err
	}
	d, err := s.s.Details(ctx, id)
	if err != nil || !s.g.on() {
		return d, err
	}
	// The runs of its history the user may describe only: a cluster may
	// run other users' jobs, whose commands are theirs.
	d.History, err = keepAllowed(ctx, s.g, auth.DescribeRun, d.History, func(h cluster.HistoryEntry) auth.Resource {
		return s.c.runs().resourceOf(ctx, h.RunID)
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// PlanCreate says what Create(spec) would do, writing nothing: every
// problem Create would report, the cluster as it would be stored, what
// the backend would write for it (on Kubernetes the suspended RayCluster,
// checked by KubeRay's own validation) and what its start will reserve
// beside its resource group's capacity. The planned cluster's id is
// "cls-planned"; a real create makes a new one.
func (s *ClusterService) PlanCreate(ctx context.Context, spec *cluster.Spec) (*Plan, error) {
	if err := s.mayCreate(ctx, spec); err != nil {
		return nil, err
	}
	return s.s.PlanCreate(ctx, spec)
}

// PlanStart says what Start(id) would do, writing nothing: the state
// check, the cluster as the start would write it, what the backend would
// apply, and the reservation with the resource group before and after.
// When Quota.Fits is false, Start would be ErrQuota.
func (s *ClusterService) PlanStart(ctx context.Context, id string) (*Plan, error) {
	if err := s.c.clusters().check(ctx, auth.StartCluster, id); err != nil {
		return nil, err
	}
	return s.s.PlanStart(ctx, id)
}

// PlanUpdate says what Update(in) would do, writing nothing: Update's
// checks and every problem of the spec, the cluster as the edit would
// write it, which settings apply now and which at the next start (in
// Notes), and, for a running cluster, what the backend would apply and
// the reservation before and after.
func (s *ClusterService) PlanUpdate(ctx context.Context, in *cluster.Cluster) (*Plan, error) {
	if err := s.mayUpdate(ctx, in); err != nil {
		return nil, err
	}
	return s.s.PlanUpdate(ctx, in)
}

// mayUpdate asks UpdateCluster of the cluster as stored and as it would
// become (an edit may not carry a cluster out of the user's reach, or
// into another's).
func (s *ClusterService) mayUpdate(ctx context.Context, in *cluster.Cluster) error {
	if !s.g.on() || in == nil {
		return nil
	}
	cur, err := s.c.clusters().may(ctx, auth.UpdateCluster, in.ID)
	if err != nil {
		return err
	}
	next := clusterResource(in)
	next.Creator = cur.Creator // the creator is not the caller's to set
	if err := s.g.allow(ctx, auth.UpdateCluster, next); err != nil {
		return err
	}
	var rg string
	if in.Spec.ResourceGroup != cur.Spec.ResourceGroup {
		rg = in.Spec.ResourceGroup
	}
	var moved []string
	for _, g := range in.Spec.Groups {
		if !slices.Contains(cur.Spec.Groups, g) {
			moved = append(moved, g)
		}
	}
	for _, g := range cur.Spec.Groups {
		if !slices.Contains(in.Spec.Groups, g) {
			moved = append(moved, g)
		}
	}
	return s.mayDrawOn(ctx, rg, moved)
}

// mayCreate asks CreateCluster of the cluster spec would make, and what it
// draws on (mayDrawOn).
func (s *ClusterService) mayCreate(ctx context.Context, spec *cluster.Spec) error {
	if !s.g.on() || spec == nil {
		return nil
	}
	if err := s.g.allow(ctx, auth.CreateCluster, newClusterResource(ctx, spec)); err != nil {
		return err
	}
	return s.mayDrawOn(ctx, spec.ResourceGroup, spec.Groups)
}

// mayDrawOn asks UseResourceGroup of resource group rg ("": none) and
// UpdateGroup of each cluster group a cluster joins or leaves: a
// cluster's own tags are its author's choice, and cannot be what keeps it
// off another team's quota, Secrets and group. A group that does not
// exist is left to the operation to report.
func (s *ClusterService) mayDrawOn(ctx context.Context, rg string, groups []string) error {
	if rg != "" {
		if err := s.g.allow(ctx, auth.UseResourceGroup, resourceGroupResource(rg)); err != nil {
			return err
		}
	}
	for _, id := range groups {
		_, err := s.c.groups().may(ctx, auth.UpdateGroup, id)
		if err != nil && !errs.IsNotFound(err) {
			return err
		}
	}
	return nil
}
