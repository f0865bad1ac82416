package dlc

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// OpOption modifies a cluster operation.
type OpOption func(*opOptions)

type opOptions struct{ force bool }

// Force lets DeleteCluster and HibernateCluster go ahead while runs are
// active on the cluster: those runs are stopped, with the reason.
func Force() OpOption { return func(o *opOptions) { o.force = true } }

// EditResult says what an edit changed at once and what waits for the
// cluster's next start.
type EditResult struct {
	Cluster      *cluster.Cluster
	Applied      []string // settings in effect now
	NeedsRestart []string // settings that take effect at the next start
}

// CreateCluster validates spec, checks that its cluster groups (C2) and
// resource group (C4) exist and that its name is free, and stores the
// cluster. It starts in state creating and becomes created once the
// backend has it; call StartCluster to run it.
func (c *Client) CreateCluster(ctx context.Context, spec *cluster.Spec) (*cluster.Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.createClusterLocked(ctx, spec.DeepCopy())
}

func (c *Client) createClusterLocked(ctx context.Context, spec *cluster.Spec) (*cluster.Cluster, error) {
	if spec.Priority == 0 {
		spec.Priority = cluster.DefaultPriority
	}
	if err := c.checkClusterSpecLocked(ctx, "", spec); err != nil {
		return nil, err
	}
	now := c.clock.Now()
	cl := &cluster.Cluster{ID: newID("cls"), Spec: *spec, State: cluster.Creating,
		Creator: UserFrom(ctx), CreatedAt: now, UpdatedAt: now}
	v, err := save(ctx, c.be, kindCluster, cl.ID, 0, cl)
	if err != nil {
		return nil, err
	}
	cl.Version = v
	c.event(ctx, kindCluster+"/"+cl.ID, "user", "create", "cluster "+spec.Name+" created")
	c.applyLocked(ctx, cl)
	return cl.DeepCopy(), nil
}

// checkClusterSpecLocked validates a spec and its references; self is the
// cluster's own id when editing.
func (c *Client) checkClusterSpecLocked(ctx context.Context, self string, spec *cluster.Spec) error {
	l := spec.Problems(c.cat)
	for i, g := range spec.Groups {
		if g == "" {
			continue
		}
		if _, _, err := load[groupRecord](ctx, c.be, kindGroup, g); errs.IsNotFound(err) {
			l = append(l, errs.Invalid(errs.NewPath("groups").Index(i), "C2", g, "no cluster group with this id; create it first"))
		} else if err != nil {
			return err
		}
	}
	if spec.ResourceGroup != "" {
		if u, ok := c.ledger.Lookup(spec.ResourceGroup); !ok {
			l = append(l, errs.Invalid("resourceGroup", "C4", spec.ResourceGroup, "no resource group with this id; register it first"))
		} else if spec.ResourcePackage != "" && u.Package != spec.ResourcePackage {
			l = append(l, errs.Invalid("resourcePackage", "C4", spec.ResourcePackage,
				fmt.Sprintf("resource group %s belongs to package %s", spec.ResourceGroup, u.Package)))
		}
	}
	if err := l.ToError(); err != nil {
		return err
	}
	all, _, err := loadAll[cluster.Cluster](ctx, c.be, kindCluster)
	if err != nil {
		return err
	}
	for _, o := range all {
		if o.ID != self && !o.Temporary && o.Spec.Name == spec.Name {
			return errs.Conflict("cluster", spec.Name, "the name is taken by cluster "+o.ID)
		}
	}
	return nil
}

// GetCluster returns the cluster with this id.
func (c *Client) GetCluster(ctx context.Context, id string) (*cluster.Cluster, error) {
	cl, v, err := load[cluster.Cluster](ctx, c.be, kindCluster, id)
	if err != nil {
		return nil, notFoundAs(err, "cluster", id)
	}
	cl.Version = v
	return cl, nil
}

// ListClusters returns every cluster, on-demand ones included
// (Temporary), by id.
func (c *Client) ListClusters(ctx context.Context) ([]*cluster.Cluster, error) {
	all, vs, err := loadAll[cluster.Cluster](ctx, c.be, kindCluster)
	for i := range all {
		all[i].Version = vs[i]
	}
	return all, err
}

