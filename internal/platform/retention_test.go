package platform

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/job"
)

// observeRun feeds the index a run as the watch reports it.
func observeRun(f *finishedRuns, r *job.Run, version string) {
	f.observe(backend.Doc{Kind: kindRun, ID: r.ID, Version: version, Labels: runLabels(r)}, r)
}

// The n oldest of a job's finished runs, whatever order they were seen
// in: by FinishedAt, then submission order, then id.
func TestFinishedRunsOldest(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var runs []*job.Run
	for i := range 40 {
		// Every fourth pair finishes at the same instant; some of those
		// were submitted at the same one too (told apart by id).
		at := t0.Add(time.Duration(i/2) * time.Minute)
		seq := uint64(i / 3)
		runs = append(runs, &job.Run{ID: fmt.Sprintf("run-%02d", (i*7)%40), JobID: "j", State: job.Succeeded, RayDone: true, FinishedAt: at, Seq: seq})
	}
	want := slices.Clone(runs)
	sort.Slice(want, func(i, j int) bool {
		a, b := want[i], want[j]
		if !a.FinishedAt.Equal(b.FinishedAt) {
			return a.FinishedAt.Before(b.FinishedAt)
		}
		if a.Seq != b.Seq {
			return a.Seq < b.Seq
		}
		return a.ID < b.ID
	})
	for _, order := range []string{"oldest first", "newest first", "by id"} {
		f := newFinishedRuns()
		seen := slices.Clone(runs)
		switch order {
		case "by id": // a permutation of the age order
			sort.Slice(seen, func(i, j int) bool { return seen[i].ID < seen[j].ID })
		case "oldest first":
			seen = slices.Clone(want)
		case "newest first":
			seen = slices.Clone(want)
			slices.Reverse(seen)
		}
		for _, r := range seen {
			observeRun(f, r, "1")
		}
		observeRun(f, &job.Run{ID: "other", JobID: "k", State: job.Failed, RayDone: true, FinishedAt: t0.Add(-time.Hour)}, "1")
		if f.count("j") != len(runs) || f.count("k") != 1 {
			t.Fatalf("%s: counts %d and %d", order, f.count("j"), f.count("k"))
		}
		for _, n := range []int{0, 1, 2, 3, 7, 39, 40} {
			got := f.oldest("j", n)
			var ids, wantIDs []string
			for _, r := range got {
				ids = append(ids, r.id)
			}
			for _, r := range want[:n] {
				wantIDs = append(wantIDs, r.ID)
			}
			if !slices.Equal(ids, wantIDs) {
				t.Errorf("%s: the %d oldest are %v, want %v", order, n, ids, wantIDs)
			}
		}
	}
}

// The index holds a job's finished runs only, each at the version last
// reported, and lets go of a run that is deleted, that changes job (an
// edit from outside) or that is no longer done.
func TestFinishedRunsFollowsTheStore(t *testing.T) {
	f := newFinishedRuns()
	live := &job.Run{ID: "r1", JobID: "j", State: job.Running}
	observeRun(f, live, "1")
	cleanup := &job.Run{ID: "r1", JobID: "j", State: job.Succeeded} // ended, Ray not done yet
	observeRun(f, cleanup, "2")
	if f.count("j") != 0 {
		t.Fatal("a run not done is indexed")
	}
	done := &job.Run{ID: "r1", JobID: "j", State: job.Succeeded, RayDone: true}
	observeRun(f, done, "3")
	observeRun(f, &job.Run{ID: "r2", JobID: "j", State: job.Stopped, RayDone: true}, "4")
	if got := f.oldest("j", 2); f.count("j") != 2 || len(got) != 2 || got[0].version != "3" && got[1].version != "3" {
		t.Fatalf("two done: count %d, %+v", f.count("j"), got)
	}
	moved := &job.Run{ID: "r2", JobID: "k", State: job.Stopped, RayDone: true}
	observeRun(f, moved, "5")
	if f.count("j") != 1 || f.count("k") != 1 {
		t.Fatalf("after r2 moved to job k: %d and %d", f.count("j"), f.count("k"))
	}
	f.observe(backend.Doc{Kind: kindRun, ID: "r1", Version: "3"}, nil) // deleted
	f.observe(backend.Doc{Kind: kindRun, ID: "r2", Version: "5"}, nil)
	if f.count("j") != 0 || f.count("k") != 0 || len(f.byJob) != 0 || len(f.jobOf) != 0 {
		t.Fatalf("after the deletes: %v %v", f.byJob, f.jobOf)
	}
	f.observe(backend.Doc{Kind: kindCluster, ID: "r3", Labels: map[string]string{labelPhase: phaseDone}}, done)
	if len(f.jobOf) != 0 {
		t.Fatal("another kind is indexed")
	}
}

