package platform

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/watch"
)

// Watch tells of every change of the selected clusters, from this
// client's cache (the store's watch), on the channel it returns, until
// ctx is done or the client closes; then it closes the channel. Changes
// the caller has not read yet are merged per cluster, so a slow reader
// misses none and gets each cluster as it last is.
func (s *ClusterService) Watch(ctx context.Context, opts watch.ClusterOptions) (<-chan watch.ClusterEvent, error) {
	if err := s.c.watchable(ctx); err != nil {
		return nil, err
	}
	out := make(chan watch.ClusterEvent)
	watchTyped(s.c, ctx, kindCluster, nil, opts.IDs, opts.Initial, out, func(id string, t watch.EventType) (watch.ClusterEvent, bool) {
		ev := watch.ClusterEvent{Type: t, ID: id}
		if t == watch.Deleted {
			return ev, true
		}
		cl, v, err := fromCache[cluster.Cluster](s.c, kindCluster, id)
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
	if err := s.c.watchable(ctx); err != nil {
		return nil, err
	}
	var sel map[string]string
	if opts.JobID != "" {
		sel = map[string]string{labelJob: opts.JobID}
	}
	out := make(chan watch.RunEvent)
	watchTyped(s.c, ctx, kindRun, sel, opts.IDs, opts.Initial, out, func(id string, t watch.EventType) (watch.RunEvent, bool) {
		ev := watch.RunEvent{Type: t, ID: id}
		if t == watch.Deleted {
			return ev, true
		}
		r, v, err := fromCache[job.Run](s.c, kindRun, id)
		if err != nil {
			return ev, false
		}
		r.Version = v
		s.c.rederive(r)
		ev.Run = r
		return ev, true
	})
	return out, nil
}

// watchTyped runs a watch whose events read, converts and sends on out,
// which it closes when the watch ends.
func watchTyped[E any](c *Engine, ctx context.Context, kind string, sel map[string]string, ids []string, initial bool, out chan<- E, read func(string, watch.EventType) (E, bool)) {
	c.watch(ctx, kind, sel, ids, initial, func(id string, t watch.EventType) bool {
		ev, ok := read(id, t)
		if !ok {
			return true
		}
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
		case <-c.ctx.Done():
		}
		return false
	}, func() { close(out) })
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
	return waitFor(ctx, s.c, "cluster", id, s.c.getCluster, events,
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
	return waitFor(ctx, s.c, "run", id, s.c.getRun, events,
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

// waitFor is a wait of kind/id: the object as get reads it now, then as
// the watch's events bring it, until cond holds or fails; seen says what
// it last was, for the error of a wait that ends first.
func waitFor[T, E any](ctx context.Context, c *Engine, kind, id string, get func(context.Context, string) (*T, error),
	events <-chan E, unpack func(E) (watch.EventType, *T), seen func(*T) string, cond func(*T) (bool, error)) (*T, error) {
	obj, err := get(ctx, id)
	for err == nil {
		var done bool
		if done, err = cond(obj); done || err != nil {
			break
		}
		ev, ok := <-events
		if !ok {
			err = c.waitEnded(ctx, kind, id, seen(obj))
			break
		}
		t, next := unpack(ev)
		if t == watch.Deleted {
			err = fmt.Errorf("%s %s was deleted while waited for (last seen %s): %w", kind, id, seen(obj), errs.NotFound(kind, id))
			break
		}
		obj = next
	}
	return obj, err
}

// watchable says why a watch cannot begin: ctx done, or the client
// closed.
func (c *Engine) watchable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.ctx.Err() != nil {
		return errs.Unavailable("watch", errClosed)
	}
	return nil
}

// waitEnded is the error of a wait whose watch ended before its
// condition held: ctx done, or the client closed.
func (c *Engine) waitEnded(ctx context.Context, kind, id, seen string) error {
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("waiting for %s %s, last seen %s: %w", kind, id, seen, err)
	}
	return errs.Unavailable("wait for "+kind+" "+id, fmt.Errorf("the client closed; last seen %s: %w", seen, errClosed))
}

var errClosed = errors.New("client closed")
