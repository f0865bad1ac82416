package platform

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
	// labelDay is a usage record's day (usage.Day of its start), which
	// compaction lists them by; labelCompacted marks a compacted one.
	labelDay       = "day"
	labelMonth     = "month"
	labelCompacted = "compacted"
)

// usageLabels are a usage record's labels: its cluster, its day, and
// whether it is compacted.
func usageLabels(r *usage.Record) map[string]string {
	l := map[string]string{labelOn: r.Cluster, labelDay: usage.Day(r.Start), labelMonth: usage.Month(r.Start)}
	if r.Compacted {
		l[labelCompacted] = "1"
	}
	return l
}

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
	attr, err := r.attribution(ctx, id, cl, cur)
	if err != nil {
		return 0, err
	}
	if cur == nil {
		if len(nodes) == 0 {
			return 0, nil // nothing runs and nothing ran: no meter yet
		}
		// Since is Ray's own time of the change: trusted as it is, as a
		// replica whose clock is behind would otherwise bill from before
		// Ray ran anything.
		start := now
		if !obs.Since.IsZero() {
			start = obs.Since
		}
		open := usage.Record{ID: id, Attribution: attr, Start: start, End: later(now, start), Open: true, Nodes: nodes}
		if _, err := r.acc.create(ctx, kindMeter, id, nil, open); err != nil {
			return 0, err
		}
		r.metrics.metered(attr, nodes, open.End.Sub(start), r.cat.Nodes)
		return min(every, nextMidnight(start).Sub(now)), nil
	}
	sameNodes := usage.SameNodes(cur.Nodes, nodes)
	same := sameNodes && cur.Attribution.Equal(attr)
	var t time.Time // when the open interval ends, on a change
	if same {
		r.meters.forget(id) // a change seen and undone since
	} else {
		t = r.closeAt(cur, obs, gone, r.meters.firstSeen(id, cur, nodes, now), sameNodes)
	}
	if len(cur.Nodes) > 0 {
		// An interval ends at each UTC midnight, so that every record lies
		// in one day (compaction adds up days): up to the change, or now.
		until := now
		if !same {
			until = t
		}
		if m := nextMidnight(cur.Start); !m.After(until) {
			return 0, r.moveOn(ctx, id, version, cur, m)
		}
	}
	if same {
		if len(nodes) == 0 {
			if cl == nil && gone {
				return 0, ignoreNotFound(r.store.Delete(ctx, kindMeter, id, version))
			}
			return 0, nil
		}
		if since := now.Sub(cur.End); since < every {
			return min(every-since, nextMidnight(cur.Start).Sub(now)), nil
		}
		next := *cur
		next.End = now
		if _, err := r.acc.update(ctx, kindMeter, id, version, nil, next); err != nil {
			return 0, err
		}
		r.metrics.metered(cur.Attribution, cur.Nodes, now.Sub(cur.End), r.cat.Nodes)
		return min(every, nextMidnight(cur.Start).Sub(now)), nil
	}
	// Something changed: the open interval ends at t.
	if len(cur.Nodes) > 0 && t.After(cur.Start) {
		end, err := r.closeRecord(ctx, id, cur, t)
		if err != nil {
			return 0, err
		}
		if end.Before(t) {
			// An earlier attempt closed it sooner and its meter's write did
			// not come: what ran from then until this change is the meter's
			// nodes, its own interval.
			return 0, r.moveOn(ctx, id, version, cur, end)
		}
		t = end
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
	return min(every, nextMidnight(t).Sub(now)), nil
}

