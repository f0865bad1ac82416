package soak_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
)

// tracker follows the store through a watch (every version of every
// document, as a replica's cache sees them, deletions included) and keeps
// what the rows and the invariants are made of.
type tracker struct {
	mu   sync.Mutex
	now  func() time.Time
	size map[string]map[string]int // kind → id → bytes of the last version

	// Clusters and runs: state and since when (by this watch's clock).
	state map[string]map[string]since // kind → id → state
	// Live runs by the cluster their config names.
	liveOn map[string]map[string]bool // cluster id → run ids
	// Each tick once: job/tick → the run of that tick (first attempts).
	ticks     map[string]string
	ticksOf   map[string]map[time.Time]bool // job id → ticks seen
	twice     []string                      // ticks with two runs
	jobs      map[string]*jobTicks          // job id → where its schedule stands
	abnormal  map[string]string             // cluster id → why, while abnormal
	abnormals int                           // clusters that became abnormal, in all

	made, succeeded, failed, stopped, deleted int // runs, in all
	hibernations                              int // clusters that became hibernated, in all
	changes                                   int
	wake                                      chan struct{} // a cluster hibernated, or a run waits
}

// since is a state and when it began.
type since struct {
	state string
	at    time.Time
}

// jobTicks is where a config's schedule stands: its record's last version
// and how many ticks were due through dueThrough.
type jobTicks struct {
	rec        job.Record
	due        int
	dueThrough time.Time
}

func newTracker(now func() time.Time) *tracker {
	return &tracker{now: now, size: map[string]map[string]int{}, state: map[string]map[string]since{},
		liveOn: map[string]map[string]bool{}, ticks: map[string]string{}, ticksOf: map[string]map[time.Time]bool{},
		jobs: map[string]*jobTicks{}, abnormal: map[string]string{}, wake: make(chan struct{}, 1)}
}

// on takes one change of the store.
func (tr *tracker) on(ch backend.Change) {
	d := ch.Doc
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.changes++
	if tr.size[d.Kind] == nil {
		tr.size[d.Kind] = map[string]int{}
	}
	if ch.Deleted {
		delete(tr.size[d.Kind], d.ID)
	} else {
		tr.size[d.Kind][d.ID] = len(d.Data)
	}
	switch d.Kind {
	case "cluster":
		tr.onCluster(d, ch.Deleted)
	case "run":
		tr.onRun(d, ch.Deleted)
	case "job":
		if ch.Deleted {
			delete(tr.jobs, d.ID)
			return
		}
		var rec job.Record
		if err := json.Unmarshal(d.Data, &rec); err != nil {
			return
		}
		rec.Events = nil
		j := tr.jobs[d.ID]
		if j == nil {
			j = &jobTicks{dueThrough: rec.CreatedAt}
			tr.jobs[d.ID] = j
		}
		j.rec = rec
	}
}

func (tr *tracker) setState(kind, id, st string) (old string) {
	if tr.state[kind] == nil {
		tr.state[kind] = map[string]since{}
	}
	prev, ok := tr.state[kind][id]
	switch {
	case st == "":
		delete(tr.state[kind], id)
	case !ok || prev.state != st:
		tr.state[kind][id] = since{st, tr.now()}
	}
	return prev.state
}

func (tr *tracker) onCluster(d backend.Doc, deleted bool) {
	st := d.Labels["state"]
	if deleted {
		st = ""
	}
	old := tr.setState("cluster", d.ID, st)
	if st == string(cluster.Abnormal) && old != st {
		var cl cluster.Cluster
		_ = json.Unmarshal(d.Data, &cl)
		tr.abnormal[d.ID] = cl.Reason
		tr.abnormals++
	} else if st != string(cluster.Abnormal) {
		delete(tr.abnormal, d.ID)
	}
	if st == string(cluster.Hibernated) && old != st {
		tr.hibernations++
		tr.poke()
	}
}

func (tr *tracker) onRun(d backend.Doc, deleted bool) {
	if deleted {
		if old := tr.setState("run", d.ID, ""); old != "" {
			tr.deleted++
		}
		for _, m := range tr.liveOn {
			delete(m, d.ID)
		}
		return
	}
	var r job.Run
	if err := json.Unmarshal(d.Data, &r); err != nil {
		return
	}
	st := string(r.State)
	old := tr.setState("run", d.ID, st)
	if old == "" {
		tr.made++
		if !r.Tick.IsZero() && r.Attempt == 0 {
			key := r.JobID + "/" + r.Tick.UTC().Format(time.RFC3339)
			if other, ok := tr.ticks[key]; ok && other != r.ID {
				tr.twice = append(tr.twice, fmt.Sprintf("tick %s has runs %s and %s", key, other, r.ID))
			} else if !ok {
				tr.ticks[key] = r.ID
				if tr.ticksOf[r.JobID] == nil {
					tr.ticksOf[r.JobID] = map[time.Time]bool{}
				}
				tr.ticksOf[r.JobID][r.Tick.UTC()] = true
			}
		}
	}
	if old != st && r.State.Terminal() && !job.RunState(old).Terminal() {
		switch r.State {
		case job.Succeeded:
			tr.succeeded++
		case job.Failed:
			tr.failed++
		case job.Stopped:
			tr.stopped++
		}
	}
	on := r.Config.Cluster
	if on == "" {
		return
	}
	if tr.liveOn[on] == nil {
		tr.liveOn[on] = map[string]bool{}
	}
	if r.State.Live() {
		tr.liveOn[on][r.ID] = true
		if r.State == job.Waiting {
			tr.poke()
		}
	} else {
		delete(tr.liveOn[on], r.ID)
	}
}