// StartCluster starts a created, hibernated or abnormal cluster (C11): it
// reserves the head (twice with high availability) and the workers'
// minimum in the resource group, or fails with ErrQuota and changes
// nothing. The cluster is starting until Ray reports it running.
func (c *Client) StartCluster(ctx context.Context, id string) (*cluster.Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, v, err := c.loadCluster(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := c.userOp(cl, cluster.OpStart); err != nil {
		return nil, err
	}
	if err := c.startLocked(ctx, cl, v); err != nil {
		return nil, err
	}
	c.event(ctx, kindCluster+"/"+id, "user", "start", "")
	return cl.DeepCopy(), nil
}

// startLocked reserves quota, marks cl starting and hands it to the
// backend. On error nothing has changed.
func (c *Client) startLocked(ctx context.Context, cl *cluster.Cluster, v int64) error {
	env := cl.Spec.Environment.DeepCopy()
	replicas := map[string]int{}
	for _, w := range env.Workers {
		replicas[w.Name] = w.Instances.Min
	}
	need, err := env.ResourcesAt(c.cat.Nodes, replicas)
	if err != nil {
		return err
	}
	undo, err := c.reserve(cl.Spec.ResourceGroup, cl.ID, need, cl.Live)
	if err != nil {
		return err
	}
	prev := cl.DeepCopy()
	cl.State, cl.Reason = cluster.Starting, ""
	cl.Live = &cluster.Live{ResourceGroup: cl.Spec.ResourceGroup, Environment: *env}
	cl.Replicas, cl.PendingRestart = replicas, nil
	if err := c.putCluster(ctx, cl, v); err != nil {
		undo()
		*cl = *prev
		return err
	}
	c.applyLocked(ctx, cl)
	return nil
}

// reserve makes holder's reservation need in group rg, moving it from the
// resource group of prev when that differs. undo puts things back.
func (c *Client) reserve(rg, holder string, need quota.Resources, prev *cluster.Live) (undo func(), err error) {
	prevRG := rg
	if prev != nil {
		prevRG = prev.ResourceGroup
	}
	oldSame, oldPrev := c.ledger.Held(rg, holder), c.ledger.Held(prevRG, holder)
	if prevRG != rg {
		c.ledger.Release(prevRG, holder)
	}
	if err := c.ledger.Set(rg, holder, need); err != nil {
		if prevRG != rg {
			_ = c.ledger.Set(prevRG, holder, oldPrev)
		}
		return nil, err
	}
	return func() {
		_ = c.ledger.Set(rg, holder, oldSame)
		if prevRG != rg {
			_ = c.ledger.Set(prevRG, holder, oldPrev)
		}
	}, nil
}

// HibernateCluster releases a running or abnormal cluster's compute and
// keeps its configuration and storage (C11). Active runs on it refuse the
// hibernate unless Force is given, which stops them.
func (c *Client) HibernateCluster(ctx context.Context, id string, opts ...OpOption) (*cluster.Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, v, err := c.loadCluster(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := c.userOp(cl, cluster.OpHibernate); err != nil {
		return nil, err
	}
	if err := c.stopActiveRunsLocked(ctx, cl, cluster.OpHibernate, opts); err != nil {
		return nil, err
	}
	cl.State = cluster.Hibernating
	if err := c.putCluster(ctx, cl, v); err != nil {
		return nil, err
	}
	c.event(ctx, kindCluster+"/"+id, "user", "hibernate", "")
	c.applyLocked(ctx, cl)
	return cl.DeepCopy(), nil
}

// DeleteCluster deletes a cluster and releases everything attached
// (C11); it is irreversible. Active runs on it refuse the delete unless
// Force is given, which stops them; runs still waiting for this cluster
// fail, saying it was deleted.
func (c *Client) DeleteCluster(ctx context.Context, id string, opts ...OpOption) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, v, err := c.loadCluster(ctx, id)
	if err != nil {
		return err
	}
	if err := c.userOp(cl, cluster.OpDelete); err != nil {
		return err
	}
	if err := c.stopActiveRunsLocked(ctx, cl, cluster.OpDelete, opts); err != nil {
		return err
	}
	if err := c.deleteClusterLocked(ctx, cl, v); err != nil {
		return err
	}
	c.event(ctx, kindCluster+"/"+id, "user", "delete", "")
	c.dispatchLocked(ctx)
	return nil
}

func (c *Client) deleteClusterLocked(ctx context.Context, cl *cluster.Cluster, v int64) error {
	cl.State = cluster.Deleting
	if err := c.putCluster(ctx, cl, v); err != nil {
		return err
	}
	if err := c.be.DeleteCluster(ctx, cl.ID); err != nil {
		c.event(ctx, kindCluster+"/"+cl.ID, "system", "delete-failed", err.Error())
	}
	return nil
}

// CloneCluster copies a cluster's spec, in any state, into a new cluster
// called newName (C11); the copy starts created.
func (c *Client) CloneCluster(ctx context.Context, id, newName string) (*cluster.Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, _, err := c.loadCluster(ctx, id)
	if err != nil {
		return nil, err
	}
	if newName == "" || newName == cl.Spec.Name {
		return nil, errs.List{errs.Required("name", "C11", "a clone needs a new name")}.ToError()
	}
	spec := cl.Spec.DeepCopy()
	spec.Name = newName
	out, err := c.createClusterLocked(ctx, spec)
	if err == nil {
		c.event(ctx, kindCluster+"/"+id, "user", "clone", "cloned as "+out.ID)
	}
	return out, err
}

// EditCluster replaces the spec of in.ID with in.Spec (C11). in.Version
// must be the version read: a stale edit is a conflict. On a running or
// abnormal cluster, worker instance ranges and metadata apply at once
// (the reservation follows, or ErrQuota changes nothing); the rest is
// listed in NeedsRestart and applies at the next start.
func (c *Client) EditCluster(ctx context.Context, in *cluster.Cluster) (*EditResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, v, err := c.loadCluster(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if in.Version != v {
		return nil, errs.Conflict("cluster", in.ID, fmt.Sprintf("stale version %d, current %d: read it again", in.Version, v))
	}
	if err := c.userOp(cur, cluster.OpEdit); err != nil {
		return nil, err
	}
	spec := in.Spec.DeepCopy()
	if spec.Priority == 0 {
		spec.Priority = cluster.DefaultPriority
	}
	if err := c.checkClusterSpecLocked(ctx, cur.ID, spec); err != nil {
		return nil, err
	}
	live, restart := specChanges(&cur.Spec, spec)
	next := cur.DeepCopy()
	next.Spec = *spec
	undo := func() {}
	if cur.Live == nil {
		live, restart = append(live, restart...), nil
	} else {
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
		need, err := next.Live.ResourcesAt(c.cat.Nodes, next.Replicas)
		if err != nil {
			return nil, err
		}
		if undo, err = c.reserve(next.Live.ResourceGroup, next.ID, need, next.Live); err != nil {
			return nil, err
		}
		next.PendingRestart = mergeSorted(cur.PendingRestart, restart)
	}
	if err := c.putCluster(ctx, next, v); err != nil {
		undo()
		return nil, err
	}
	c.event(ctx, kindCluster+"/"+next.ID, "user", "edit", strings.Join(append(live, restart...), ", "))
	if next.State == cluster.Running {
		c.applyLocked(ctx, next)
	}
	c.dispatchLocked(ctx)
	return &EditResult{Cluster: next.DeepCopy(), Applied: live, NeedsRestart: restart}, nil
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
	add(a.Priority != b.Priority, "priority", true)
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
	for _, name := range sortedNames(old) {
		add(true, "workerGroups "+name+" (removed)", false)
	}
	add(!reflect.DeepEqual(a.Mounts, b.Mounts), "mounts", false)
	add(!reflect.DeepEqual(a.Advanced, b.Advanced), "advanced", false)
	return live, restart
}

func sortedNames(m map[string]cluster.WorkerGroup) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
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
// resource group can still allocate. It returns the count granted.
func (c *Client) Autoscale(ctx context.Context, clusterID, group string, replicas int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, v, err := c.loadCluster(ctx, clusterID)
	if err != nil {
		return 0, err
	}
	if cl.State != cluster.Running {
		return 0, &errs.StateError{Kind: "cluster", ID: clusterID, Op: "autoscale", State: string(cl.State), Allowed: []string{string(cluster.Running)}}
	}
	var wg *cluster.WorkerGroup
	for i := range cl.Live.Workers {
		if cl.Live.Workers[i].Name == group {
			wg = &cl.Live.Workers[i]
		}
	}
	if wg == nil {
		return 0, errs.NotFound("worker group", clusterID+"/"+group)
	}
	want := min(max(replicas, wg.Instances.Min), wg.Instances.MaxOrMin())
	cur := cl.Replicas[group]
	granted := want
	if want > cur {
		// Grow only as far as the resource group can still allocate.
		node, ok := c.cat.Nodes.Lookup(wg.NodeSpec)
		if !ok {
			return 0, errs.NotFound("node spec", wg.NodeSpec)
		}
		free, err := c.ledger.Allocatable(cl.Live.ResourceGroup)
		if err != nil {
			return 0, err
		}
		granted = int(min(int64(want), int64(cur)+free.CountFits(node.Resources())))
	}
	cl.Replicas[group] = granted
	need, err := cl.Live.ResourcesAt(c.cat.Nodes, cl.Replicas)
	if err != nil {
		return 0, err
	}
	if err := c.ledger.Set(cl.Live.ResourceGroup, cl.ID, need); err != nil {
		return cur, err
	}
	if granted != cur {
		if err := c.putCluster(ctx, cl, v); err != nil {
			cl.Replicas[group] = cur
			need, _ := cl.Live.ResourcesAt(c.cat.Nodes, cl.Replicas)
			_ = c.ledger.Set(cl.Live.ResourceGroup, cl.ID, need)
			return cur, err
		}
		c.event(ctx, kindCluster+"/"+cl.ID, "system", "autoscale", fmt.Sprintf("%s: %d → %d workers (asked %d)", group, cur, granted, replicas))
		c.applyLocked(ctx, cl)
	}
	if granted < cur {
		c.dispatchLocked(ctx)
	}
	return granted, nil
}

// ClusterDetails returns the details page of a cluster (C13): basic info,
// its reservation, job history, operation and event log, pods, and the
// Ray dashboard while running.
func (c *Client) ClusterDetails(ctx context.Context, id string) (*cluster.Details, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, _, err := c.loadCluster(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &cluster.Details{Cluster: *cl}
	if cl.Live != nil {
		d.Resources = c.ledger.Held(cl.Live.ResourceGroup, cl.ID)
	}
	runs, _, err := loadAll[job.Run](ctx, c.be, kindRun)
	if err != nil {
		return nil, err
	}
	now := c.clock.Now()
	for _, r := range runs {
		if r.ClusterID != id {
			continue
		}
		d.History = append(d.History, cluster.HistoryEntry{JobID: r.JobID, RunID: r.ID, Name: r.Config.Name,
			Command: r.Config.Entrypoint, Status: string(r.State), SubmittedAt: r.SubmittedAt,
			Duration: r.Duration(now), Logs: r.Logs})
	}
	sort.Slice(d.History, func(i, j int) bool { return d.History[i].SubmittedAt.Before(d.History[j].SubmittedAt) })
	if d.Events, err = c.be.Events(ctx, kindCluster+"/"+id); err != nil {
		return nil, err
	}
	if d.Pods, err = c.be.Pods(ctx, id); err != nil {
		return nil, err
	}
	if cl.State == cluster.Running {
		d.Dashboard = c.be.Dashboard(ctx, id)
	}
	return d, nil
}

func (c *Client) loadCluster(ctx context.Context, id string) (*cluster.Cluster, int64, error) {
	cl, v, err := load[cluster.Cluster](ctx, c.be, kindCluster, id)
	if err != nil {
		return nil, 0, notFoundAs(err, "cluster", id)
	}
	cl.Version = v
	return cl, v, nil
}

// putCluster stores cl over version v and sets its new version.
func (c *Client) putCluster(ctx context.Context, cl *cluster.Cluster, v int64) error {
	cl.UpdatedAt = c.clock.Now()
	nv, err := save(ctx, c.be, kindCluster, cl.ID, v, cl)
	if err != nil {
		return err
	}
	cl.Version = nv
	return nil
}

// userOp checks a user operation against the state machine; on-demand
// clusters belong to their run.
func (c *Client) userOp(cl *cluster.Cluster, op cluster.Op) error {
	if cl.Temporary && op != cluster.OpClone {
		return &errs.StateError{Kind: "cluster", ID: cl.ID, Op: string(op), State: string(cl.State),
			Reason: "an on-demand cluster is managed by its run " + cl.OwnerRun + "; stop the run instead"}
	}
	return cluster.CheckOp(cl, op)
}

// applyLocked hands cl to the backend; a failure marks it abnormal.
func (c *Client) applyLocked(ctx context.Context, cl *cluster.Cluster) {
	if err := c.be.ApplyCluster(ctx, cl); err != nil {
		c.event(ctx, kindCluster+"/"+cl.ID, "system", "apply-failed", err.Error())
	}
}