// closeRecord stores the record of cur's interval ended at t, and returns
// its end: t, or, when it was stored already (an earlier attempt, another
// replica), the end stored, which is the interval's.
func (r meterReconciler) closeRecord(ctx context.Context, id string, cur *usage.Record, t time.Time) (time.Time, error) {
	rec := *cur
	rec.ID, rec.End, rec.Open = recordID(id, cur.Start), t, false
	_, err := r.acc.create(ctx, kindUsage, rec.ID, usageLabels(&rec), rec)
	switch {
	case errors.Is(err, errs.ErrConflict):
		got, _, gerr := fresh[usage.Record](ctx, r.acc, kindUsage, rec.ID)
		if gerr != nil {
			return time.Time{}, gerr
		}
		return got.End, nil
	case err != nil:
		return time.Time{}, err
	}
	r.metrics.metered(cur.Attribution, cur.Nodes, t.Sub(cur.End), r.cat.Nodes)
	return t, nil
}

// moveOn ends the open interval cur at m (a UTC midnight that has passed,
// or where an earlier attempt ended it), its record created or found,
// and moves the meter to the same nodes from that end on; the meter's
// write queues its next step.
func (r meterReconciler) moveOn(ctx context.Context, id, version string, cur *usage.Record, m time.Time) error {
	end, err := r.closeRecord(ctx, id, cur, m)
	if err != nil {
		return err
	}
	next := *cur
	next.Start = end
	if next.End.Before(end) {
		next.End = end
	}
	_, err = r.acc.update(ctx, kindMeter, id, version, nil, next)
	return err
}

// nextMidnight is the first UTC midnight after t.
func nextMidnight(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
}

// closeAt is when the open interval cur ends, now that a step sees a
// change. A change of Ray's nodes is dated where Ray says (obs.Since), if
// that is within the interval; Ray's time is trusted as it is (a replica
// whose clock is off would otherwise misdate it). Any other change (whom
// it bills, a Ray that does not say, a Since from before the interval: a
// restarted informer's) is dated when this client first saw it (seen: a
// step that failed is retried later), unless no step had looked at a
// running interval for more than two metering intervals (every client
// was down): it then ends where it was last known to run, so that time
// nobody saw is not billed. An idle interval (no nodes) never ends before
// it is seen to: the time it was idle is not billed.
func (r meterReconciler) closeAt(cur *usage.Record, obs cluster.Observation, gone bool, seen time.Time, sameNodes bool) time.Time {
	switch {
	case !gone && !sameNodes && obs.Since.After(cur.Start):
		return obs.Since
	case len(cur.Nodes) > 0 && seen.Sub(cur.End) > 2*r.o.meterEvery:
		return later(cur.End, cur.Start)
	}
	return later(seen, cur.Start)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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
func (r meterReconciler) attribution(ctx context.Context, id string, cl *cluster.Cluster, prev *usage.Record) (usage.Attribution, error) {
	if cl == nil {
		if prev != nil {
			return prev.Attribution, nil
		}
		return usage.Attribution{Cluster: id}, nil // Ray runs what is no longer stored
	}
	a := usage.Attribution{Cluster: cl.ID, ClusterName: cl.Spec.Name, ResourceGroup: cl.Spec.ResourceGroup,
		ResourcePackage: cl.Spec.ResourcePackage, Creator: cl.Creator, Tags: cl.Spec.Tags, Temporary: cl.Temporary, Run: cl.OwnerRun}
	if len(cl.Spec.Groups) > 0 {
		a.ClusterGroups = slices.Sorted(slices.Values(cl.Spec.Groups))
	}
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
		} else if !errs.IsNotFound(err) {
			return a, err
		}
	}
	return a, nil
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
	ends := map[string]time.Time{} // the records' ends, by id
	// A record lies in one UTC day (its meter ends an interval at each
	// midnight): the months of the span's days hold every record in it.
	for month := from.UTC().AddDate(0, 0, -from.UTC().Day()+1).Truncate(24 * time.Hour); month.Before(to); month = month.AddDate(0, 1, 0) {
		recs, _, err := c.latestRecords(ctx, kindUsage, map[string]string{labelMonth: usage.Month(month)})
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			ends[rec.ID] = rec.End
			if len(rec.Nodes) > 0 && rec.Start.Before(to) && rec.End.After(from) {
				out = append(out, *rec)
			}
		}
	}
	meters, _, err := c.latestRecords(ctx, kindMeter, nil)
	if err != nil {
		return nil, err
	}
	for _, rec := range meters {
		if end, ok := ends[recordID(rec.ID, rec.Start)]; ok && end.After(rec.Start) {
			// Its interval was closed and the meter's move has not come
			// yet (a failure between the two writes): the record holds
			// the interval up to its end, the meter what ran since.
			rec.Start = end
		}
		rec.End = later(rec.End, now) // as far as its meter knows, it still runs
		if len(rec.Nodes) > 0 && rec.Start.Before(to) && rec.End.After(from) {
			out = append(out, *rec)
		}
	}
	slices.SortFunc(out, func(a, b usage.Record) int {
		return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.Cluster, b.Cluster))
	})
	return out, nil
}

