package platform

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"time"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/storage"
)

// JobService is the job configurations of an Engine (J1–J17).
type JobService struct{ c *Engine }

// Jobs returns the client's job configs.
func (c *Engine) Jobs() *JobService { return c.jobs }

// Save validates a job config and saves it (J12): every rule a config can
// break, its package (a local file is inspected: at most 100 MB and a
// ZIP, J5; one in COS too when the client has WithCOS), and its
// references — the existing cluster, the cluster group, the resource
// group — must resolve. An on-demand config whose minimum cluster could
// never fit its resource group's whole quota is refused; one that fits
// only later is saved, and its runs wait.
func (s *JobService) Create(ctx context.Context, cfg *job.Config, opts job.SaveOptions) (*job.Record, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, nilInput("config", "a job config")
	}
	id := newID("job")
	if opts.RequestID != "" {
		id = idFor("job", opts.RequestID)
		if rec, err := c.jobs.getJob(ctx, id); err == nil {
			return rec, nil
		}
	}
	cfg = cfg.DeepCopy()
	if err := s.checkJob(ctx, cfg); err != nil {
		return nil, err
	}
	now := c.clock.Now()
	rec := &job.Record{ID: id, Config: *cfg, Revision: 1, Creator: UserFrom(ctx), CreatedAt: now, UpdatedAt: now}
	rec.Events = event.Append(nil, c.event(ctx, "user", "create", cfg.Name))
	scheduleSet(nil, rec, now)
	v, err := c.acc.create(ctx, kindJob, rec.ID, jobLabels(rec), rec)
	if errors.Is(err, errs.ErrConflict) && opts.RequestID != "" {
		got, gv, ferr := fresh[job.Record](ctx, c.acc, kindJob, id)
		if ferr != nil {
			return nil, ferr
		}
		got.Version = gv
		return got, nil
	}
	if err != nil {
		return nil, err
	}
	rec.Version = v
	return rec, nil
}

// checkJob validates cfg, inspects its package and resolves what it
// refers to; every problem is reported at once.
func (s *JobService) checkJob(ctx context.Context, cfg *job.Config) error {
	c := s.c
	if cfg.OnDemand != nil && cfg.OnDemand.Priority == nil {
		cfg.OnDemand.Priority = new(job.DefaultPriority)
	}
	l := cfg.Problems(c.cat)
	if len(l) > 0 {
		return l.ToError()
	}
	if msg := c.tooOften(cfg.Schedule); msg != "" {
		return errs.List{errs.Invalid(errs.NewPath("schedule").Child("cron"), "L1", cfg.Schedule.Cron, msg)}.ToError()
	}
	if c.o.checkPackage != nil && (cfg.Package.Local != "" || (cfg.Package.COS != "" && c.o.readsCOS)) {
		err := c.o.checkPackage(ctx, cfg.Package, storage.InspectOptions{Entrypoint: cfg.Entrypoint})
		if fs := errs.Fields(err); len(fs) > 0 {
			l = append(l, fs...)
		} else if err != nil {
			return err
		}
	}
	switch cfg.Mode() {
	case job.ClusterMode:
		cl, err := c.clusters.getCluster(ctx, cfg.Cluster)
		switch {
		case errs.IsNotFound(err) || (err == nil && cl.Temporary):
			l = append(l, errs.Invalid("cluster", "J12", cfg.Cluster, "no compute cluster with this id"))
		case err != nil:
			return err
		default:
			l = append(l, storage.MountClashes(errs.NewPath("mounts"), cl.Spec.Mounts, cfg.Mounts)...)
		}
	case job.GroupMode:
		if ok, err := c.acc.exists(ctx, kindGroup, cfg.Group); err != nil {
			return err
		} else if !ok {
			l = append(l, errs.Invalid("group", "J12", cfg.Group, "no cluster group with this id"))
		}
	case job.OnDemandMode:
		od := cfg.OnDemand
		a, _, err := cached[quota.Account](ctx, c.acc, kindResourceGroup, od.ResourceGroup)
		if errs.IsNotFound(err) {
			l = append(l, errs.Invalid("onDemand.resourceGroup", "J12", od.ResourceGroup, "no resource group with this id"))
			break
		}
		if err != nil {
			return err
		}
		if a.Package != od.ResourcePackage {
			l = append(l, errs.Invalid("onDemand.resourcePackage", "J12", od.ResourcePackage,
				fmt.Sprintf("resource group %s belongs to package %s", od.ResourceGroup, a.Package)))
		}
		if _, err := od.Environment.MinResources(c.cat.Nodes); err != nil {
			return err
		}
		l = append(l, c.clusters.neverFits(&od.Environment, "onDemand.environment", "J12", a)...)
	}
	return l.ToError()
}