// poke wakes the starter of hibernated clusters. tr.mu is held.
func (tr *tracker) poke() {
	select {
	case tr.wake <- struct{}{}:
	default:
	}
}

// toStart returns the hibernated clusters some live run is for.
func (tr *tracker) toStart() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var ids []string
	for id, s := range tr.state["cluster"] {
		if s.state == string(cluster.Hibernated) && len(tr.liveOn[id]) > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// count returns how many of kind are in state.
func (tr *tracker) count(kind, state string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, s := range tr.state[kind] {
		if s.state == state {
			n++
		}
	}
	return n
}

// stored returns, by kind, how many documents are stored and their bytes.
func (tr *tracker) stored() map[string][2]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[string][2]int{}
	for kind, m := range tr.size {
		n, b := 0, 0
		for _, s := range m {
			n++
			b += s
		}
		out[kind] = [2]int{n, b}
	}
	return out
}

// totals are the tracker's running counts.
type totals struct{ made, succeeded, failed, stopped, deleted, changes, hibernations int }

func (tr *tracker) totals() totals {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return totals{tr.made, tr.succeeded, tr.failed, tr.stopped, tr.deleted, tr.changes, tr.hibernations}
}

// tickCheck is where the schedules stand.
type tickCheck struct {
	due, started, missed int // through each config's last handled tick
	unaccounted          int // due − started − missed
	behind               int // ticks over a minute old not handled yet
	twice                []string
	configs              int
}

// ticksNow counts, for every config, the ticks due through its last
// handled one (from its creation), those that made a run and those
// counted missed; and the ticks more than grace old not yet handled.
func (tr *tracker) ticksNow(grace time.Duration) tickCheck {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var c tickCheck
	now := tr.now()
	for id, j := range tr.jobs {
		s := j.rec.Config.Schedule
		if s == nil {
			continue
		}
		c.configs++
		last := j.rec.ScheduleStatus.LastTick
		for j.dueThrough.Before(last) {
			next, err := s.NextTimes(j.dueThrough, 1)
			if err != nil || len(next) == 0 || next[0].After(last) {
				break
			}
			j.due, j.dueThrough = j.due+1, next[0]
		}
		started := 0
		for tick := range tr.ticksOf[id] {
			if !tick.After(last) {
				started++
			}
		}
		c.due += j.due
		c.started += started
		c.missed += j.rec.ScheduleStatus.Missed
		c.unaccounted += j.due - started - j.rec.ScheduleStatus.Missed
		// Ticks after the last handled one that are over grace old.
		from := last
		if from.Before(j.rec.CreatedAt) {
			from = j.rec.CreatedAt
		}
		if next, err := s.NextTimes(from, 3); err == nil {
			for _, t := range next {
				if t.Add(grace).Before(now) {
					c.behind++
				}
			}
		}
	}
	c.twice = slices.Clone(tr.twice)
	return c
}

// stuckNow lists the clusters in a transitional state and the runs not
// ended for longer than bound, and the clusters abnormal.
func (tr *tracker) stuckNow(bound time.Duration) (stuck, abnormal []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	now := tr.now()
	transitional := map[string]bool{string(cluster.Creating): true, string(cluster.Starting): true,
		string(cluster.Hibernating): true, string(cluster.Deleting): true}
	for _, kind := range []string{"cluster", "run"} {
		for _, id := range slices.Sorted(maps.Keys(tr.state[kind])) {
			s := tr.state[kind][id]
			busy := transitional[s.state]
			if kind == "run" {
				busy = job.RunState(s.state).Live()
			}
			if busy && now.Sub(s.at) > bound {
				stuck = append(stuck, fmt.Sprintf("%s %s %s for %v", kind, id, s.state, now.Sub(s.at).Round(time.Second)))
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(tr.abnormal)) {
		abnormal = append(abnormal, fmt.Sprintf("cluster %s abnormal: %s", id, tr.abnormal[id]))
	}
	return stuck, abnormal
}

// states says how many of kind are in each state: "running 45, hibernated 5".
func (tr *tracker) states(kind string) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	m := map[string]int{}
	for _, s := range tr.state[kind] {
		m[s.state]++
	}
	keys := slices.Sorted(maps.Keys(m))
	out := ""
	for _, k := range keys {
		if out != "" {
			out += ", "
		}
		out += fmt.Sprintf("%s %d", k, m[k])
	}
	if out == "" {
		return "none"
	}
	return out
}
