package platform

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/runner"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/usage"
)

// Metering records, once, every interval in which a cluster's compute
// ran (package usage). Its state is stored, so that replicas share it and
// a restart loses nothing:
//
//   - the meter of a cluster (kind "meter", id the cluster's) is its open
//     interval: since when Ray has run which nodes, billed to whom, and
//     until when that is known (End, written at least every
//     WithMeteringInterval); idle (no nodes) between runs;
//   - a closed interval is a usage record (kind "usage"), written once
//     under an id derived from the cluster and the interval's start, and
//     never changed.
//
// A change (Ray's nodes, the cluster's attribution) closes the open
// interval: the record is created first, then the meter moves on to the
// next interval by compare-and-swap. Should the meter's write not come
// (a crash, another replica first), the next step creates the same
// record again, finds it stored and takes its end for the next start: no
// interval is counted twice or dropped. The records are not cached: a
// report reads them from the store.
const (
	kindMeter = "meter"
	kindUsage = "usage"
)

// meterReconciler takes a cluster's meter a step: it compares what Ray
// runs of the cluster with its open interval.
type meterReconciler struct{ *Engine }

func (r meterReconciler) Reconcile(ctx context.Context, id string) (runner.Result, error) {
	after, err := r.meter(ctx, id)
	return runner.Result{After: after}, err
}

// GiveUp logs that the meter's steps keep failing; they go on, their
// backoff growing: the interval stays open (nothing is lost while it is)
// until a step gets through.
func (r meterReconciler) GiveUp(_ context.Context, id, why string) error {
	r.o.log.Error(errors.New(why), "metering a cluster keeps failing; its interval stays open", "cluster", id)
	return runner.ErrRetry
}

func (meterReconciler) LogKey() string { return "cluster" }

// recordID is the id of the usage record of the cluster's interval that
// starts at start.
func recordID(clusterID string, start time.Time) string {
	return clusterID + "." + strconv.FormatInt(start.UnixNano(), 36)
}

// meter is the meter's step; it returns when to look again.
func (r meterReconciler) meter(ctx context.Context, id string) (time.Duration, error) {
	// The meter as the cache has it: every write below is a create or a
	// compare-and-swap on its version, so a cache behind the store costs
	// a conflict and a step again, never an interval twice; and a meter
	// the cache has not seen yet queues this step again when it comes.
	cur, version, err := fromCache[usage.Record](r.acc, kindMeter, id)
	if errs.IsNotFound(err) {
		cur = nil
	} else if err != nil {
		return 0, err
	}
	cl, err := r.clusters.getCluster(ctx, id)
	if errs.IsNotFound(err) {
		cl = nil
	} else if err != nil {
		return 0, err
	}
	obs, err := r.ray.ClusterStatus(ctx, id)
	gone := errs.IsNotFound(err)
	if err != nil && !gone {
		return 0, err
	}
	var nodes []usage.Node
	if !gone {
		nodes = r.nodesOf(obs.Pods)
	}
	now := r.clock.Now()
	every := r.o.meterEvery
	if cur == nil {
		if len(nodes) == 0 {
			return 0, nil // nothing runs and nothing ran: no meter yet
		}
		start := now
		if !obs.Since.IsZero() && obs.Since.Before(now) {
			start = obs.Since
		}
		open := usage.Record{ID: id, Attribution: r.attribution(ctx, cl, nil), Start: start, End: now, Open: true, Nodes: nodes}
		if _, err := r.acc.create(ctx, kindMeter, id, nil, open); err != nil {
			return 0, err
		}
		r.metrics.metered(open.Attribution, nodes, now.Sub(start), r.cat.Nodes)
		return every, nil
	}
	attr := r.attribution(ctx, cl, cur)
	if usage.SameNodes(cur.Nodes, nodes) && cur.Attribution.Equal(attr) {
		if len(nodes) == 0 {
			if cl == nil && gone {
				return 0, ignoreNotFound(r.store.Delete(ctx, kindMeter, id, version))
			}
			return 0, nil
		}
		if since := now.Sub(cur.End); since < every {
			return every - since, nil
		}
		next := *cur
		next.End = now
		if _, err := r.acc.update(ctx, kindMeter, id, version, nil, next); err != nil {
			return 0, err
		}
		r.metrics.metered(cur.Attribution, cur.Nodes, now.Sub(cur.End), r.cat.Nodes)
		return every, nil
	}
	// Something changed: the open interval ends at t.
	if usage.SameNodes(cur.Nodes, nodes) {
		obs.Since = time.Time{} // whom it bills changed, not Ray's pods: dated when seen
	}
	t := r.closeAt(cur, obs, gone, r.meters.firstSeen(id, cur, nodes, now), now)
	if len(cur.Nodes) > 0 && t.After(cur.Start) {
		rec := *cur
		rec.ID, rec.End, rec.Open = recordID(id, cur.Start), t, false
		_, err := r.acc.create(ctx, kindUsage, rec.ID, map[string]string{labelOn: id}, rec)
		switch {
		case errors.Is(err, errs.ErrConflict):
			// Written already (an earlier attempt, another replica): what is
			// stored is the interval.
			got, _, gerr := fresh[usage.Record](ctx, r.acc, kindUsage, rec.ID)
			if gerr != nil {
				return 0, gerr
			}
			t = got.End
		case err != nil:
			return 0, err
		default:
			r.metrics.metered(cur.Attribution, cur.Nodes, t.Sub(cur.End), r.cat.Nodes)
		}
	}
	defer r.meters.forget(id)
	if len(nodes) == 0 && cl == nil && gone {
		return 0, ignoreNotFound(r.store.Delete(ctx, kindMeter, id, version))
	}
	next := usage.Record{ID: id, Attribution: attr, Start: t, End: t, Open: true, Nodes: nodes}
	if len(nodes) > 0 && now.After(t) {
		next.End = now
	}
	if _, err := r.acc.update(ctx, kindMeter, id, version, nil, next); err != nil {
		return 0, err
	}
	if len(nodes) == 0 {
		return 0, nil
	}
	r.metrics.metered(attr, nodes, next.End.Sub(t), r.cat.Nodes)
	return every, nil
}