// Get returns a saved job config.
func (s *JobService) Get(ctx context.Context, id string) (*job.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.getJob(ctx, id)
}

func (s *JobService) getJob(ctx context.Context, id string) (*job.Record, error) {
	c := s.c
	rec, v, err := get[job.Record](ctx, c.acc, kindJob, "job", id)
	if err != nil {
		return nil, err
	}
	rec.Version = v
	return rec, nil
}

// List returns the job list with every J13 column, by id.
func (s *JobService) List(ctx context.Context, opts ...job.ListOptions) ([]job.ListEntry, error) {
	var o job.ListOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	o.Limit, o.Continue = 0, ""
	p, err := s.ListPage(ctx, o, nil)
	if err != nil {
		return nil, err
	}
	return p.Items, nil
}

// ListPage returns one page of the job list (every J13 column) that opts
// selects, by id: at most opts.Limit entries, and the token of the next
// page. It reads the client's cache.
//
// keep (nil: every config) is asked as RunService.ListPage's is.
func (s *JobService) ListPage(ctx context.Context, opts job.ListOptions, keep func(*job.Record) bool) (*job.ListPage, error) {
	c := s.c
	from, err := pageFrom(ctx, opts.Limit, opts.Continue)
	if err != nil {
		return nil, err
	}
	recs, versions, err := cachedObjects[job.Record](c.acc, kindJob, nil)
	if err != nil {
		return nil, err
	}
	match := func(r *job.Record) bool {
		cfg := &r.Config
		return (opts.Creator == "" || r.Creator == opts.Creator) &&
			(opts.Mode == "" || cfg.Mode() == opts.Mode) &&
			(opts.Resource == "" || cfg.Target() == opts.Resource) &&
			(opts.NameContains == "" || strings.Contains(cfg.Name, opts.NameContains)) &&
			(opts.CreatedAfter.IsZero() || r.CreatedAt.After(opts.CreatedAfter)) &&
			cluster.HasTags(cfg.Tags, opts.Tags)
	}
	items, _, next := page(recs, versions, match, keep, func(r *job.Record) pageKey { return pageKey{ID: r.ID} }, opts.Limit, from)
	out := &job.ListPage{Items: make([]job.ListEntry, 0, len(items)), Continue: next}
	for _, r := range items {
		cfg := &r.Config
		out.Items = append(out.Items, job.ListEntry{ID: r.ID, Name: cfg.Name, Mode: cfg.Mode(), Resource: cfg.Target(),
			Package: cfg.Package.String(), Running: c.jobs.liveRuns(r.ID), Priority: cfg.Priority(), Tags: maps.Clone(cfg.Tags),
			Creator: r.Creator, CreatedAt: r.CreatedAt})
	}
	return out, nil
}

// liveRuns counts a job's runs that have not ended.
func (s *JobService) liveRuns(jobID string) int {
	c := s.c
	return len(c.cache.SelectDocs(kindRun, map[string]string{labelJob: jobID, labelPhase: phasePending})) +
		len(c.cache.SelectDocs(kindRun, map[string]string{labelJob: jobID, labelPhase: phaseActive}))
}

// Events returns a job config's operation log, oldest first.
func (s *JobService) Events(ctx context.Context, id string) ([]event.Event, error) {
	rec, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return rec.Events, nil
}

