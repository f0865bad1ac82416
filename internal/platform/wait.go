package platform

import (
	"context"
	"strings"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/internal/views"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/watch"
)

// Watch tells of every change of the selected clusters, from this
// client's cache (the store's watch), on the channel it returns, until
// ctx is done or the client closes; then it closes the channel. Changes
// the caller has not read yet are merged per cluster, so a slow reader
// misses none and gets each cluster as it last is.
func (s *ClusterService) Watch(ctx context.Context, opts watch.ClusterOptions) (<-chan watch.ClusterEvent, error) {
	if err := s.c.views.Watchable(ctx); err != nil {
		return nil, err
	}
	out := make(chan watch.ClusterEvent)
	views.Typed(s.c.views, ctx, kindCluster, nil, opts.IDs, opts.Initial, out, func(id string, t watch.EventType) (watch.ClusterEvent, bool) {
		ev := watch.ClusterEvent{Type: t, ID: id}
		if t == watch.Deleted {
			return ev, true
		}
		cl, v, err := fromCache[cluster.Cluster](s.c.acc, kindCluster, id)
		if err != nil {
			return ev, false // deleted since (its event follows), or corrupt
		}
		cl.Version, ev.Cluster = v, cl
		return ev, true
	})
	return out, nil
}

// Watch tells of every change of the selected runs, as ClusterService's
// Watch does of clusters.
func (s *RunService) Watch(ctx context.Context, opts watch.RunOptions) (<-chan watch.RunEvent, error) {
	if err := s.c.views.Watchable(ctx); err != nil {
		return nil, err
	}
	var sel map[string]string
	if opts.JobID != "" {
		sel = map[string]string{labelJob: opts.JobID}
	}
	out := make(chan watch.RunEvent)
	views.Typed(s.c.views, ctx, kindRun, sel, opts.IDs, opts.Initial, out, func(id string, t watch.EventType) (watch.RunEvent, bool) {
		ev := watch.RunEvent{Type: t, ID: id}
		if t == watch.Deleted {
			return ev, true
		}
		r, v, err := fromCache[job.Run](s.c.acc, kindRun, id)
		if err != nil {
			return ev, false
		}
		r.Version = v
		s.c.runs.rederive(r)
		ev.Run = r
		return ev, true
	})
	return out, nil
}

// Wait waits until cond holds for the cluster, and returns the cluster as
// cond last saw it. cond is called with the cluster as it is now, then at
// each change the client sees (changes it did not see in time are merged:
// it sees the latest), until it reports done or an error, which Wait
// returns. Wait ends with an error when ctx is done (wrapping ctx's error,
// and saying the state it last saw), when the cluster is deleted
// (ErrNotFound), or when the client closes (ErrUnavailable). Conditions
// for the usual waits are in package cluster (e.g. cluster.InState).
func (s *ClusterService) Wait(ctx context.Context, id string, cond func(*cluster.Cluster) (bool, error)) (*cluster.Cluster, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the watch
	events, err := s.Watch(wctx, watch.ClusterOptions{IDs: []string{id}})
	if err != nil {
		return nil, err
	}
	return views.WaitFor(ctx, "cluster", id, s.getCluster, events,
		func(ev watch.ClusterEvent) (watch.EventType, *cluster.Cluster) { return ev.Type, ev.Cluster },
		func(cl *cluster.Cluster) string { return strings.TrimSpace(string(cl.State) + " " + cl.Reason) }, cond)
}

// Wait waits until cond holds for the run, as ClusterService's Wait does
// for a cluster. Conditions for the usual waits are in package job (e.g.
// job.Ended).
func (s *RunService) Wait(ctx context.Context, id string, cond func(*job.Run) (bool, error)) (*job.Run, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the watch
	events, err := s.Watch(wctx, watch.RunOptions{IDs: []string{id}})
	if err != nil {
		return nil, err
	}
	return views.WaitFor(ctx, "run", id, s.getRun, events,
		func(ev watch.RunEvent) (watch.EventType, *job.Run) { return ev.Type, ev.Run },
		func(r *job.Run) string {
			seen := string(r.State)
			if r.WaitReason != "" {
				seen += " (" + string(r.WaitReason) + ")"
			}
			if r.Message != "" {
				seen += ": " + r.Message
			}
			return seen
		}, cond)
}

// errClosed is the cause of a call refused because the client closed.
var errClosed = views.ErrClosed