// latestRecords returns the usage records or meters (kind) that sel
// selects, as the store has them, decoded, with their versions.
func (c *Engine) latestRecords(ctx context.Context, kind string, sel map[string]string) ([]*usage.Record, []string, error) {
	docs, err := c.acc.listLatest(ctx, kind, sel)
	if err != nil {
		return nil, nil, err
	}
	recs, versions := make([]*usage.Record, 0, len(docs)), make([]string, 0, len(docs))
	for _, d := range docs {
		rec, err := decode[usage.Record](d)
		if err != nil {
			return nil, nil, err
		}
		rec.ID = d.ID // the stored id, whatever the content says
		recs, versions = append(recs, rec), append(versions, d.Version)
	}
	return recs, versions, nil
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
	nodes []usage.Node
	at    time.Time
}

// firstSeen returns when this client first saw cluster id's nodes become
// nodes while its interval cur ran, now if this is the first time.
func (n *meterNotes) firstSeen(id string, cur *usage.Record, nodes []usage.Node, now time.Time) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	// A change seen before the interval began (split at midnight since) is
	// another change.
	if s, ok := n.seen[id]; ok && !s.at.Before(cur.Start) && usage.SameNodes(s.nodes, nodes) && !s.at.After(now) {
		return s.at
	}
	if n.seen == nil {
		n.seen = map[string]seenChange{}
	}
	n.seen[id] = seenChange{nodes: nodes, at: now}
	return now
}

// forget drops what is remembered of cluster id's change.
func (n *meterNotes) forget(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.seen, id)
}

// Compaction of usage records (WithUsageCompaction): the records of a
// UTC day older than the compaction's age are added up into one record
// per cluster and attribution (usage.Compact, id usage.CompactedID), then
// deleted. Each record is added first and deleted second; a compacted
// record says up to which start it holds its cluster's records
// (Through), so that a record added and not yet deleted (a crash, another
// replica) is neither added again nor counted twice by a report. Days
// are taken in order from a mark (kind usagemark), one step at a time:
// a record closed after its day was compacted (an interval that ran for
// longer than the age) stays as it is.
const (
	kindCompaction = "usagecompaction" // the runner's key: usagecompaction/all
	kindUsageMark  = "usagemark"
	markID         = "compaction"
	// maxCompactDays bounds the days one step compacts.
	maxCompactDays = 7
)

// usageMark is how far compaction has come: every day up to Through
// (usage.Day) is compacted.
type usageMark struct {
	Through string `json:"through"`
}

// compactionReconciler takes the compaction a step.
type compactionReconciler struct{ *Engine }

func (r compactionReconciler) Reconcile(ctx context.Context, _ string) (runner.Result, error) {
	after, err := r.compact(ctx)
	return runner.Result{After: after}, err
}

// GiveUp logs that compaction keeps failing; it goes on, its backoff
// growing: nothing is lost while the records stay as they are.
func (r compactionReconciler) GiveUp(_ context.Context, _, why string) error {
	r.o.log.Error(errors.New(why), "compacting usage records keeps failing; they stay as they are")
	return runner.ErrRetry
}

