package dlc

import (
	"context"
	"fmt"
	"reflect"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/storage"
)

// SaveJob validates a job config and saves it (J12): every rule a config
// can break, and its references — the existing cluster, the cluster
// group, the resource group — must resolve. An on-demand config whose
// minimum cluster could never fit its resource group's whole quota is
// refused; one that fits only later is saved, and its runs wait. Under
// WithRequestID a retried SaveJob returns the first call's record.
func (c *Client) SaveJob(ctx context.Context, cfg *job.Config) (*job.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.recall(ctx, "save"); ok {
		return c.GetJob(ctx, id)
	}
	if err := c.checkJobLocked(ctx, cfg); err != nil {
		return nil, err
	}
	now := c.clock.Now()
	rec := &job.Record{ID: newID("job"), Config: *cfg, Revision: 1, Creator: UserFrom(ctx), CreatedAt: now, UpdatedAt: now}
	v, err := save(ctx, c.be, kindJob, rec.ID, 0, rec)
	if err != nil {
		return nil, err
	}
	rec.Version = v
	c.remember(ctx, "save", rec.ID)
	c.event(ctx, kindJob+"/"+rec.ID, "user", "create", cfg.Name)
	return rec.DeepCopy(), nil
}

// checkJobLocked validates cfg and resolves what it refers to.
func (c *Client) checkJobLocked(ctx context.Context, cfg *job.Config) error {
	if cfg.OnDemand != nil && cfg.OnDemand.Priority == 0 {
		cfg.OnDemand.Priority = job.DefaultPriority
	}
	l := cfg.Problems(c.cat)
	if len(l) > 0 {
		return l.ToError()
	}
	switch cfg.Mode() {
	case job.ClusterMode:
		cl, _, err := c.loadCluster(ctx, cfg.Cluster)
		switch {
		case errs.IsNotFound(err) || (err == nil && cl.Temporary):
			l = append(l, errs.Invalid("cluster", "J12", cfg.Cluster, "no compute cluster with this id"))
		case err != nil:
			return err
		default:
			l = append(l, storage.MountClashes(errs.NewPath("mounts"), cl.Spec.Mounts, cfg.Mounts)...)
		}
	case job.GroupMode:
		if _, _, err := load[groupRecord](ctx, c.be, kindGroup, cfg.Group); errs.IsNotFound(err) {
			l = append(l, errs.Invalid("group", "J12", cfg.Group, "no cluster group with this id"))
		} else if err != nil {
			return err
		}
	case job.OnDemandMode:
		od := cfg.OnDemand
		u, ok := c.ledger.Lookup(od.ResourceGroup)
		if !ok {
			l = append(l, errs.Invalid("onDemand.resourceGroup", "J12", od.ResourceGroup, "no resource group with this id"))
			break
		}
		if u.Package != od.ResourcePackage {
			l = append(l, errs.Invalid("onDemand.resourcePackage", "J12", od.ResourcePackage,
				fmt.Sprintf("resource group %s belongs to package %s", od.ResourceGroup, u.Package)))
		}
		need, err := od.Environment.MinResources(c.cat.Nodes)
		if err != nil {
			return err
		}
		if !need.Fits(u.Capacity) {
			l = append(l, errs.Invalid("onDemand.environment", "J12", need.String(),
				fmt.Sprintf("the smallest cluster this config starts can never fit resource group %s, whose whole quota is %s", od.ResourceGroup, u.Capacity)))
		}
	}
	return l.ToError()
}

// GetJob returns a saved job config.
func (c *Client) GetJob(ctx context.Context, id string) (*job.Record, error) {
	rec, v, err := load[job.Record](ctx, c.be, kindJob, id)
	if err != nil {
		return nil, notFoundAs(err, "job", id)
	}
	rec.Version = v
	return rec, nil
}

// ListJobs returns the job list with every J13 column, by id.
func (c *Client) ListJobs(ctx context.Context) ([]job.ListEntry, error) {
	recs, _, err := loadAll[job.Record](ctx, c.be, kindJob)
	if err != nil {
		return nil, err
	}
	running, err := c.liveRunsByJob(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]job.ListEntry, 0, len(recs))
	for _, r := range recs {
		cfg := &r.Config
		out = append(out, job.ListEntry{ID: r.ID, Name: cfg.Name, Mode: cfg.Mode(), Resource: cfg.Target(),
			Package: cfg.Package.String(), Running: running[r.ID], Priority: cfg.Priority(), Tags: cfg.Tags,
			Creator: r.Creator, CreatedAt: r.CreatedAt})
	}
	return out, nil
}