// closeAt is when the open interval cur ends, now that a step sees a
// change: when Ray's nodes changed, where Ray says (obs.Since zero for a
// change of whom it bills) (clamped to the
// interval and now); else when this client first saw the change (seen:
// a step that failed is retried later), unless no step had looked for
// more than two metering intervals before (every client was down): the
// interval then ends where it was last known to run, so that time nobody
// saw is not billed.
func (r meterReconciler) closeAt(cur *usage.Record, obs cluster.Observation, gone bool, seen, now time.Time) time.Time {
	t := seen
	switch {
	case !gone && !obs.Since.IsZero():
		t = obs.Since
		if t.After(now) {
			t = now
		}
	case seen.Sub(cur.End) > 2*r.o.meterEvery:
		t = cur.End
	}
	if t.Before(cur.Start) {
		t = cur.Start
	}
	return t
}

// nodesOf is what the running pods are, per node group and spec.
func (r meterReconciler) nodesOf(pods []cluster.Pod) []usage.Node {
	type key struct {
		role, group, spec string
		each              quota.Resources
	}
	count := map[key]int{}
	for _, p := range pods {
		if p.Status != "Running" {
			continue
		}
		count[key{p.Role, p.Group, p.NodeSpec, p.Requests.Max(quota.Resources{})}]++
	}
	out := make([]usage.Node, 0, len(count))
	for k, n := range count {
		node := usage.Node{Group: k.group, Role: k.role, NodeSpec: k.spec, Count: n, Each: k.each}
		if s, ok := r.cat.Nodes.Lookup(k.spec); ok && k.each.GPU > 0 {
			node.GPUType = s.GPUType
		}
		out = append(out, node)
	}
	if len(out) == 0 {
		return nil
	}
	return usage.SortNodes(out)
}