func (compactionReconciler) LogKey() string { return "usage" }

// compact compacts the days that are old enough, up to maxCompactDays of
// them, and returns when to look again.
func (r compactionReconciler) compact(ctx context.Context) (time.Duration, error) {
	cutoff := r.clock.Now().Add(-r.o.compactAfter)
	mark, version, err := fresh[usageMark](ctx, r.acc, kindUsageMark, markID)
	if errs.IsNotFound(err) {
		mark, version = nil, ""
	} else if err != nil {
		return 0, err
	}
	var day time.Time
	if mark != nil {
		last, err := time.Parse("20060102", mark.Through)
		if err != nil {
			return 0, fmt.Errorf("usage compaction: the mark %q: %w", mark.Through, err)
		}
		day = last.AddDate(0, 0, 1)
	} else {
		// The first compaction: from the day of the oldest record.
		recs, _, err := r.latestRecords(ctx, kindUsage, nil)
		if err != nil {
			return 0, err
		}
		for _, rec := range recs {
			if s := rec.Start.UTC().Truncate(24 * time.Hour); day.IsZero() || s.Before(day) {
				day = s
			}
		}
		if day.IsZero() {
			return time.Hour, nil // nothing recorded yet
		}
	}
	for range maxCompactDays {
		if day.AddDate(0, 0, 1).After(cutoff) {
			return min(time.Hour, day.AddDate(0, 0, 1).Sub(cutoff)+time.Second), nil
		}
		if err := r.compactDay(ctx, day); err != nil {
			return 0, err
		}
		next := usageMark{Through: usage.Day(day)}
		if version == "" {
			version, err = r.acc.create(ctx, kindUsageMark, markID, nil, next)
		} else {
			version, err = r.acc.update(ctx, kindUsageMark, markID, version, nil, next)
		}
		if err != nil {
			return 0, err // a conflict: another replica moved it; look again
		}
		day = day.AddDate(0, 0, 1)
	}
	return time.Second, nil // more days to do
}

// compactDay adds the records that started on day up into their
// compacted records, and deletes them.
func (r compactionReconciler) compactDay(ctx context.Context, day time.Time) error {
	recs, versions, err := r.latestRecords(ctx, kindUsage, map[string]string{labelDay: usage.Day(day)})
	if err != nil {
		return err
	}
	type stored struct {
		rec     *usage.Record
		version string
	}
	compacted := map[string]stored{}
	var plain []stored
	for i, rec := range recs {
		if rec.Compacted {
			compacted[rec.ID] = stored{rec, versions[i]}
		} else {
			plain = append(plain, stored{rec, versions[i]})
		}
	}
	slices.SortFunc(plain, func(a, b stored) int { return a.rec.Start.Compare(b.rec.Start) })
	for _, p := range plain {
		id := usage.CompactedID(*p.rec)
		for attempt := 0; ; attempt++ {
			cur := compacted[id]
			if cur.rec != nil && !p.rec.Start.After(cur.rec.Through) {
				break // added already
			}
			next := usage.Compact(cur.rec, id, *p.rec)
			var v string
			if cur.rec == nil {
				v, err = r.acc.create(ctx, kindUsage, id, usageLabels(&next), next)
			} else {
				v, err = r.acc.update(ctx, kindUsage, id, cur.version, usageLabels(&next), next)
			}
			if errors.Is(err, errs.ErrConflict) && attempt < conflictRetries {
				got, gv, gerr := fresh[usage.Record](ctx, r.acc, kindUsage, id)
				if gerr != nil {
					return gerr
				}
				compacted[id] = stored{got, gv}
				continue
			}
			if err != nil {
				return err
			}
			compacted[id] = stored{&next, v}
			break
		}
		if err := r.store.Delete(ctx, kindUsage, p.rec.ID, p.version); err != nil && !errs.IsNotFound(err) {
			return err
		}
	}
	return nil
}