func (c *Client) liveRunsByJob(ctx context.Context) (map[string]int, error) {
	runs, _, err := loadAll[job.Run](ctx, c.be, kindRun)
	if err != nil {
		return nil, err
	}
	n := map[string]int{}
	for _, r := range runs {
		if !r.State.Terminal() {
			n[r.JobID]++
		}
	}
	return n, nil
}

// EditJob saves rec.Config as the job's new revision (J15). rec.Version
// must be the version read (a stale edit is a conflict). Only the
// package, entrypoint, storage mounts and runtime environment may change;
// anything else is an error naming the field. Runs already started keep
// the revision they started from.
func (c *Client) EditJob(ctx context.Context, rec *job.Record) (*job.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, v, err := load[job.Record](ctx, c.be, kindJob, rec.ID)
	if err != nil {
		return nil, notFoundAs(err, "job", rec.ID)
	}
	if rec.Version != v {
		return nil, errs.Conflict("job", rec.ID, fmt.Sprintf("stale version %d, current %d: read it again", rec.Version, v))
	}
	next := rec.Config.DeepCopy()
	if next.OnDemand != nil && next.OnDemand.Priority == 0 {
		next.OnDemand.Priority = job.DefaultPriority
	}
	if err := uneditable(&cur.Config, next).ToError(); err != nil {
		return nil, err
	}
	if err := c.checkJobLocked(ctx, next); err != nil {
		return nil, err
	}
	cur.Config = *next
	cur.Revision++
	cur.UpdatedAt = c.clock.Now()
	if cur.Version, err = save(ctx, c.be, kindJob, cur.ID, v, cur); err != nil {
		return nil, err
	}
	c.event(ctx, kindJob+"/"+cur.ID, "user", "edit", fmt.Sprintf("revision %d", cur.Revision))
	return cur.DeepCopy(), nil
}

// uneditable lists each field an edit may not change (J15).
func uneditable(old, next *job.Config) errs.List {
	var l errs.List
	forbid := func(changed bool, path string) {
		if changed {
			l = append(l, errs.Forbidden(errs.Path(path), "J15",
				"an edit changes only the package, entrypoint, mounts and runtime environment; copy the job to change this"))
		}
	}
	forbid(old.Name != next.Name, "name")
	forbid(!reflect.DeepEqual(old.OnDemand, next.OnDemand), "onDemand")
	forbid(old.Cluster != next.Cluster, "cluster")
	forbid(old.Group != next.Group, "group")
	forbid(!reflect.DeepEqual(old.Tags, next.Tags) && (len(old.Tags)+len(next.Tags) > 0), "tags")
	forbid(!reflect.DeepEqual(old.Advanced, next.Advanced) && (len(old.Advanced)+len(next.Advanced) > 0), "advanced")
	return l
}

// CopyJob saves a copy of a job config under a new name (J16); an empty
// name gives "<name> (copy)".
func (c *Client) CopyJob(ctx context.Context, id, name string) (*job.Record, error) {
	rec, err := c.GetJob(ctx, id)
	if err != nil {
		return nil, err
	}
	cfg := rec.Config.DeepCopy()
	if name == "" {
		name = cfg.Name + " (copy)"
	}
	cfg.Name = name
	return c.SaveJob(ctx, cfg)
}

// DeleteJob deletes a job config; it is refused while a run of it is not
// finished (J17).
func (c *Client) DeleteJob(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, v, err := load[job.Record](ctx, c.be, kindJob, id)
	if err != nil {
		return notFoundAs(err, "job", id)
	}
	live, err := c.liveRunsByJob(ctx)
	if err != nil {
		return err
	}
	if n := live[id]; n > 0 {
		return &errs.StateError{Kind: "job", ID: id, Op: "delete", State: fmt.Sprintf("%d runs not finished", n),
			Allowed: []string{"no active run"}, Reason: "stop its runs or wait for them to finish"}
	}
	if err := c.be.Delete(ctx, kindJob, id, v); err != nil {
		return err
	}
	c.event(ctx, kindJob+"/"+id, "user", "delete", "")
	return nil
}
