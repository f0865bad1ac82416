package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// ClusterService is the compute clusters of an Engine (C1–C16).
type ClusterService struct{ c *Engine }

// Clusters returns the client's compute clusters.
func (c *Engine) Clusters() *ClusterService { return c.clusters }

// Labels of stored clusters.
const (
	labelState         = "state"
	labelTemporary     = "temporary"
	labelResourceGroup = "quota"  // the resource group of its reservation
	labelMemberOf      = "group." // + group id, value "1"
	// labelGrowth is "1" on a running cluster whose request to grow waits
	// in its resource group's queue (cluster.Growth); the cluster's
	// priority is then under labelPriority, as an on-demand run's.
	labelGrowth = "growth"
	// labelHeadroom is, on a running cluster with an autoscaling worker
	// group, "lent" while its ceilings may stand above what Ray's
	// autoscaler runs, "yielded" while some gave their headroom back to
	// the queue (cluster.Yielded).
	labelHeadroom = "headroom"
)

func clusterLabels(cl *cluster.Cluster) map[string]string {
	l := map[string]string{labelState: string(cl.State)}
	if cl.QuotaGroup != "" {
		l[labelResourceGroup] = cl.QuotaGroup
	}
	if cl.Temporary {
		l[labelTemporary] = "1"
	}
	for _, g := range cl.Spec.Groups {
		l[labelMemberOf+g] = "1"
	}
	if cl.State == cluster.Running && cl.Live != nil && cl.QuotaGroup != "" {
		if cl.Growth != nil {
			l[labelGrowth] = "1"
			l[labelPriority] = strconv.Itoa(cl.Spec.EffectivePriority())
		}
		switch {
		case len(cl.Yielded) > 0:
			l[labelHeadroom] = headroomYielded
		case slices.ContainsFunc(cl.Live.Workers, func(w cluster.WorkerGroup) bool { return w.Instances.Autoscaling() }):
			l[labelHeadroom] = headroomLent
		}
	}
	return l
}

// The values of labelHeadroom.
const (
	headroomLent    = "lent"
	headroomYielded = "yielded"
)

// Create validates spec, checks that its cluster groups (C2) and resource
// group (C4) exist, claims its name, and stores the cluster. It starts in
// state creating and becomes created once Ray has it (suspended); call
// Start to run it.
// With opts.RequestID, the id derives from it: a cluster stored under it
// already is returned as it is.
func (s *ClusterService) Create(ctx context.Context, spec *cluster.Spec, opts cluster.CreateOptions) (*cluster.Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if spec == nil {
		return nil, nilInput("spec", "a cluster spec")
	}
	id := newID("cls")
	if opts.RequestID != "" {
		id = idFor("cls", opts.RequestID)
		// Decided on the store: this client's cache may not have the
		// earlier attempt's cluster yet, or its delete.
		cl, v, err := fresh[cluster.Cluster](ctx, s.c.acc, kindCluster, id)
		switch {
		case err == nil && cl.State == cluster.Deleting:
			// Made by an earlier attempt that was undone (its name or a
			// group refused it), or deleted since: not a success to repeat.
			return nil, errs.Conflict("cluster", id, "the cluster this request made is being deleted; use another request id")
		case err == nil:
			cl.Version = v
			return cl, nil // made by an earlier attempt
		case !errs.IsNotFound(err):
			return nil, err
		}
	}
	return s.createCluster(ctx, spec.DeepCopy(), id, "create", "cluster "+spec.Name+" created")
}

func (s *ClusterService) createCluster(ctx context.Context, spec *cluster.Spec, id, action, msg string) (*cluster.Cluster, error) {
	c := s.c
	cl, err := c.clusters.newCluster(ctx, spec, id)
	if err != nil {
		return nil, err
	}
	cl.Events = event.Append(nil, c.event(ctx, "user", action, msg))
	if err := c.names.nameFree(ctx, kindCluster, spec.Name, cl.ID); err != nil {
		return nil, err
	}
	// The name is claimed while the cluster is stored, and its groups are
	// read for the G6 fence (fenceNewCluster) while it is written: three
	// calls in the time of one. A cluster whose claim fails is undone; one
	// left without its claim by a client that died between the two is
	// found by the cluster reconciler (checkNameClaim).
	began := time.Now() // real time, not c.clock: see joinWindow
	claimed := make(chan error, 1)
	go func() { claimed <- c.names.claimName(ctx, kindCluster, spec.Name, cl.ID) }()
	read := make(chan []error, 1)
	go func() { read <- c.groups.groupsLive(ctx, spec.Groups, "create a cluster in") }()
	v, err := c.acc.create(ctx, kindCluster, cl.ID, clusterLabels(cl), cl)
	done := time.Now()
	var early []error // nil: read again after the write
	if err == nil {
		early = <-read
		if !withinJoinWindow(began, done) {
			early = nil
		}
	}
	cerr := <-claimed
	if err != nil {
		got, gerr := c.clusters.getFresh(ctx, cl.ID)
		if gerr != nil {
			if errs.IsNotFound(gerr) && cerr == nil {
				c.names.releaseName(ctx, kindCluster, spec.Name, cl.ID)
			}
			return nil, err
		}
		if got.Spec.Name != spec.Name || got.Creator != cl.Creator {
			// Another request's cluster under this id (made meanwhile
			// with the same request id), not this create's lost reply:
			// the name this create claimed for the id is not that
			// cluster's, and is given back.
			if cerr == nil && got.Spec.Name != spec.Name {
				c.names.releaseName(ctx, kindCluster, spec.Name, cl.ID)
			}
			return nil, errs.Conflict("cluster", cl.ID, "another request with this request id made it meanwhile; use another request id")
		}
		cl = got // created, though the reply was lost
	} else {
		cl.Version = v
	}
	if cerr != nil {
		if uerr := c.clusters.undoCreate(ctx, cl.ID, "its name could not be claimed: "+cerr.Error()); uerr != nil {
			return nil, errors.Join(cerr, uerr) // and the cluster reconciler claims the name or undoes it (checkNameClaim)
		}
		return nil, cerr
	}
	if err := s.fenceNewCluster(ctx, cl, early); err != nil {
		return nil, err
	}
	return cl, nil
}

// newCluster checks spec as a create does and returns the cluster it
// would store under id, writing nothing.
func (s *ClusterService) newCluster(ctx context.Context, spec *cluster.Spec, id string) (*cluster.Cluster, error) {
	c := s.c
	if spec.Priority == nil {
		spec.Priority = new(cluster.DefaultPriority)
	}
	if err := c.clusters.checkClusterSpec(ctx, spec, nil); err != nil {
		return nil, err
	}
	now := c.clock.Now()
	cl := &cluster.Cluster{ID: id, Spec: *spec, Generation: 1, Creator: UserFrom(ctx), CreatedAt: now, UpdatedAt: now}
	if _, _, err := advanceCluster(cl, cluster.Create); err != nil {
		return nil, err
	}
	return cl, nil
}

// fenceNewCluster is the create side of a group's fenced delete
// (fences.go) for a cluster just stored: each of its groups is read again
// from the store (groupLive), and if one was deleted, or began to be,
// meanwhile, the create is undone (the cluster is deleted, as a forced
// delete does, saying why) and fails as a create into a missing group
// does (C2). A read that fails undoes it too: the caller gets an error.
// early holds the reads made beside the cluster's write (groupsLive, in
// the order of its groups) when that write returned within joinWindow of
// their start, and nil when they do not count; an early read that failed
// is made again.
func (s *ClusterService) fenceNewCluster(ctx context.Context, cl *cluster.Cluster, early []error) error {
	c := s.c
	if slices.ContainsFunc(early, func(err error) bool {
		return err != nil && !errs.IsNotFound(err) && !errors.Is(err, errs.ErrState)
	}) {
		early = nil
	}
	if early == nil {
		early = c.groups.groupsLive(ctx, cl.Spec.Groups, "create a cluster in")
	}
	var l errs.List
	for i, g := range cl.Spec.Groups {
		if err := early[i]; errs.IsNotFound(err) || errors.Is(err, errs.ErrState) {
			l = append(l, errs.Invalid(errs.NewPath("groups").Index(i), "C2", g, "this cluster group was deleted, or began to be, while the cluster was being created"))
		} else if err != nil {
			if uerr := c.clusters.undoCreate(ctx, cl.ID, "could not check that its groups were not being deleted: "+err.Error()); uerr != nil {
				return errors.Join(err, uerr)
			}
			return err
		}
	}
	if len(l) == 0 {
		return nil
	}
	// An undo that fails is said to the caller, who holds the cluster's
	// id in the error; the cluster's own log says that its group is gone
	// (checkGroups).
	if uerr := c.clusters.undoCreate(ctx, cl.ID, "a group it was created in was deleted meanwhile"); uerr != nil {
		return errors.Join(l.ToError(), uerr)
	}
	return l.ToError()
}