// Edit saves rec.Config as the job's new revision (J15). rec.Version must
// be the version read (a stale edit is a conflict). Only the package,
// entrypoint, storage mounts and runtime environment (J15), and the
// schedule, the deadline and the retry limit (L1–L3), may change; anything
// else is an error naming the field. Runs already started keep the
// revision they started from.
func (s *JobService) Update(ctx context.Context, rec *job.Record) (*job.Record, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, nilInput("record", "the job config to update, as read")
	}
	cur, err := c.jobs.getJob(ctx, rec.ID)
	if err != nil {
		return nil, err
	}
	if rec.Version != cur.Version {
		return nil, errs.Conflict("job", rec.ID, "stale version: read it again")
	}
	if c.markHolds(cur.Deleting.At, cur.Deleting.Replica) {
		return nil, jobDeleting(cur, "edit")
	}
	next := rec.Config.DeepCopy()
	if next.OnDemand != nil && next.OnDemand.Priority == nil {
		next.OnDemand.Priority = new(job.DefaultPriority)
	}
	if err := uneditable(&cur.Config, next).ToError(); err != nil {
		return nil, err
	}
	if err := s.checkJob(ctx, next); err != nil {
		return nil, err
	}
	out := cur.DeepCopy()
	out.Config = *next
	out.Deleting = job.Deletion{} // a mark no longer held goes with the next write
	out.Revision++
	out.UpdatedAt = c.clock.Now()
	out.Events = event.Append(out.Events, c.event(ctx, "user", "edit", fmt.Sprintf("revision %d", out.Revision)))
	scheduleSet(&cur.Config, out, out.UpdatedAt)
	if out.Version, err = c.acc.update(ctx, kindJob, out.ID, cur.Version, jobLabels(out), out); err != nil {
		return nil, notFoundAs(err, "job", out.ID)
	}
	return out, nil
}