// What made a tick's run has recorded it once the config's LastTick is at
// or past the tick, or when the schedule starts no tick (suspended, gone,
// or the config gone); a retry once its failed attempt names it (or the
// attempt is gone). Kept otherwise: deleted, the run would be made again.
func TestMadeRecorded(t *testing.T) {
	c, err := New(WithBackend(memory.New(memory.Options{})), WithWorkers(0), WithResync(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	tick := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	save := func(id string, st job.ScheduleStatus, scheduled bool) {
		t.Helper()
		rec := &job.Record{ID: id, Revision: 1, Config: job.Config{Name: id}, ScheduleStatus: st}
		if scheduled {
			rec.Config.Schedule = &job.Schedule{Cron: "* * * * *"}
		}
		if _, err := c.acc.create(ctx, kindJob, id, jobLabels(rec), rec); err != nil {
			t.Fatal(err)
		}
	}
	save("behind", job.ScheduleStatus{LastTick: tick.Add(-time.Minute)}, true)
	save("recorded", job.ScheduleStatus{LastTick: tick}, true)
	save("suspended", job.ScheduleStatus{LastTick: tick.Add(-time.Minute), Suspended: true}, true)
	save("unscheduled", job.ScheduleStatus{}, false)
	for _, r := range []*job.Run{
		{ID: "prev-names", JobID: "x", State: job.Failed, NextAttempt: "retry-a"},
		{ID: "prev-not-yet", JobID: "x", State: job.Failed},
	} {
		if _, err := c.acc.create(ctx, kindRun, r.ID, runLabels(r), r); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		run  finishedRun
		want bool
	}{
		{finishedRun{id: "t1", job: "behind", tick: tick}, false},
		{finishedRun{id: "t2", job: "recorded", tick: tick}, true},
		{finishedRun{id: "t3", job: "suspended", tick: tick}, true},
		{finishedRun{id: "t4", job: "unscheduled", tick: tick}, true},
		{finishedRun{id: "t5", job: "gone", tick: tick}, true},
		{finishedRun{id: "retry-a", job: "x", prev: "prev-names"}, true},
		{finishedRun{id: "retry-b", job: "x", prev: "prev-not-yet"}, false},
		{finishedRun{id: "retry-c", job: "x", prev: "prev-gone"}, true},
		{finishedRun{id: "by-hand", job: "behind"}, true},
	} {
		if got, err := c.madeRecorded(ctx, tc.run); err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.run.id, got, err, tc.want)
		}
	}
}

// A run's recorded outage ends with its state: displaced to wait, placed
// anew or ended, it counts an outage there from its start.
func TestRayUnreachableSinceClearedByAStateChange(t *testing.T) {
	c, err := New(WithBackend(memory.New(memory.Options{})), WithWorkers(0), WithResync(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		from job.RunState
		t    job.RunTrigger
	}{{job.Provisioning, job.Displace}, {job.Provisioning, job.Fail}, {job.Running, job.Stop}} {
		r := &job.Run{ID: "r", State: tc.from, ClusterID: "c", RayUnreachableSince: since}
		if _, ok, err := c.runs.advanceRun(r, tc.t, "moved"); err != nil || !ok {
			t.Fatalf("%s %s: %v %v", tc.from, tc.t, ok, err)
		}
		if !r.RayUnreachableSince.IsZero() {
			t.Errorf("%s → %s: still unreachable since %s", tc.from, r.State, r.RayUnreachableSince)
		}
	}
}