// undoCreate deletes a cluster whose create failed after it was stored,
// as a forced delete does (the cluster reconciler releases its name and
// whatever Ray has of it), saying why in its log. It returns an error
// naming the cluster, stored still, when that fails.
func (s *ClusterService) undoCreate(ctx context.Context, id, why string) error {
	c := s.c
	_, err := retryStale(context.WithoutCancel(ctx), c, id, func(ctx context.Context, cl *cluster.Cluster) (struct{}, error) {
		if cl.State == cluster.Deleting {
			return struct{}{}, nil
		}
		next := cl.DeepCopy()
		if _, _, err := advanceCluster(next, cluster.ForceDelete); err != nil {
			return struct{}{}, err
		}
		next.Generation++
		next.Events = event.Append(next.Events, c.event(ctx, "system", "delete", why))
		return struct{}{}, c.clusters.putCluster(ctx, next, cl.Version)
	})
	if err != nil {
		c.o.log.Error(err, "a cluster whose create failed could not be deleted", "cluster", id)
		return fmt.Errorf("cluster %s was stored and could not be deleted again (%s): %w", id, why, err)
	}
	return nil
}

// getFresh reads a cluster from the store itself.
func (s *ClusterService) getFresh(ctx context.Context, id string) (*cluster.Cluster, error) {
	c := s.c
	cl, v, err := fresh[cluster.Cluster](context.WithoutCancel(ctx), c.acc, kindCluster, id)
	if err != nil {
		return nil, notFoundAs(err, "cluster", id)
	}
	cl.Version = v
	return cl, nil
}

// checkClusterSpec validates a spec and what it refers to. A group the
// cluster joins (one not in was) must not be being deleted.
func (s *ClusterService) checkClusterSpec(ctx context.Context, spec *cluster.Spec, was []string) error {
	c := s.c
	l := spec.Problems(c.cat)
	for i, g := range spec.Groups {
		if g == "" {
			continue
		}
		grp, _, err := cached[group.Group](ctx, c.acc, kindGroup, g)
		switch {
		case errs.IsNotFound(err):
			l = append(l, errs.Invalid(errs.NewPath("groups").Index(i), "C2", g, "no cluster group with this id; create it first"))
		case err != nil:
			return err
		case !slices.Contains(was, g) && c.markHolds(grp.Deleting.At, grp.Deleting.Replica):
			l = append(l, errs.Invalid(errs.NewPath("groups").Index(i), "C2", g, "this cluster group is being deleted; name another"))
		}
	}
	if spec.ResourceGroup != "" {
		a, _, err := cached[quota.Account](ctx, c.acc, kindResourceGroup, spec.ResourceGroup)
		switch {
		case errs.IsNotFound(err):
			l = append(l, errs.Invalid("resourceGroup", "C4", spec.ResourceGroup, "no resource group with this id; register it first"))
		case err != nil:
			return err
		case spec.ResourcePackage != "" && a.Package != spec.ResourcePackage:
			l = append(l, errs.Invalid("resourcePackage", "C4", spec.ResourcePackage,
				fmt.Sprintf("resource group %s belongs to package %s", spec.ResourceGroup, a.Package)))
		case len(l) == 0:
			l = append(l, c.clusters.neverFits(&spec.Environment, "headGroup", "C4", a)...)
		}
	}
	return l.ToError()
}

// neverFits says whether environment env can never start within
// resource group a's whole quota, not only within what is free now: its
// start reserves the head (twice with high availability) and each worker
// group's minimum. The problem is reported at path under rule. An
// autoscaling maximum beyond the whole quota is not refused: quota is the
// autoscaler's ceiling (C14); a plan says it can never be reached.
func (s *ClusterService) neverFits(env *cluster.Environment, path errs.Path, rule string, a *quota.Account) errs.List {
	c := s.c
	least, err := env.MinResources(c.cat.Nodes)
	if err != nil || least.Fits(a.Capacity) {
		return nil // the spec's own problems say why it cannot be sized
	}
	return errs.List{errs.Invalid(path, rule, least.String(),
		fmt.Sprintf("its start reserves %s (the head, twice with high availability, and each worker group's minimum), more than resource group %s's whole quota, %s: it could never start", least, a.ID, a.Capacity))}
}

// Get returns the cluster with this id.
func (s *ClusterService) Get(ctx context.Context, id string) (*cluster.Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.getCluster(ctx, id)
}

func (s *ClusterService) getCluster(ctx context.Context, id string) (*cluster.Cluster, error) {
	c := s.c
	cl, v, err := get[cluster.Cluster](ctx, c.acc, kindCluster, "cluster", id)
	if err != nil {
		return nil, err
	}
	cl.Version = v
	return cl, nil
}

// List returns every cluster, on-demand ones included (Temporary), by id.
func (s *ClusterService) List(ctx context.Context) ([]*cluster.Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := s.ListPage(ctx, cluster.ListOptions{}, nil)
	if err != nil {
		return nil, err
	}
	return p.Items, nil
}

func (s *ClusterService) listClusters(sel map[string]string) ([]*cluster.Cluster, error) {
	c := s.c
	return list(c.acc, kindCluster, sel, func(cl *cluster.Cluster, v string) { cl.Version = v })
}

// Events returns a cluster's operation and event log (C13), oldest first.
func (s *ClusterService) Events(ctx context.Context, id string) ([]event.Event, error) {
	cl, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return cl.Events, nil
}

// Start starts a created, hibernated or abnormal cluster (C11): it
// reserves the head (twice with high availability) and the workers'
// minimum in the resource group, or fails with ErrQuota and changes
// nothing. The cluster is starting until Ray reports it running.
func (s *ClusterService) Start(ctx context.Context, id string) (*cluster.Cluster, error) {
	return retryStale(ctx, s.c, id, s.start)
}

// retryStale runs op on cluster id again when its write lost a race with
// a background step (a conflict on a cluster the caller gave no version
// of), or when the cached cluster's state refused it, reading the cluster
// afresh from the store.
func retryStale[T any](ctx context.Context, c *Engine, id string, op func(context.Context, *cluster.Cluster) (T, error)) (T, error) {
	cl, err := c.clusters.getCluster(ctx, id)
	for attempt := 0; ; attempt++ {
		if err != nil {
			var zero T
			return zero, err
		}
		v, opErr := op(ctx, cl)
		// A refusal for the cluster's state, on the first read (the cache,
		// which may lag a write another replica made), is checked against
		// the store before it is the answer.
		stale := errors.Is(opErr, errs.ErrConflict) || (attempt == 0 && errors.Is(opErr, errs.ErrState))
		if !stale || attempt >= conflictRetries || ctx.Err() != nil {
			return v, opErr
		}
		cl, err = c.clusters.getFresh(ctx, id)
	}
}

func (s *ClusterService) start(ctx context.Context, cl *cluster.Cluster) (*cluster.Cluster, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	next, need, err := c.clusters.started(cl)
	if err != nil {
		return nil, err
	}
	next.Events = event.Append(next.Events, c.event(ctx, "user", "start", "reserving "+need.String()))
	if err := c.clusters.writeWithHold(ctx, next, cl); err != nil {
		return nil, goneGroup(err, next.Live.ResourceGroup)
	}
	return next, nil
}

// goneGroup says that a cluster's resource group is gone (deleted since
// the cluster was created) as the C4 problem of its spec, not as the
// cluster not found; any other error is returned as it is.
func goneGroup(err error, rg string) error {
	var nf *errs.NotFoundError
	if errors.As(err, &nf) && nf.Kind == "resource group" && nf.ID == rg {
		return errs.List{errs.Invalid("resourceGroup", "C4", rg, "no resource group with this id (deleted since the cluster was created); edit the cluster to name another")}.ToError()
	}
	return err
}