// uneditable lists each field an edit may not change (J15).
func uneditable(old, next *job.Config) errs.List {
	var l errs.List
	forbid := func(changed bool, path string) {
		if changed {
			l = append(l, errs.Forbidden(errs.Path(path), "J15",
				"an edit changes only the package, entrypoint, mounts and runtime environment (and the schedule, deadline and retries); copy the job to change this"))
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

// Copy saves a copy of a job config under a new name (J16); an empty name
// gives "<name> (copy)".
func (s *JobService) Clone(ctx context.Context, id, name string) (*job.Record, error) {
	rec, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	cfg := rec.Config.DeepCopy()
	if name == "" {
		name = cfg.Name + " (copy)"
	}
	cfg.Name = name
	return s.Create(ctx, cfg, job.SaveOptions{})
}

// Delete deletes a job config; it is refused while a run of it has not
// ended (J17), as the store has its runs (a refusal the cache suggests is
// checked on the store, and one it does not suggest is found there). A
// run created meanwhile through any client does not outlive the config:
// the delete marks the config (job.Deletion), lists its runs in the store,
// and deletes the config on the version it marked, while a run's create
// reads the config again once it has stored the run, and ends the run at
// once if it finds the mark or finds the config gone (see fences.go). So
// either the delete sees the run and is refused, or the run fails; when
// the run was stored before the mark and reads it, both do. A refused
// delete takes its mark off. Deleting a config whose delete is in
// progress elsewhere follows that delete: it lists the runs, then deletes
// on that delete's marked version; of two deletes that both succeed in
// deleting, the second is ErrNotFound.
func (s *JobService) Delete(ctx context.Context, id string) error {
	c := s.c
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := c.jobs.getJob(ctx, id); err != nil {
		return err
	}
	if c.jobs.liveRuns(id) > 0 {
		// The cache says so; asked of the store before it is the answer,
		// and before anything is written, so that the usual refusal writes
		// nothing.
		if n, err := c.jobs.freshLiveRuns(ctx, id); err != nil {
			return err
		} else if n > 0 {
			return runsNotFinished(id, n)
		}
	}
	for attempt := 0; ; attempt++ {
		rec, err := c.jobs.freshJob(ctx, id)
		if err != nil {
			return err
		}
		fence, mine := rec.Version, false
		if !c.markHolds(rec.Deleting.At, rec.Deleting.Replica) {
			marked := rec.DeepCopy()
			marked.Deleting = job.Deletion{At: c.clock.Now(), By: UserFrom(ctx), Replica: c.share.self()}
			fence, err = c.acc.update(ctx, kindJob, id, rec.Version, jobLabels(marked), marked)
			if errors.Is(err, errs.ErrConflict) && attempt < conflictRetries {
				continue
			}
			if err != nil {
				return notFoundAs(err, "job", id)
			}
			mine = true
		}
		n, err := c.jobs.freshLiveRuns(ctx, id)
		if err == nil && n > 0 {
			err = runsNotFinished(id, n)
		}
		if err != nil {
			if mine {
				s.unmarkJob(ctx, rec, fence)
			}
			return err
		}
		err = c.store.Delete(ctx, kindJob, id, fence)
		if errors.Is(err, errs.ErrConflict) && attempt < conflictRetries {
			continue // written meanwhile (an edit, a mark taken off): mark and look again
		}
		return notFoundAs(err, "job", id)
	}
}

func runsNotFinished(id string, n int) error {
	return &errs.StateError{Kind: "job", ID: id, Op: "delete", State: fmt.Sprintf("%d runs not finished", n),
		Allowed: []string{"no active run"}, Reason: "stop its runs or wait for them to finish"}
}

// jobDeleting is the refusal of op on a job config whose delete is in
// progress.
func jobDeleting(rec *job.Record, op string) error {
	return &errs.StateError{Kind: "job", ID: rec.ID, Op: op, State: "deleting",
		Reason: fmt.Sprintf("%s is deleting the job config (since %s)", rec.Deleting.By, rec.Deleting.At.Format(time.RFC3339))}
}

// freshJob reads a job config from the store itself.
func (s *JobService) freshJob(ctx context.Context, id string) (*job.Record, error) {
	c := s.c
	rec, v, err := fresh[job.Record](ctx, c.acc, kindJob, id)
	if err != nil {
		return nil, notFoundAs(err, "job", id)
	}
	rec.Version = v
	return rec, nil
}

// freshLiveRuns counts a job's runs that have not ended, as the store has
// them (not the cache, which may not show a run another replica has just
// created).
func (s *JobService) freshLiveRuns(ctx context.Context, jobID string) (int, error) {
	c := s.c
	docs, err := c.acc.listLatest(ctx, kindRun, map[string]string{labelJob: jobID})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range docs {
		if p := d.Labels[labelPhase]; p == phasePending || p == phaseActive {
			n++
		}
	}
	return n, nil
}

// unmarkJob takes the mark of a refused delete off: it writes rec (the
// config as it was read before the mark) over fence (the version the mark
// made). A conflict means someone else wrote the config since (a delete
// that took over a mark no longer held, an edit): the mark is theirs to
// keep or take off. Any other failure leaves the mark until it is no
// longer held.
func (s *JobService) unmarkJob(ctx context.Context, rec *job.Record, fence string) {
	c := s.c
	next := rec.DeepCopy()
	next.Deleting = job.Deletion{}
	if _, err := c.acc.update(context.WithoutCancel(ctx), kindJob, rec.ID, fence, jobLabels(next), next); err != nil {
		c.o.log.V(1).Info("a refused delete's mark stays until it expires", "job", rec.ID, "error", err.Error())
	}
}

// jobLive checks on the store itself that job config id is there and not
// being deleted, for a run of it just stored (see fenceRun). It returns
// why the run must end and the error its create returns: ErrNotFound
// when the config is gone, a *errs.StateError when its delete is in
// progress. A mark no longer held is taken off by compare-and-swap, so
// that its delete, if it was only slow, conflicts and looks again.
func (s *JobService) jobLive(ctx context.Context, id string) (string, error) {
	c := s.c
	for attempt := 0; ; attempt++ {
		rec, err := c.jobs.freshJob(ctx, id)
		switch {
		case errs.IsNotFound(err):
			return "its job config was deleted while the run was being created", err
		case err != nil:
			return "its job config could not be read to check that it is not being deleted: " + err.Error(), err
		case rec.Deleting.IsZero():
			return "", nil
		case c.markHolds(rec.Deleting.At, rec.Deleting.Replica):
			return "its job config is being deleted", jobDeleting(rec, "run")
		}
		next := rec.DeepCopy()
		next.Deleting = job.Deletion{}
		_, err = c.acc.update(ctx, kindJob, id, rec.Version, jobLabels(next), next)
		if err == nil {
			return "", nil
		}
		if errors.Is(err, errs.ErrConflict) && attempt < conflictRetries {
			continue // a newer version to judge
		}
		return "its job config could not be written to take off a delete's expired mark: " + err.Error(), err
	}
}