// attribution is whom the cluster's compute is billed to now: cl as
// stored, or, once it is gone, what its open interval (prev) said.
func (r meterReconciler) attribution(ctx context.Context, cl *cluster.Cluster, prev *usage.Record) usage.Attribution {
	if cl == nil {
		if prev != nil {
			return prev.Attribution
		}
		return usage.Attribution{}
	}
	a := usage.Attribution{Cluster: cl.ID, ClusterName: cl.Spec.Name, ResourceGroup: cl.Spec.ResourceGroup,
		ResourcePackage: cl.Spec.ResourcePackage, Creator: cl.Creator, Tags: cl.Spec.Tags, Temporary: cl.Temporary, Run: cl.OwnerRun}
	if cl.Live != nil && cl.Live.ResourceGroup != "" {
		a.ResourceGroup = cl.Live.ResourceGroup
	} else if cl.QuotaGroup != "" {
		a.ResourceGroup = cl.QuotaGroup
	}
	if len(a.Tags) == 0 {
		a.Tags = nil
	}
	if cl.Temporary {
		if prev != nil && prev.Run == cl.OwnerRun && prev.JobConfig != "" {
			a.JobConfig = prev.JobConfig
		} else if run, err := r.runs.getRun(ctx, cl.OwnerRun); err == nil {
			a.JobConfig = run.JobID
		}
	}
	return a
}

// meterKeys queues the meter of every cluster that may run something and
// every open meter: the resync's share of metering.
func (c *Engine) meterKeys() []string {
	var keys []string
	for _, d := range c.cache.SelectDocs(kindMeter, nil) {
		keys = append(keys, kindMeter+"/"+d.ID)
	}
	for _, d := range c.cache.SelectDocs(kindCluster, nil) {
		if cluster.State(d.Labels[labelState]).HoldsQuota() {
			keys = append(keys, kindMeter+"/"+d.ID)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// usageRecords returns the usage records and the open intervals that
// overlap [from, to), as the store has them; an open interval runs until
// now, as far as its meter knows (the next change closes it when it was).
func (c *Engine) usageRecords(ctx context.Context, from, to time.Time) ([]usage.Record, error) {
	now := c.clock.Now()
	var out []usage.Record
	for _, kind := range []string{kindUsage, kindMeter} {
		docs, err := c.acc.listLatest(ctx, kind, nil)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			rec, err := decode[usage.Record](d)
			if err != nil {
				return nil, err
			}
			if kind == kindMeter && rec.End.Before(now) {
				rec.End = now
			}
			if len(rec.Nodes) == 0 || !rec.Start.Before(to) || !rec.End.After(from) {
				continue
			}
			out = append(out, *rec)
		}
	}
	slices.SortFunc(out, func(a, b usage.Record) int {
		return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.Cluster, b.Cluster))
	})
	return out, nil
}

// UsageRecords returns the usage records and the open intervals that
// overlap [from, to), as the store has them, by start.
func (c *Engine) UsageRecords(ctx context.Context, from, to time.Time) ([]usage.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.usageRecords(ctx, from, to)
}

// isMetered says whether a change of kind concerns no cache: usage
// records are read from the store, never kept.
func isMetered(d backend.Doc) bool { return d.Kind == kindUsage }

// meterNotes is what a client remembers between the steps of the meters
// it takes: when it first saw each change not yet recorded, so that a
// step retried after a failure closes the interval when the change was
// seen, not when the retry came. A restart forgets it: the change is then
// dated when it is seen again.
type meterNotes struct {
	mu   sync.Mutex
	seen map[string]seenChange
}

type seenChange struct {
	from  time.Time // the open interval's start the change ends
	nodes []usage.Node
	at    time.Time
}

// firstSeen returns when this client first saw cluster id's nodes become
// nodes while its interval from cur.Start ran, now if this is the first
// time.
func (n *meterNotes) firstSeen(id string, cur *usage.Record, nodes []usage.Node, now time.Time) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.seen[id]; ok && s.from.Equal(cur.Start) && usage.SameNodes(s.nodes, nodes) && !s.at.After(now) {
		return s.at
	}
	if n.seen == nil {
		n.seen = map[string]seenChange{}
	}
	n.seen[id] = seenChange{from: cur.Start, nodes: nodes, at: now}
	return now
}

// forget drops what is remembered of cluster id's change.
func (n *meterNotes) forget(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.seen, id)
}
