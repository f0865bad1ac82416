package dlc

import (
	"context"
	"github.com/aidlc/dlc/auth"

	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/internal/platform"
	"github.com/aidlc/dlc/job"
)

// Runs returns the client's runs.
func (c *Client) Runs() *RunService { return &RunService{c.e.Runs(), c} }

// RunService is the runs (task instances) of a Client's job configs
// (J14, J18, J19).
type RunService struct {
	s *platform.RunService
	c *Client
}

// Pending says why a waiting run waits and where (J18): an on-demand
// run's position in its resource group's queue, how many runs are ahead,
// and what quota it lacks; a run on a cluster or a group, the clusters it
// waits for and in what state. The queue is derived from the stored runs,
// so every client over the store answers the same. A run that no longer
// waits is a *StateError.
func (s *RunService) Pending(ctx context.Context, id string) (*job.Pending, error) {
	if err := s.c.runs().check(ctx, auth.DescribeRun, id); err != nil {
		return nil, err
	}
	p, err := s.s.Pending(ctx, id)
	if err != nil || p == nil || !s.c.gate().on() {
		return p, err
	}
	// The clusters it waits for that the user may describe: a group's
	// members may be other teams'.
	p.Clusters, err = keepAllowed(ctx, s.c.gate(), auth.DescribeCluster, p.Clusters, func(w job.ClusterWait) auth.Resource {
		return s.c.clusters().resourceOf(ctx, w.ID)
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Create starts a new run of a job config's current revision (J14). The
// run is queued, then waits with a reason while it cannot be placed
// (J18), is provisioning while its cluster comes up or its job is
// submitted, runs, and ends succeeded, failed or stopped. A run of a
// config whose cluster or cluster group is gone fails at once, saying so
// (J19).
//
// A config whose delete is in progress runs nothing (*StateError). When a
// delete of the config, through any client, begins while the run is being
// created and does not see the run, the run fails at once, saying so, and
// Create returns ErrNotFound for the config (deleted) or a *StateError
// (its delete still in progress); the failed run stays in the run list,
// and a retry with the same request id returns it (see job.Deletion).
func (s *RunService) Create(ctx context.Context, jobID string, opts RunOptions) (*job.Run, error) {
	if err := s.c.mayRun(ctx, jobID); err != nil {
		return nil, err
	}
	r, err := s.s.Create(ctx, jobID, opts)
	return replayed(ctx, auth.KindRun, opts.RequestID, r, err, runCreator)
}

// Get returns a run.
func (s *RunService) Get(ctx context.Context, id string) (*job.Run, error) {
	return s.c.runs().may(ctx, auth.DescribeRun, id)
}

// Wait waits until cond holds for the run and returns it as cond last saw
// it, as Clusters().Wait does for a cluster. job.Ended and job.InState
// make the usual conditions:
//
//	r, err := c.Runs().Wait(ctx, id, job.Ended)
func (s *RunService) Wait(ctx context.Context, id string, cond func(*job.Run) (bool, error)) (*job.Run, error) {
	if err := s.c.runs().check(ctx, auth.DescribeRun, id); err != nil {
		return nil, err
	}
	return s.s.Wait(ctx, id, cond)
}

// Watch tells of every change of the selected runs (e.g. every run of a
// job config), as Clusters().Watch does of clusters.
func (s *RunService) Watch(ctx context.Context, opts RunWatchOptions) (<-chan RunEvent, error) {
	in, err := s.s.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watchAllowed(ctx, s.c.gate(), auth.DescribeRun, auth.KindRun, in, func(e RunEvent) string { return e.ID },
		func(e RunEvent) (auth.Resource, bool) {
			if e.Run == nil {
				return auth.Resource{}, false
			}
			return runResource(e.Run), true
		},
		func(id string) RunEvent { return RunEvent{Type: Deleted, ID: id} }), nil
}

// ListPage returns one page of the runs opts selects, in submission
// order: at most opts.Limit, and Continue, the token of the next page. It
// reads the client's cache and copies only the page.
func (s *RunService) ListPage(ctx context.Context, opts RunListOptions) (*RunPage, error) {
	return filteredPage(ctx, s.c.gate(), auth.DescribeRun, runResource, func(keep func(*job.Run) bool) (*RunPage, error) {
		return s.s.ListPage(ctx, opts, keep)
	})
}

// List returns every run, or those the options select (their Limit and
// Continue are ListPage's), in submission order.
func (s *RunService) List(ctx context.Context, opts ...RunListOptions) ([]*job.Run, error) {
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

// Stop stops a run that has not ended; its Ray job is stopped and its
// on-demand cluster, if any, released.
func (s *RunService) Stop(ctx context.Context, id string) (*job.Run, error) {
	if err := s.c.runs().check(ctx, auth.StopRun, id); err != nil {
		return nil, err
	}
	return s.s.Stop(ctx, id)
}

// Logs returns what a run has logged so far: from Ray while Ray has the
// run; once the run has ended and Ray's record is gone with its cluster
// (an on-demand run's, or a cluster hibernated or deleted since), the
// tail kept when it ended (at most job.MaxLogTailLines lines and
// job.MaxLogTailBytes bytes, after a line saying how many earlier lines
// were not kept).
func (s *RunService) Logs(ctx context.Context, id string) ([]string, error) {
	if err := s.c.runs().check(ctx, auth.ReadRunLogs, id); err != nil {
		return nil, err
	}
	return s.s.Logs(ctx, id)
}

// Follow sends a run's log lines on the channel it returns as they come:
// what it has logged so far, new lines while it runs (read every half
// second), the last ones once it has ended; then it closes the channel,
// as it does when ctx is done or the client closes. Each line is sent
// once.
func (s *RunService) Follow(ctx context.Context, id string) (<-chan string, error) {
	if err := s.c.runs().check(ctx, auth.ReadRunLogs, id); err != nil {
		return nil, err
	}
	return s.s.Follow(ctx, id)
}

// Events returns a run's event log, oldest first; a system entry
// repeated is one entry, counted (event.Event.Count).
func (s *RunService) Events(ctx context.Context, id string) ([]event.Event, error) {
	if err := s.c.runs().check(ctx, auth.DescribeRun, id); err != nil {
		return nil, err
	}
	return s.s.Events(ctx, id)
}
