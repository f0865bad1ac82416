package dlc

import (
	"context"
	"github.com/aidlc/dlc/auth"
	"time"

	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/internal/platform"
	"github.com/aidlc/dlc/job"
)

// Jobs returns the client's job configs.
func (c *Client) Jobs() *JobService { return &JobService{c.e.Jobs(), c} }

// JobService is the job configurations of a Client (J1–J17).
type JobService struct {
	s *platform.JobService
	c *Client
}

// Create validates a job config and saves it (J12): every rule a config can
// break, its package (a local file is inspected: at most 100 MB and a
// ZIP, J5; one in COS too when the client has WithCOS), and its
// references — the existing cluster, the cluster group, the resource
// group — must resolve. An on-demand config whose minimum cluster could
// never fit its resource group's whole quota is refused; one that fits
// only later is saved, and its runs wait.
func (s *JobService) Create(ctx context.Context, cfg *job.Config, opts SaveOptions) (*job.Record, error) {
	if err := s.c.mayConfig(ctx, auth.CreateJob, configResource(auth.KindJob, "", UserFrom(ctx), cfg), cfg); err != nil {
		return nil, err
	}
	rec, err := s.s.Create(ctx, cfg, opts)
	return replayed(ctx, auth.KindJob, opts.RequestID, rec, err, recordCreator)
}

// Get returns a saved job config.
func (s *JobService) Get(ctx context.Context, id string) (*job.Record, error) {
	return s.c.jobs().may(ctx, auth.DescribeJob, id)
}

// List returns the job list with every J13 column, by id: every config,
// or those the options select (their Limit and Continue are ListPage's).
func (s *JobService) List(ctx context.Context, opts ...JobListOptions) ([]job.ListEntry, error) {
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

// ListPage returns one page of the job list that opts selects (creator,
// mode, resource, name, created after), by id: at most opts.Limit entries,
// and Continue, the token of the next page.
func (s *JobService) ListPage(ctx context.Context, opts JobListOptions) (*JobListPage, error) {
	return filteredPage(ctx, s.c.gate(), auth.DescribeJob, jobResource, func(keep func(*job.Record) bool) (*JobListPage, error) {
		return s.s.ListPage(ctx, opts, keep)
	})
}

// Events returns a job config's operation log, oldest first: what its
// schedule keeps doing (a tick skipped for the same reason, tick after
// tick) is one entry, counted (event.Event.Count).
func (s *JobService) Events(ctx context.Context, id string) ([]event.Event, error) {
	if err := s.c.jobs().check(ctx, auth.DescribeJob, id); err != nil {
		return nil, err
	}
	return s.s.Events(ctx, id)
}

// Update saves rec.Config as the job's new revision (J15). rec.Version must
// be the version read (a stale edit is a conflict). Only the package,
// entrypoint, storage mounts and runtime environment (J15), and the
// schedule, the deadline and the retry limit (L1–L3), may change; anything
// else is an error naming the field. Runs already started keep the
// revision they started from. A config whose delete is in progress is
// not edited (*StateError, see job.Deletion).
func (s *JobService) Update(ctx context.Context, rec *job.Record) (*job.Record, error) {
	if s.c.gate().on() && rec != nil {
		cur, err := s.c.jobs().may(ctx, auth.UpdateJob, rec.ID)
		if err != nil {
			return nil, err
		}
		if err := s.c.mayConfig(ctx, auth.UpdateJob, configResource(auth.KindJob, cur.ID, cur.Creator, &rec.Config), &rec.Config); err != nil {
			return nil, err
		}
	}
	return s.s.Update(ctx, rec)
}

// Clone saves a copy of a job config under a new name (J16); an empty name
// gives "<name> (copy)".
func (s *JobService) Clone(ctx context.Context, id, name string) (*job.Record, error) {
	if s.c.gate().on() {
		src, err := s.c.jobs().may(ctx, auth.DescribeJob, id)
		if err != nil {
			return nil, err
		}
		if err := s.c.mayConfig(ctx, auth.CreateJob, configResource(auth.KindJob, "", UserFrom(ctx), &src.Config), &src.Config); err != nil {
			return nil, err
		}
	}
	return s.s.Clone(ctx, id, name)
}

// Delete deletes a job config; it is refused while a run of it has not
// ended (J17), as the store has its runs. It is fenced against a run of
// the config created meanwhile through any client: either the delete is
// refused, or the run fails at once and Runs().Create returns ErrNotFound
// (the config was deleted) or a *StateError (its delete is in progress);
// when the run was stored just before the delete began, both fail. A
// second delete while one is in progress follows it (see job.Deletion).
func (s *JobService) Delete(ctx context.Context, id string) error {
	if err := s.c.jobs().check(ctx, auth.DeleteJob, id); err != nil {
		return err
	}
	return s.s.Delete(ctx, id)
}

// SuspendSchedule stops a job config's schedule (L1): no tick starts a
// run until ResumeSchedule; runs already started go on. A config without
// a schedule is an ErrState.
func (s *JobService) SuspendSchedule(ctx context.Context, id string) (*job.Record, error) {
	if err := s.c.jobs().check(ctx, auth.UpdateJob, id); err != nil {
		return nil, err
	}
	return s.s.SuspendSchedule(ctx, id)
}

// ResumeSchedule starts a suspended schedule again. Its ticks count from
// now: the ticks that passed while it was suspended start nothing.
func (s *JobService) ResumeSchedule(ctx context.Context, id string) (*job.Record, error) {
	if err := s.c.jobs().check(ctx, auth.UpdateJob, id); err != nil {
		return nil, err
	}
	return s.s.ResumeSchedule(ctx, id)
}

// NextTicks returns the next n (at most job.MaxNextTimes) times a job
// config's schedule fires, from now on the client's clock, in the
// schedule's time zone; none while it is suspended. A config without a
// schedule is an ErrState.
func (s *JobService) NextTicks(ctx context.Context, id string, n int) ([]time.Time, error) {
	if err := s.c.jobs().check(ctx, auth.DescribeJob, id); err != nil {
		return nil, err
	}
	return s.s.NextTicks(ctx, id, n)
}

// PlanRun says what Runs().Create(jobID) would do now, writing nothing:
// the run the config's current revision makes, what the backend would
// write for it (an on-demand run's RayJob, or the Ray Jobs API request
// of a run on a cluster), the reservation an on-demand run's admission
// makes and, when it does not fit now, what it lacks and its would-be
// place in the resource group's queue.
func (s *JobService) PlanRun(ctx context.Context, jobID string) (*Plan, error) {
	if err := s.c.mayRun(ctx, jobID); err != nil {
		return nil, err
	}
	return s.s.PlanRun(ctx, jobID)
}