// started returns cl as a start would write it, and what the start
// reserves (its head, twice with HA, and its workers' minimum), writing
// nothing.
func (s *ClusterService) started(cl *cluster.Cluster) (*cluster.Cluster, quota.Resources, error) {
	c := s.c
	if err := c.clusters.userOp(cl, cluster.OpStart); err != nil {
		return nil, quota.Resources{}, err
	}
	env := cl.Spec.Environment.DeepCopy()
	replicas := env.MinReplicas()
	need, err := env.ResourcesAt(c.cat.Nodes, replicas)
	if err != nil {
		return nil, quota.Resources{}, err
	}
	next := cl.DeepCopy()
	if _, _, err := advanceCluster(next, cluster.Trigger(cluster.OpStart)); err != nil {
		return nil, quota.Resources{}, err
	}
	next.Reason = ""
	next.Live = &cluster.Live{ResourceGroup: cl.Spec.ResourceGroup, Environment: *env}
	next.Replicas, next.PendingRestart = replicas, nil
	next.Growth, next.Yielded = nil, nil // what its last run asked or gave back is no more
	next.Generation++
	return next, need, nil
}

// heldAfter sets what next, written over prev, keeps draining
// (drainingAfter), and returns what its reservation is to cover: its
// head and, per worker group, its held workers (HeldReplicas).
func (s *ClusterService) heldAfter(prev, next *cluster.Cluster) (quota.Resources, error) {
	next.Draining = drainingAfter(prev, next)
	return next.Live.ResourcesAt(s.c.cat.Nodes, next.HeldReplicas())
}

// drainingAfter returns what next, written over prev, keeps draining: per
// worker group whose ceiling next lowers below what prev held, the
// workers Ray may still run of it (prev's held workers), for Ray applies
// the lower ceiling only after the write. Only for a group next runs
// alike (the same node spec): the workers of one a restart changes are
// held as they were, beside it (holdFor, cluster.Cluster.HeldAlike). None
// when prev held nothing in next's resource group that Ray may run (a
// start, or a start in another group: there the old group's hold stays
// until the write is done).
func drainingAfter(prev, next *cluster.Cluster) map[string]int {
	if prev.Live == nil || next.Live == nil || !prev.State.HoldsQuota() || prev.Live.ResourceGroup != next.Live.ResourceGroup {
		return nil
	}
	held := prev.HeldReplicas()
	var out map[string]int
	for _, w := range prev.Live.Workers {
		n, was := held[w.Name]
		if cur, ok := next.Replicas[w.Name]; was && ok && n > cur && next.Live.RunsAlike(w) {
			if out == nil {
				out = map[string]int{}
			}
			out[w.Name] = n
		}
	}
	return out
}

// writeWithHold reserves what next holds (heldAfter) in its live resource
// group, then writes next over prev's version: reserve first, act second.
// The hold is made for next's generation, which fences it against
// decisions taken from an older one. A write that did not happen (a
// conflict, or a lost reply that reading back shows was not written)
// leaves the hold as the stored cluster needs it; a failure that cannot
// be told is left to the repair reconciler.
func (s *ClusterService) writeWithHold(ctx context.Context, next, prev *cluster.Cluster) error {
	c := s.c
	need, err := s.heldAfter(prev, next)
	if err != nil {
		return err
	}
	rg := next.Live.ResourceGroup
	moved := prev.Live != nil && prev.Live.ResourceGroup != rg
	sole := false // the hold is this operation's alone
	a, err := c.ledger.changeAccount(ctx, rg, func(a *quota.Account) (bool, error) {
		if pkg := next.Spec.ResourcePackage; pkg != "" && a.Package != pkg {
			// The group was deleted and registered again in another
			// package since the cluster was created (C4 held then).
			return false, errs.List{errs.Invalid("resourcePackage", "C4", pkg,
				fmt.Sprintf("resource group %s belongs to package %s now; edit the cluster to name it, or another group", rg, a.Package))}.ToError()
		}
		now := c.clock.Now()
		h, had := a.Hold(next.ID)
		sole = !had || h.Generation < next.Generation
		hold, gen := s.holdAfter(a, prev, next, need)
		changed, err := a.SetFor(next.ID, hold, gen, now)
		if err == nil && !changed {
			// Made for this generation already, by an earlier try of this
			// change or by another operation that read the same version
			// of the cluster: renewed, which changes the account, so that
			// neither takes the hold for its own alone, and the repair
			// does not take it for a leak under this try.
			changed = a.Renew(next.ID, now)
		}
		sole = sole && changed
		return changed, err
	})
	if err != nil {
		return err
	}
	// The account as this reservation left it: while it is unchanged, no
	// other operation has reserved or renewed since, and a sole hold is
	// this operation's to release.
	var mine string
	if sole {
		mine = a.Version
	}
	err = c.clusters.putCluster(ctx, next, prev.Version)
	if err != nil && !errors.Is(err, errs.ErrConflict) && !errs.IsNotFound(err) {
		version, written, werr := c.clusters.wrote(ctx, kindCluster, next.ID, next)
		switch {
		case werr != nil:
			return err // cannot tell: the repair reconciler releases it if unjustified
		case written:
			next.Version, err = version, nil
		}
	}
	if err != nil {
		c.clusters.holdAsStored(context.WithoutCancel(ctx), rg, next.ID, next.Generation, mine)
		return err
	}
	if moved {
		// Release last: the old group's hold goes once the new one is written.
		if _, err := c.ledger.changeAccount(context.WithoutCancel(ctx), prev.Live.ResourceGroup, func(a *quota.Account) (bool, error) {
			return a.ReleaseUpTo(next.ID, next.Generation), nil
		}); err != nil {
			c.o.log.Error(err, "releasing the old resource group's reservation failed; the repair reconciler will", "cluster", next.ID, "resourceGroup", prev.Live.ResourceGroup)
		}
	}
	return nil
}

// holdAfter is the hold (and its generation) that writing next over prev
// reserves in account a, next's head and held workers taking need
// (heldAfter): holdFor, with what a holds for the cluster, and what prev
// held of the groups next runs alike (cluster.Cluster.HeldAlike).
func (s *ClusterService) holdAfter(a *quota.Account, prev, next *cluster.Cluster, need quota.Resources) (quota.Resources, int64) {
	moved := prev.Live != nil && prev.Live.ResourceGroup != next.Live.ResourceGroup
	var cur *quota.Hold
	if h, ok := a.Hold(next.ID); ok {
		cur = &h
	}
	alike, err := prev.HeldAlike(s.c.cat.Nodes, &next.Live.Environment)
	return holdFor(need, next.Generation, cur, !moved && prev.State.HoldsQuota(), alike, err == nil && prev.Live != nil)
}

// holdFor is the hold (and its generation) an operation reserves for a
// cluster it writes at generation gen, whose head and held workers take
// need. h is the hold the account has for it (nil: none); carry says
// that the cluster held quota in this group before the write (not a
// start from nothing, nor a move to another group), so that Ray may still
// run what h covers; prevNeed is what the cluster held before it of the
// groups the write keeps alike (known false when it cannot be told).
//
// Carried, a hold made for an older generation is never lowered (Ray may
// run the old size until it reports the new one: a shrink gives its quota
// back then, trueUpHold; per worker group that is the write's Draining,
// in need), and what it covers beyond prevNeed (the groups a restart
// removes or changes, which KubeRay leaves running, pods beyond a group's
// ceiling: the true-up reserved them, cluster.Cluster.MayRun) Ray may
// still run beside what the write adds: it is kept on top of need, not
// taken for part of it. Unknown prevNeed falls back to the larger of need
// and h.
//
// A hold made for gen or a newer one is another operation's (it read the
// cluster as this one did, or since: prev may be stale), or an earlier
// try of this one's: its write may land instead of this one's, so the
// hold covers both, and is never lowered here, nor its generation.
func holdFor(need quota.Resources, gen int64, h *quota.Hold, carry bool, prevNeed quota.Resources, known bool) (quota.Resources, int64) {
	switch {
	case h == nil:
		return need, gen
	case h.Generation >= gen:
		return need.Max(h.Resources), h.Generation
	case carry && known:
		return need.Add(h.Resources.Sub(prevNeed).Max(quota.Resources{})).Max(h.Resources), gen
	case carry:
		return need.Max(h.Resources), gen
	}
	return need, gen
}

// holdAsStored makes cluster id's hold in rg what the stored cluster
// needs, after a write of generation gen that did not happen; a hold made
// since for a newer generation is left alone. It never goes below what
// Ray runs of the cluster (a shrink written and not applied yet), and is
// not lowered when Ray cannot tell. mine is the version of the
// account that the failed operation's reservation wrote, when the hold
// was its alone (none was made for its generation before), else "".
//
// The stored cluster is read before the account is changed, so the
// decision may be stale by the time it lands. That is harmless for a hold
// made for the stored generation or an older one: every operation that
// writes the cluster later reserves for a newer generation first, which
// changes the account, and the compare-and-swap below looks again. It is
// not for a hold made for a newer generation than the stored one: another
// operation may have reserved for that same generation (two Starts of one
// cluster both reserve for its generation + 1) and its write may still
// land, after this read. Such a hold is changed only when it is the
// failed operation's alone (the account is still at mine: nobody reserved
// or renewed since, and nobody had before), or once its generation is
// fenced off (fenceOff): after the fence no write prepared for it can
// land, and no later operation reserves for it.
func (s *ClusterService) holdAsStored(ctx context.Context, rg, id string, gen int64, mine string) {
	c := s.c
	for attempt := 0; ; attempt++ {
		cl, err := c.clusters.getFresh(ctx, id)
		if err != nil && !errs.IsNotFound(err) {
			c.o.log.Error(err, "reading a cluster back to fix its reservation failed; the repair reconciler will", "cluster", id, "resourceGroup", rg)
			return
		}
		var need quota.Resources
		var storedGen int64
		keep := false // what Ray runs is not known: the hold is not lowered
		if err == nil {
			storedGen = cl.Generation
			if cl.Live != nil && cl.State.HoldsQuota() && cl.QuotaGroup == rg {
				// Ray may still run more than the stored cluster's ceilings
				// (a shrink written and not yet applied, pods of a group it
				// no longer has): the hold keeps covering what it may run
				// (MayRun), as a shrink's quota is given back only once Ray
				// runs the smaller size (trueUpHold).
				var pods []cluster.Pod
				switch obs, rerr := c.ray.ClusterStatus(ctx, id); {
				case rerr == nil:
					pods = obs.Pods
				case !errs.IsNotFound(rerr):
					keep = true
					c.enqueue(kindCluster + "/" + id) // its reconcile trues the hold up once Ray answers
				}
				if need, err = cl.MayRun(c.cat.Nodes, pods); err != nil {
					c.o.log.Error(err, "sizing a cluster's reservation failed", "cluster", id)
					return
				}
			}
		}
		var fence quota.Hold // a hold of a newer generation than the stored one, to fence off first
		if _, err := c.ledger.changeAccount(ctx, rg, func(a *quota.Account) (bool, error) {
			fence = quota.Hold{}
			h, ok := a.Hold(id)
			switch {
			case !ok || h.Generation > gen:
				return false, nil
			case cl != nil && h.Generation > storedGen && (mine == "" || a.Version != mine):
				fence = h
				return false, nil
			case need.IsZero():
				return a.ReleaseUpTo(id, gen), nil
			case keep:
				return a.SetFor(id, need.Max(h.Resources), storedGen, c.clock.Now())
			}
			return a.SetFor(id, need, storedGen, c.clock.Now())
		}); err != nil {
			c.o.log.Error(err, "putting a reservation back failed; the repair reconciler will", "cluster", id, "resourceGroup", rg)
			return
		}
		if fence.Generation == 0 {
			return
		}
		if attempt >= conflictRetries {
			c.o.log.Info("the cluster keeps changing; the repair reconciler will put its reservation right", "cluster", id, "resourceGroup", rg)
			return
		}
		if _, err := c.clusters.fenceOff(ctx, cl, fence.Generation, "generation-fenced", fmt.Sprintf(
			"a write of generation %d did not happen and another may share its reservation of %s in resource group %s: generation %d is fenced off, and the reservation put as the cluster needs",
			gen, fence.Resources, rg, fence.Generation)); err != nil {
			c.o.log.Error(err, "fencing off a write that did not happen failed; the repair reconciler will", "cluster", id, "resourceGroup", rg)
			return
		}
		// Fenced, or the cluster changed since it was read: look again.
	}
}

// fenceOff fences off every write of cluster cl made for generation gen
// or an older one that has not landed yet: it writes cl, at the version
// read, with its generation moved up to gen and an event saying why. A
// write prepared from an older version then conflicts (its operation
// reads the cluster again, and reserves anew for a newer generation), and
// every later operation reserves for a generation above gen: a hold made
// for gen or an older one belongs to no write that can still land, and
// may be released or lowered by compare-and-swap on its resource group,
// without a clock and without a token. ok is false when the cluster
// changed, or went, since it was read: the caller looks again.
func (s *ClusterService) fenceOff(ctx context.Context, cl *cluster.Cluster, gen int64, action, msg string) (ok bool, err error) {
	c := s.c
	next := cl.DeepCopy()
	next.Generation = max(next.Generation, gen)
	next.Events = event.Append(next.Events, c.event(ctx, "system", action, msg))
	switch err := c.clusters.putCluster(ctx, next, cl.Version); {
	case errors.Is(err, errs.ErrConflict), errs.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// wrote reports whether the store holds exactly v as kind/id, and at
// which version: whether a write whose reply was lost happened.
func (s *ClusterService) wrote(ctx context.Context, kind, id string, v any) (version string, written bool, err error) {
	c := s.c
	d, err := c.store.Get(context.WithoutCancel(ctx), kind, id)
	if errs.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	want, err := json.Marshal(v)
	if err != nil {
		return "", false, err
	}
	return d.Version, string(d.Data) == string(want), nil
}

// Hibernate releases a running or abnormal cluster's compute and keeps
// its configuration and storage (C11). Active runs on it refuse the
// hibernate unless opts.Force, which stops them.
func (s *ClusterService) Hibernate(ctx context.Context, id string, opts cluster.DeleteOptions) (*cluster.Cluster, error) {
	return retryStale(ctx, s.c, id, func(ctx context.Context, cl *cluster.Cluster) (*cluster.Cluster, error) {
		return s.hibernate(ctx, cl, opts)
	})
}

func (s *ClusterService) hibernate(ctx context.Context, cl *cluster.Cluster, opts cluster.DeleteOptions) (*cluster.Cluster, error) {
	return s.hibernateAs(ctx, cl, opts, "user", "")
}

// hibernateAs is hibernate, logged as source's with msg (the platform
// hibernates an idle cluster as "system").
func (s *ClusterService) hibernateAs(ctx context.Context, cl *cluster.Cluster, opts cluster.DeleteOptions, source, msg string) (*cluster.Cluster, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := c.clusters.userOp(cl, cluster.OpHibernate); err != nil {
		return nil, err
	}
	cl, err := s.stopActiveRuns(ctx, cl, cluster.OpHibernate, opts.Force)
	if err != nil {
		return nil, err
	}
	next := cl.DeepCopy()
	next.Unmark()
	if _, _, err := advanceCluster(next, cluster.Trigger(cluster.OpHibernate)); err != nil {
		return nil, err
	}
	next.Generation++
	next.Events = event.Append(next.Events, c.event(ctx, source, "hibernate", msg))
	if err := c.clusters.putCluster(ctx, next, cl.Version); err != nil {
		return nil, err
	}
	return next, nil
}

// Delete deletes a cluster and releases everything attached (C11); it is
// irreversible. Active runs on it refuse the delete unless opts.Force,
// which stops them; Force also deletes in a transitional state. Runs
// still waiting for this cluster fail, saying it was deleted. The cluster
// is deleting until Ray has released it, then it is gone.
func (s *ClusterService) Delete(ctx context.Context, id string, opts cluster.DeleteOptions) error {
	_, err := retryStale(ctx, s.c, id, func(ctx context.Context, cl *cluster.Cluster) (struct{}, error) {
		return struct{}{}, s.delete(ctx, cl, opts)
	})
	return err
}

func (s *ClusterService) delete(ctx context.Context, cl *cluster.Cluster, opts cluster.DeleteOptions) error {
	c := s.c
	if err := ctx.Err(); err != nil {
		return err
	}
	t := cluster.Trigger(cluster.OpDelete)
	if opts.Force {
		t = cluster.ForceDelete
	} else if err := c.clusters.userOp(cl, cluster.OpDelete); err != nil {
		return err
	}
	if _, _, err := cluster.Transition(cl.ID, cl.State, t); err != nil {
		return err // refused before the mark
	}
	cl, err := s.stopActiveRuns(ctx, cl, cluster.OpDelete, opts.Force)
	if err != nil {
		return err
	}
	if cl.State == cluster.Deleting {
		return nil
	}
	next := cl.DeepCopy()
	next.Unmark()
	if _, _, err := advanceCluster(next, t); err != nil {
		return err
	}
	next.Generation++
	action := "delete"
	if opts.Force {
		action = "force-delete"
	}
	next.Events = event.Append(next.Events, c.event(ctx, "user", action, ""))
	return c.clusters.putCluster(ctx, next, cl.Version)
}

// Clone copies a cluster's spec, in any state, into a new cluster called
// newName (C11); the copy starts as a new cluster does.
func (s *ClusterService) Clone(ctx context.Context, id, newName string) (*cluster.Cluster, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl, err := c.clusters.getCluster(ctx, id)
	if err != nil {
		return nil, err
	}
	if newName == "" || newName == cl.Spec.Name {
		return nil, errs.List{errs.Required("name", "C11", "a clone needs a new name")}.ToError()
	}
	spec := cl.Spec.DeepCopy()
	spec.Name = newName
	return s.createCluster(ctx, spec, newID("cls"), "clone", "cloned from "+id)
}

// Edit replaces the spec of in.ID with in.Spec (C11). in.Version must be
// the version read: a stale edit is a conflict. On a running or abnormal
// cluster, worker instance ranges and metadata apply at once (the
// reservation follows, or ErrQuota changes nothing); the rest is listed
// in NeedsRestart and applies at the next start.
func (s *ClusterService) Update(ctx context.Context, in *cluster.Cluster) (*cluster.EditResult, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if in == nil {
		return nil, nilInput("cluster", "the cluster to update, as read")
	}
	e, err := c.clusters.edited(ctx, in)
	if err != nil {
		return nil, err
	}
	cur, next, spec, live, restart := e.cur, e.next, &e.next.Spec, e.live, e.restart
	renamed := spec.Name != cur.Spec.Name
	if renamed {
		if err := c.names.claimName(ctx, kindCluster, spec.Name, cur.ID); err != nil {
			return nil, err
		}
	}
	var werr error
	if cur.Live == nil {
		next.Events = event.Append(next.Events, c.event(ctx, "user", "edit", strings.Join(live, ", ")))
		werr = c.clusters.putCluster(ctx, next, cur.Version)
		if werr != nil && !errors.Is(werr, errs.ErrConflict) && !errs.IsNotFound(werr) {
			// A lost reply: if the edit was written, it is done.
			version, written, err := c.clusters.wrote(ctx, kindCluster, next.ID, next)
			if err != nil {
				return nil, werr // cannot tell: a stale name claim is taken over after the grace
			}
			if written {
				next.Version, werr = version, nil
			}
		}
	} else {
		next.Events = event.Append(next.Events, c.event(ctx, "user", "edit", strings.Join(append(live, restart...), ", ")))
		werr = c.clusters.writeWithHold(ctx, next, cur)
	}
	if werr != nil {
		if renamed {
			if stored, err := c.clusters.getFresh(ctx, cur.ID); err == nil && stored.Spec.Name != spec.Name {
				c.names.releaseName(ctx, kindCluster, spec.Name, cur.ID)
			}
		}
		return nil, werr
	}
	if renamed {
		c.names.releaseName(ctx, kindCluster, cur.Spec.Name, cur.ID)
	}
	if err := s.fenceJoins(ctx, cur.ID, cur.Spec.Groups, spec.Groups); err != nil {
		return nil, err
	}
	return &cluster.EditResult{Cluster: next, Applied: live, NeedsRestart: restart}, nil
}

// edit is what an edit of a cluster would write, found without writing.
type edit struct {
	cur, next     *cluster.Cluster
	need          quota.Resources // what next holds, when it is live
	live, restart []string        // the settings that apply now, and at the next start
}

// edited checks edit in as Edit does (its version, the state, the spec)
// and returns what it would write.
func (s *ClusterService) edited(ctx context.Context, in *cluster.Cluster) (*edit, error) {
	c := s.c
	cur, err := c.clusters.getCluster(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if in.Version != cur.Version {
		return nil, errs.Conflict("cluster", in.ID, "stale version: read it again")
	}
	if err := c.clusters.userOp(cur, cluster.OpEdit); err != nil {
		return nil, err
	}
	spec := in.Spec.DeepCopy()
	if spec.Priority == nil {
		spec.Priority = new(cluster.DefaultPriority)
	}
	if err := c.clusters.checkClusterSpec(ctx, spec, cur.Spec.Groups); err != nil {
		return nil, err
	}
	e := &edit{cur: cur}
	e.live, e.restart = specChanges(&cur.Spec, spec)
	next := cur.DeepCopy()
	next.Spec = *spec
	e.next = next
	if cur.Live == nil {
		e.live, e.restart = append(e.live, e.restart...), nil
		return e, nil
	}
	// Worker ranges of groups Ray already runs apply now.
	for i := range next.Live.Workers {
		lw := &next.Live.Workers[i]
		for _, w := range spec.Workers {
			if w.Name == lw.Name && w.NodeSpec == lw.NodeSpec {
				lw.Instances = w.Instances
				n := next.Replicas[w.Name]
				next.Replicas[w.Name] = min(max(n, w.Instances.Min), w.Instances.MaxOrMin())
			}
		}
	}
	if e.need, err = s.heldAfter(cur, next); err != nil {
		return nil, err
	}
	next.PendingRestart = mergeSorted(cur.PendingRestart, e.restart)
	if !reflect.DeepEqual(next.Replicas, cur.Replicas) || !reflect.DeepEqual(next.Live.Workers, cur.Live.Workers) {
		next.Generation++ // Ray runs another size or range (an autoscaler's minimum, maximum)
	}
	return e, nil
}

// fenceJoins is the create side of a group's fenced delete (fences.go)
// for an edit that changed a cluster's groups from before to written:
// each group it joined is read again from the store (groupLive), and one
// deleted, or being deleted, meanwhile is taken out again (takeOut). The
// error names those groups; the rest of the edit stays saved.
func (s *ClusterService) fenceJoins(ctx context.Context, id string, before, written []string) error {
	c := s.c
	var l errs.List
	for i, g := range written {
		if slices.Contains(before, g) {
			continue
		}
		target, err := c.groups.groupLive(ctx, g, "add members")
		if err == nil {
			continue
		}
		c.groups.takeOut(ctx, g, target, []groupsChange{{id, before, written}}, "group "+g+" was deleted meanwhile: put back")
		if !errs.IsNotFound(err) && !errors.Is(err, errs.ErrState) {
			return err
		}
		l = append(l, errs.Invalid(errs.NewPath("groups").Index(i), "C2", g,
			"this cluster group was deleted, or began to be, while the edit was saved: the cluster's groups are as they were; the rest of the edit is saved"))
	}
	return l.ToError()
}

// specChanges names what differs between two specs: what applies to a
// running cluster at once, and what needs a restart.
func specChanges(a, b *cluster.Spec) (live, restart []string) {
	add := func(changed bool, name string, now bool) {
		if !changed {
			return
		}
		if now {
			live = append(live, name)
		} else {
			restart = append(restart, name)
		}
	}
	add(a.Name != b.Name, "name", true)
	add(!reflect.DeepEqual(a.Groups, b.Groups), "groups", true)
	add(a.EffectivePriority() != b.EffectivePriority(), "priority", true)
	add(!reflect.DeepEqual(a.Tags, b.Tags), "tags", true)
	add(a.ResourcePackage != b.ResourcePackage || a.ResourceGroup != b.ResourceGroup, "resourceGroup", false)
	add(a.Image != b.Image, "image", false)
	add(!reflect.DeepEqual(a.Head, b.Head), "headGroup", false)
	old := map[string]cluster.WorkerGroup{}
	for _, w := range a.Workers {
		old[w.Name] = w
	}
	for i, w := range b.Workers {
		p := fmt.Sprintf("workerGroups[%d]", i)
		o, ok := old[w.Name]
		delete(old, w.Name)
		switch {
		case !ok:
			add(true, p+" (added)", false)
		case o.NodeSpec != w.NodeSpec:
			add(true, p+".nodeSpec", false)
			add(!reflect.DeepEqual(o.Instances, w.Instances), p+".instances", false)
		default:
			add(!reflect.DeepEqual(o.Instances, w.Instances), p+".instances", true)
		}
		if ok {
			add(!reflect.DeepEqual(o.Env, w.Env) || !reflect.DeepEqual(o.Labels, w.Labels) || !reflect.DeepEqual(o.Resources, w.Resources), p+".node settings", false)
		}
	}
	removed := make([]string, 0, len(old))
	for name := range old {
		removed = append(removed, name)
	}
	sort.Strings(removed)
	for _, name := range removed {
		add(true, "workerGroups "+name+" (removed)", false)
	}
	add(!reflect.DeepEqual(a.Mounts, b.Mounts), "mounts", false)
	add(!reflect.DeepEqual(a.Advanced, b.Advanced), "advanced", false)
	add(a.IdleTimeoutSeconds != b.IdleTimeoutSeconds, "idleTimeoutSeconds", true)
	return live, restart
}

func mergeSorted(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range append(append([]string(nil), a...), b...) {
		if !seen[s] {
			out = append(out, s)
			seen[s] = true
		}
	}
	sort.Strings(out)
	return out
}

// Autoscale is what Ray's autoscaler asks for: replicas workers in the
// running cluster's worker group (C14). The count is kept within the
// group's instance range, and a scale-up is granted only as far as the
// resource group can still allocate, and only while nothing else waits in
// the group's queue; the result says when part of it was refused, and the
// cluster's log records it. What is refused waits in the group's queue
// (cluster.Growth), beside the on-demand runs, at the cluster's priority,
// and is granted in the queue's order as quota frees; asking for no more
// than the cluster has takes it out.
func (s *ClusterService) Autoscale(ctx context.Context, clusterID, group string, replicas int) (cluster.AutoscaleResult, error) {
	res, _, err := s.autoscale(ctx, growRequest{cluster: clusterID, group: group, replicas: replicas, gen: -1})
	return res, err
}

// growRequest is a request to autoscale a worker group (see Autoscale).
type growRequest struct {
	cluster, group string
	replicas       int
	// gen >= 0 is the platform following Ray's own autoscaler as observed
	// at that generation of the cluster: nothing is done if the cluster
	// has moved on since, and a refusal already on the cluster's log is
	// not written again.
	gen int64
	// mode is what the request is: asked (by an autoscaler, or admitted by
	// the queue), or, following Ray's autoscaler, headroom lent or given
	// back.
	mode growMode
	// runs is what Ray's autoscaler runs of the group, when following it.
	runs int
}

// growMode is what a growRequest is.
type growMode int

const (
	// growAsked: more workers asked for. What quota or the queue refuses
	// waits in the queue (cluster.Growth).
	growAsked growMode = iota
	// growAdmitted: the cluster's stored growth, admitted by its resource
	// group's queue; quota alone decides, not what else waits there.
	growAdmitted
	// growLend: headroom lent above what Ray's autoscaler runs, so that it
	// can ask for more; nobody asked for it, so what quota refuses does
	// not wait in the queue, and the group stays marked yielded
	// (cluster.Yielded) while nothing above what it runs is granted.
	growLend
	// growYield: the ceiling lowered to what Ray's autoscaler runs, its
	// headroom given back to the queue; the group is marked yielded.
	growYield
)

// autoscale grants what an autoscaler asks for (see Autoscale and
// growRequest), and reports whether it wrote the cluster.
func (s *ClusterService) autoscale(ctx context.Context, req growRequest) (res cluster.AutoscaleResult, wrote bool, err error) {
	c := s.c
	clusterID, group, replicas, gen := req.cluster, req.group, req.replicas, req.gen
	res = cluster.AutoscaleResult{Asked: replicas}
	if err := ctx.Err(); err != nil {
		return res, false, err
	}
	for attempt := 0; ; attempt++ {
		cl, err := c.clusters.getCluster(ctx, clusterID)
		if err != nil {
			return res, false, err
		}
		if gen >= 0 && cl.Generation != gen {
			res.Granted = cl.Replicas[group]
			return res, false, nil // moved on since the observation: the next one decides
		}
		if cl.State != cluster.Running {
			return res, false, &errs.StateError{Kind: "cluster", ID: clusterID, Op: "autoscale", State: string(cl.State), Allowed: []string{string(cluster.Running)}}
		}
		if req.mode == growAdmitted {
			// What the queue admitted is the growth as stored now, on every
			// attempt: one taken out, or changed, since the queue's pass
			// read it is not granted as it was.
			if cl.Growth == nil || cl.Growth.Group != group {
				res.Granted = cl.Replicas[group]
				return res, false, nil
			}
			replicas = cl.Growth.Want
		}
		var wg *cluster.WorkerGroup
		for i := range cl.Live.Workers {
			if cl.Live.Workers[i].Name == group {
				wg = &cl.Live.Workers[i]
			}
		}
		if wg == nil {
			return res, false, errs.NotFound("worker group", clusterID+"/"+group)
		}
		node, ok := c.cat.Nodes.Lookup(wg.NodeSpec)
		if !ok {
			return res, false, errs.NotFound("node spec", wg.NodeSpec)
		}
		want := min(max(replicas, wg.Instances.Min), wg.Instances.MaxOrMin())
		cur := cl.Replicas[group]
		rg := cl.Live.ResourceGroup
		res.Granted, res.QuotaRefused, res.Reason = want, false, ""
		canEver := want // the most workers the group's whole capacity could ever hold
		// Workers of the group Ray may still run (a lowered ceiling not
		// applied yet) are held already: raising the ceiling up to them
		// takes no more quota.
		held := max(cur, cl.HeldReplicas()[group])
		if want > held {
			var a *quota.Account
			if req.mode == growAdmitted {
				// The queue's pass has just written the account: what it
				// left is read where it is, not in a cache that may lag.
				a, _, err = fresh[quota.Account](ctx, c.acc, kindResourceGroup, rg)
				err = notFoundAs(err, "resource group", rg)
			} else {
				a, _, err = get[quota.Account](ctx, c.acc, kindResourceGroup, "resource group", rg)
			}
			if err != nil {
				return res, false, err
			}
			free := a.Allocatable()
			if req.mode == growAdmitted {
				free = free.Add(s.reservedAhead(cl, a))
			}
			switch fits := int64(held) + free.CountFits(node.Resources()); {
			case req.mode != growAdmitted && c.queueWaits(rg, growthEntry(cl.ID), cl.Spec.EffectivePriority()):
				// Quota serves the queue first: a growth waits its turn
				// there, behind what waits before it.
				res.Granted, res.QuotaRefused = held, true
				res.Reason = fmt.Sprintf("runs or growths wait in resource group %s's queue, which quota serves first", rg)
				if req.mode != growLend {
					res.Reason += fmt.Sprintf(": the %d more %s workers wait there at priority %d", want-held, wg.NodeSpec, cl.Spec.EffectivePriority())
				}
			case fits < int64(want):
				res.Granted, res.QuotaRefused = int(fits), true
				res.Reason = fmt.Sprintf("resource group %s can allocate %s: %d of %d more %s workers fit",
					rg, free, fits-int64(cur), want-cur, wg.NodeSpec)
			}
			if res.QuotaRefused {
				// Only a refusal asks what may wait (growthMarks).
				canEver = c.clusters.mostThatFit(cl, group, cur, want, a.Capacity)
			}
		}
		growth, granted, yielded := s.growthMarks(cl, req, res, canEver)
		res.Queued = res.QuotaRefused && req.mode != growLend && growth != nil && growth.Group == group
		marks := !reflect.DeepEqual(growth, cl.Growth) || !reflect.DeepEqual(granted, cl.Granted) || !slices.Equal(yielded, cl.Yielded)
		if res.Granted == cur && !res.QuotaRefused && !marks {
			return res, false, nil
		}
		prefix := fmt.Sprintf("%s: %d → %d workers (asked %d)", group, cur, res.Granted, replicas)
		said := gen >= 0 && res.Granted == cur && refusedAlready(cl.Events, prefix)
		if said && !marks {
			return res, false, nil
		}
		next := cl.DeepCopy()
		next.Growth, next.Granted, next.Yielded = growth, granted, yielded
		if !said && (res.Granted != cur || res.QuotaRefused) {
			msg, action := prefix, "autoscale"
			if res.QuotaRefused {
				action, msg = "autoscale-refused", msg+": refused for quota: "+res.Reason
			}
			next.Events = event.Append(next.Events, c.event(ctx, "system", action, msg))
		}
		if res.Granted != cur {
			next.Replicas[group] = res.Granted
			next.Generation++
			err = c.clusters.writeWithHold(ctx, next, cl)
		} else {
			// Only its marks and log change (a growth that waits, headroom
			// given back): no hold to make, nothing for Ray to do.
			err = c.clusters.putCluster(ctx, next, cl.Version)
		}
		if (errors.Is(err, errs.ErrConflict) || errors.Is(err, errs.ErrQuota)) && attempt < conflictRetries {
			continue // the cluster or the resource group moved: look again
		}
		if err != nil {
			res.Granted = cur
			return res, false, err
		}
		return res, true, nil
	}
}

// growthMarks returns cluster cl's growth, grant and yielded groups as
// request req, answered res, leaves them. A growth of the group is stored
// when what was asked is refused (its Since kept while it waits), and
// dropped once granted or no longer wanted; headroom lent and refused is
// no growth. A grant of more workers asked for is recorded (Granted) and
// dropped once Ray's autoscaler runs it, or past the repair grace. A
// group is yielded when its headroom is given back, or lent and not
// granted, and no longer once some is.
//
// A growth asks for no more than canEver, what the resource group's whole
// capacity could hold of the cluster; none is stored when that is no more
// than it has (one that could never fit waited for good and, starving,
// held back every run behind it).
func (s *ClusterService) growthMarks(cl *cluster.Cluster, req growRequest, res cluster.AutoscaleResult, canEver int) (growth, granted *cluster.Growth, yielded []string) {
	growth, granted, group := cl.Growth, cl.Granted, req.group
	now := s.c.clock.Now()
	if granted != nil && granted.Group == group && (req.gen >= 0 && req.runs >= granted.Want || now.Sub(granted.Since) >= s.c.o.grace) {
		granted = nil // Ray runs it, or did not use it within the grace
	}
	if res.Granted > cl.Replicas[group] && (req.mode == growAsked || req.mode == growAdmitted) {
		granted = &cluster.Growth{Group: group, Want: res.Granted, Since: now}
	}
	mine := growth != nil && growth.Group == group
	switch {
	case res.QuotaRefused && req.mode != growLend && canEver <= cl.Replicas[group]:
		if mine {
			growth = nil // it can never be granted
		}
	case res.QuotaRefused && req.mode != growLend && growth != nil && !mine:
		// Another group's growth waits: it keeps its place (and its age);
		// this group asks again once that one is served. Replacing it
		// made two autoscaling groups take turns in a write loop, the
		// growth never ageing.
	case res.QuotaRefused && req.mode != growLend:
		since := now
		if mine {
			since = growth.Since
		}
		growth = &cluster.Growth{Group: group, Want: min(max(req.replicas, 0), maxWant(cl, group), canEver), Since: since}
		if mine && *growth == *cl.Growth {
			growth = cl.Growth
		}
	case mine && (!res.QuotaRefused || res.Granted >= growth.Want):
		growth = nil // granted, or no longer wanted
	}
	yield := slices.Contains(cl.Yielded, group)
	switch req.mode {
	case growYield:
		yield = true
	case growLend:
		yield = res.Granted <= req.runs
	}
	yielded = slices.DeleteFunc(slices.Clone(cl.Yielded), func(g string) bool { return g == group })
	if yield {
		yielded = append(yielded, group)
		slices.Sort(yielded)
	}
	if len(yielded) == 0 {
		yielded = nil
	}
	if slices.Equal(yielded, cl.Yielded) {
		yielded = cl.Yielded
	}
	if granted != nil && cl.Granted != nil && *granted == *cl.Granted {
		granted = cl.Granted
	}
	return growth, granted, yielded
}

// reservedAhead is what account a holds for cluster cl above what its
// ceilings need, when the hold was made for a generation of the cluster
// after cl's: what its resource group's pass reserved for the growth its
// queue admitted (admitGrowths), for the grant to take.
func (s *ClusterService) reservedAhead(cl *cluster.Cluster, a *quota.Account) quota.Resources {
	h, ok := a.Hold(cl.ID)
	if !ok || h.Generation <= cl.Generation {
		return quota.Resources{}
	}
	need, err := cl.Live.ResourcesAt(s.c.cat.Nodes, cl.HeldReplicas())
	if err != nil {
		return quota.Resources{}
	}
	return h.Resources.Sub(need).Max(quota.Resources{})
}

// mostThatFit is the most workers, from cur to want, that cluster cl's
// worker group could have with the whole of capacity held by the cluster
// (its other groups and head as they are): cur when none more could.
func (s *ClusterService) mostThatFit(cl *cluster.Cluster, group string, cur, want int, capacity quota.Resources) int {
	replicas := maps.Clone(cl.Replicas)
	for n := want; n > cur; n-- {
		replicas[group] = n
		if need, err := cl.Live.ResourcesAt(s.c.cat.Nodes, replicas); err == nil && need.Fits(capacity) {
			return n
		}
	}
	return cur
}

// maxWant is the most workers cluster cl's worker group may have.
func maxWant(cl *cluster.Cluster, group string) int {
	for _, w := range cl.Live.Workers {
		if w.Name == group {
			return w.Instances.MaxOrMin()
		}
	}
	return 0
}

// admitGrowth grants cluster id's stored growth, which its resource
// group's queue admitted: through autoscale, so that its reservation is
// made as every resize's (writeWithHold) before the cluster's ceiling is
// raised. It reports whether part of it still waits (quota moved since
// the queue's pass decided), and whether the ceiling was raised.
func (s *ClusterService) admitGrowth(ctx context.Context, id string) (waits, granted bool, err error) {
	cl, err := s.getCluster(ctx, id)
	if err != nil || cl.Growth == nil {
		return false, false, ignoreNotFound(err)
	}
	res, wrote, err := s.autoscale(ctx, growRequest{cluster: id, group: cl.Growth.Group, replicas: cl.Growth.Want, gen: -1, mode: growAdmitted})
	if errs.IsNotFound(err) || errors.Is(err, errs.ErrState) {
		return false, false, nil // gone, or no longer running: its growth goes with it
	}
	return res.QuotaRefused, wrote && res.Granted > cl.Replicas[cl.Growth.Group], err
}

// refusedAlready reports whether the latest autoscale event of log for
// the group a refusal message starts with is that same refusal.
func refusedAlready(log []event.Event, prefix string) bool {
	group := prefix[:strings.Index(prefix, ":")+1]
	for i := len(log) - 1; i >= 0; i-- {
		e := log[i]
		if (e.Action == "autoscale" || e.Action == "autoscale-refused") && strings.HasPrefix(e.Message, group) {
			return e.Action == "autoscale-refused" && strings.HasPrefix(e.Message, prefix)
		}
	}
	return false
}

// followAutoscaler has the cluster's reservation follow what Ray's own
// autoscaler runs (obs), where Ray has one: each autoscaling group's
// ceiling (Replicas, Ray's maxReplicas) is kept the headroom (one worker
// by default) above what the autoscaler runs, so that reaching it is the
// autoscaler asking for more, which is granted as quota allows (the
// reservation grows first) or waits in the resource group's queue
// (cluster.Growth, autoscale). Headroom is lent only from quota that
// nothing in the queue needs: while runs or growths of other clusters
// wait there, a ceiling above what the autoscaler runs is lowered to it,
// its reservation given back (trueUpHold, once Ray runs the lower
// ceiling), and the group marked yielded (cluster.Yielded). The
// autoscaler reaching a ceiling with no headroom lent (yielded, or its
// group's minimum) is not taken as asking for more: it may be idle. The
// headroom is lent again once nothing waits (the resource group's pass
// queues the yielded clusters then), as far as quota allows. A grant the
// autoscaler does not run yet (cluster.Granted) is left where it is for
// up to the repair grace: given back at once, it was lost before the
// autoscaler could see the new ceiling. It returns
// when to look again (a refusal is retried, for quota may free) and
// whether it wrote the cluster. One group changes per call; the write
// moves the generation and the next observation carries on.
func (s *ClusterService) followAutoscaler(ctx context.Context, cl *cluster.Cluster, obs *cluster.Autoscaled) (again time.Duration, wrote bool, err error) {
	c := s.c
	if obs == nil || cl.Live == nil || obs.Generation != cl.Generation || c.o.headroom == 0 {
		return 0, false, nil
	}
	waits := c.queueWaits(cl.Live.ResourceGroup, growthEntry(cl.ID), cl.Spec.EffectivePriority())
	now := c.clock.Now()
	for _, w := range cl.Live.Workers {
		ceiling, ok := cl.Replicas[w.Name]
		r, seen := obs.Workers[w.Name]
		if !w.Instances.Autoscaling() || !ok || !seen {
			continue
		}
		// KubeRay runs the replicas the autoscaler wrote within the group's
		// minimum and the ceiling; nothing else it wrote is believed.
		r = min(max(r, w.Instances.Min), ceiling)
		spent := false // a grant recorded that Ray runs, or did not use in time
		if g := cl.Granted; g != nil && g.Group == w.Name {
			if age := now.Sub(g.Since); r < g.Want && age < c.o.grace {
				// Granted, and not yet run: the autoscaler has not seen
				// the new ceiling. It stays where the grant put it (given
				// back to a waiter now, the growth was lost).
				again = sooner(again, c.o.grace-age)
				continue
			}
			spent = true
		}
		yielded := slices.Contains(cl.Yielded, w.Name)
		target, mode := min(r+c.o.headroom, w.Instances.MaxOrMin()), growLend
		switch {
		case r == ceiling && !yielded && r > w.Instances.Min:
			mode = growAsked // it reached the headroom lent: it asks for more
		case waits:
			target, mode = r, growYield
		}
		switch {
		case mode == growAsked && target == ceiling:
			continue // at its maximum
		case mode == growAsked && cl.Growth != nil && cl.Growth.Group == w.Name && cl.Growth.Want == target:
			continue // waits in the queue already
		case mode != growAsked && target == ceiling && yielded == (mode == growYield || target == r) &&
			(cl.Growth == nil || cl.Growth.Group != w.Name) && !spent:
			continue // but a growth it waits with that it no longer asks for is taken out, and a spent grant's record
		}
		res, wrote, err := c.clusters.autoscale(ctx, growRequest{cluster: cl.ID, group: w.Name, replicas: target, gen: cl.Generation, mode: mode, runs: r})
		if err != nil {
			return 0, false, err
		}
		if res.QuotaRefused {
			again = sooner(again, c.o.grace/2)
		}
		return again, wrote, nil
	}
	return again, false, nil
}

// Details returns the details page of a cluster (C13): basic info, its
// reservation, job history, operation and event log, pods, and the Ray
// dashboard while running.
func (s *ClusterService) Details(ctx context.Context, id string) (*cluster.Details, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl, err := c.clusters.getCluster(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &cluster.Details{Cluster: *cl, Events: cl.Events}
	if cl.QuotaGroup != "" {
		if a, _, err := cached[quota.Account](ctx, c.acc, kindResourceGroup, cl.QuotaGroup); err == nil {
			d.Resources = a.Held(cl.ID)
		}
	}
	runs, err := c.runs.listRuns(map[string]string{labelOn: id})
	if err != nil {
		return nil, err
	}
	now := c.clock.Now()
	for _, r := range runs {
		d.History = append(d.History, cluster.HistoryEntry{JobID: r.JobID, RunID: r.ID, Name: r.Config.Name,
			Command: r.Config.Entrypoint, Status: string(r.State), SubmittedAt: r.SubmittedAt,
			Duration: r.Duration(now), Logs: r.Logs})
	}
	sort.SliceStable(d.History, func(i, j int) bool { return d.History[i].SubmittedAt.Before(d.History[j].SubmittedAt) })
	if d.Pods, err = c.ray.Pods(ctx, id); err != nil {
		return nil, err
	}
	if cl.State == cluster.Running {
		if d.Dashboard, err = c.ray.Dashboard(ctx, id); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// advanceCluster moves cl (a new cluster, or a copy about to be written)
// to the state that t takes it to by cluster.Transition: the one place a
// cluster's state is assigned. ok is false when t does not apply to its
// state; a user operation not allowed in it is a *errs.StateError.
func advanceCluster(cl *cluster.Cluster, t cluster.Trigger) (to cluster.State, ok bool, err error) {
	to, ok, err = cluster.Transition(cl.ID, cl.State, t)
	if err != nil || !ok {
		return cl.State, false, err
	}
	cl.State = to
	return to, true, nil
}

// putCluster stores next over version and sets its new version.
func (s *ClusterService) putCluster(ctx context.Context, next *cluster.Cluster, version string) error {
	c := s.c
	next.UpdatedAt = c.clock.Now()
	if next.Live != nil {
		next.QuotaGroup = next.Live.ResourceGroup
	}
	from := c.cachedState(kindCluster, next.ID)
	v, err := c.acc.update(ctx, kindCluster, next.ID, version, clusterLabels(next), next)
	if err != nil {
		return notFoundAs(err, "cluster", next.ID)
	}
	next.Version = v
	c.logClusterChange(cluster.State(from), next)
	return nil
}

// userOp checks a user operation against the state machine; on-demand
// clusters belong to their run.
func (s *ClusterService) userOp(cl *cluster.Cluster, op cluster.Op) error {
	if cl.Temporary && op != cluster.OpClone {
		return &errs.StateError{Kind: "cluster", ID: cl.ID, Op: string(op), State: string(cl.State),
			Reason: "an on-demand cluster is managed by its run " + cl.OwnerRun + "; stop the run instead"}
	}
	_, _, err := cluster.Transition(cl.ID, cl.State, cluster.Trigger(op))
	return err
}

// activeRunsOn returns the runs active on cluster id as the store has
// them (each read in the store): a run another replica placed may not be
// cached here yet, and a hibernate that did not see it would stop it (the
// idle hibernate of a lagging replica did). The runs the cache shows are
// read one by one; only when none of them is active is the store listed
// (on Kubernetes a list of every run: paid once per hibernate or delete of
// a cluster the cache shows idle).
func (s *ClusterService) activeRunsOn(ctx context.Context, id string) ([]*job.Run, error) {
	c := s.c
	sel := map[string]string{labelOn: id, labelPhase: phaseActive}
	var ids []string
	for _, d := range c.cache.SelectDocs(kindRun, sel) {
		ids = append(ids, d.ID)
	}
	active, err := s.freshRunsOn(ctx, id, ids)
	if err != nil || len(active) > 0 {
		return active, err
	}
	docs, err := c.acc.listLatest(ctx, kindRun, sel)
	if err != nil {
		return nil, err
	}
	ids = ids[:0]
	for _, d := range docs {
		ids = append(ids, d.ID)
	}
	return s.freshRunsOn(ctx, id, ids)
}

// freshRunsOn reads runs ids in the store and returns those active on
// cluster id (a run moved elsewhere or ended meanwhile is not).
func (s *ClusterService) freshRunsOn(ctx context.Context, id string, ids []string) ([]*job.Run, error) {
	c := s.c
	var out []*job.Run
	for _, rid := range ids {
		r, err := c.runs.freshRun(ctx, rid)
		if errs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if r.ClusterID == id && r.State.Live() && r.State != job.Queued && r.State != job.Waiting {
			out = append(out, r)
		}
	}
	return out, nil
}

// unmarkStopping takes cl's Stopping mark off, on cl's version.
func (s *ClusterService) unmarkStopping(ctx context.Context, cl *cluster.Cluster) error {
	unmarked := cl.DeepCopy()
	unmarked.Unmark()
	return s.putCluster(ctx, unmarked, cl.Version)
}

// stopActiveRuns refuses op while runs are active on cl, unless force:
// then it stops them, saying why. It returns the cluster op is to be
// written over. A refusal is fenced as the deletes of fences.go are: cl
// is first marked (Stopping) by compare-and-swap, then the runs are
// looked for in the store, and the op is written over the marked version
// (a refusal takes the mark off). A run placed after the mark reads it
// before its submit and waits (followRun); one placed before it is in the
// look. So a run is never submitted to a cluster a non-forced hibernate
// or delete then stops.
func (s *ClusterService) stopActiveRuns(ctx context.Context, cl *cluster.Cluster, op cluster.Op, force bool) (*cluster.Cluster, error) {
	c := s.c
	if !force {
		marked := cl.DeepCopy()
		marked.MarkStopping(c.clock.Now(), c.share.self())
		if err := c.clusters.putCluster(ctx, marked, cl.Version); err != nil {
			return nil, err
		}
		active, err := s.activeRunsOn(ctx, cl.ID)
		if err == nil && len(active) == 0 {
			return marked, nil
		}
		// Taken off: a conflict means the cluster moved on (its next
		// writer drops the mark, or it goes when it no longer holds).
		if uerr := s.unmarkStopping(context.WithoutCancel(ctx), marked); uerr != nil {
			c.o.log.V(1).Info("a refused operation's mark could not be taken off; it holds for its life", "cluster", cl.ID, "err", uerr.Error())
		}
		if err != nil {
			return nil, err
		}
		return nil, &errs.StateError{Kind: "cluster", ID: cl.ID, Op: string(op), State: string(cl.State),
			Reason: fmt.Sprintf("%d runs are active on it; stop them, or pass DeleteOptions{Force: true} to stop them", len(active))}
	}
	active, err := s.activeRunsOn(ctx, cl.ID)
	if err != nil {
		return nil, err
	}
	past := string(op) + "d"
	if op == cluster.OpDelete {
		past = "deleted"
	}
	for _, r := range active {
		if cl.Temporary && r.ID == cl.OwnerRun {
			continue // its own run fails when the cluster goes
		}
		if _, err := c.runs.endRun(ctx, r, job.Stop, fmt.Sprintf("stopped: cluster %s was %s by %s", cl.ID, past, UserFrom(ctx))); err != nil && !errors.Is(err, errs.ErrState) {
			return nil, err
		}
	}
	return cl, nil
}
