package platform

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// The index of each cluster's runs follows a run's phase and cluster
// through its life, as the watch reports it: placed, running, moved,
// displaced, ended, deleted; and it keeps when the last run on a cluster
// ended (L4).
func TestRunLoadFollowsRuns(t *testing.T) {
	end := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	type seen struct {
		d backend.Doc
		r *job.Run
	}
	doc := func(id string, st job.RunState, on string) seen {
		r := &job.Run{ID: id, JobID: "j", State: st, ClusterID: on, Config: job.Config{Group: "g"}}
		if st.Terminal() {
			r.FinishedAt = end
		}
		return seen{backend.Doc{Kind: kindRun, ID: id, Labels: runLabels(r)}, r}
	}
	l := newRunLoad()
	steps := []struct {
		name  string
		s     seen
		want  map[string]int
		ended bool
	}{
		{"queued", doc("r1", job.Queued, ""), map[string]int{}, false},
		{"placed", doc("r1", job.Provisioning, "a"), map[string]int{"a": 1}, false},
		{"another placed", doc("r2", job.Provisioning, "a"), map[string]int{"a": 2}, false},
		{"running: unchanged", doc("r1", job.Running, "a"), map[string]int{"a": 2}, false},
		{"displaced: waits again", doc("r2", job.Waiting, ""), map[string]int{"a": 1}, false},
		{"placed elsewhere", doc("r2", job.Provisioning, "b"), map[string]int{"a": 1, "b": 1}, false},
		{"ended, Ray not yet done", doc("r1", job.Succeeded, "a"), map[string]int{"b": 1}, true},
		{"its end seen again: no news", doc("r1", job.Succeeded, "a"), map[string]int{"b": 1}, false},
		{"not a run", seen{backend.Doc{Kind: kindCluster, ID: "r2"}, nil}, map[string]int{"b": 1}, false},
		{"deleted (no labels)", seen{backend.Doc{Kind: kindRun, ID: "r2"}, nil}, map[string]int{}, false},
	}
	for _, st := range steps {
		if ended := l.observe(st.s.d, st.s.r); ended != st.ended {
			t.Fatalf("%s: end news %v, want %v", st.name, ended, st.ended)
		}
		if !maps.Equal(l.n, st.want) {
			t.Fatalf("%s: counts %v, want %v", st.name, l.n, st.want)
		}
		for c, n := range st.want {
			if got := l.active(c); got != n {
				t.Fatalf("%s: active(%s) = %d, want %d", st.name, c, got, n)
			}
		}
	}
	if len(l.on) != 0 {
		t.Errorf("runs left in the index: %v", l.on)
	}
	if !l.ended("a").Equal(end) || !l.ended("b").IsZero() {
		t.Errorf("last ends: a %s, b %s", l.ended("a"), l.ended("b"))
	}
	l.forget("a")
	if !l.ended("a").IsZero() {
		t.Error("a deleted cluster's last end is kept")
	}
}

// G3: two engines on one store choose the same member, with the same
// reason, for every run, under each policy but random: they decide from
// the store and the run alone (the members' states, their active runs,
// their resource groups' accounts, the failover order), and go on agreeing
// as the store changes.
func TestChooseMemberSameOnTwoEnginesG3(t *testing.T) {
	ctx := context.Background()
	mb := memory.New(memory.Options{})
	engines := make([]*Engine, 2)
	for i := range engines {
		e, err := New(WithBackend(mb), WithWorkers(0), WithResync(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		engines[i] = e
	}
	put := func(kind, id string, v any) {
		t.Helper()
		d, err := encode(kind, id, "", nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if cur, gerr := mb.Get(ctx, kind, id); gerr == nil {
			d.Version = cur.Version
			_, err = mb.Update(ctx, d)
		} else {
			_, err = mb.Create(ctx, d)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for rg, cores := range map[string]int64{"rg-a": 24, "rg-b": 40} {
		put(kindResourceGroup, rg, &quota.Account{Group: quota.Group{ID: rg, Package: "p", Capacity: quota.Cores(cores)}})
	}
	groups := map[group.Policy]string{group.LeastLoaded: "grp-ll", group.OrderedFailover: "grp-of", group.MostFreeQuota: "grp-mf"}
	for p, id := range groups {
		g := &group.Group{ID: id, Name: id, Policy: p}
		if p == group.OrderedFailover {
			g.Order = []string{"cls-gone", "cls-3", "cls-1"}
		}
		put(kindGroup, id, g)
	}
	states := []cluster.State{cluster.Running, cluster.Running, cluster.Abnormal, cluster.Running, cluster.Hibernated, cluster.Running}
	setCluster := func(i int, st cluster.State) {
		rg := []string{"rg-a", "rg-b"}[i%2]
		put(kindCluster, fmt.Sprintf("cls-%d", i), &cluster.Cluster{ID: fmt.Sprintf("cls-%d", i), State: st, Generation: 1,
			Spec: cluster.Spec{Name: fmt.Sprintf("c%d", i), Groups: []string{"grp-ll", "grp-of", "grp-mf"}, ResourceGroup: rg},
			Live: &cluster.Live{ResourceGroup: rg}})
	}
	for i, st := range states {
		setCluster(i, st)
	}
	runs := 0
	placeOn := func(cl string, n int) {
		for range n {
			runs++
			id := fmt.Sprintf("run-active-%d", runs)
			put(kindRun, id, &job.Run{ID: id, JobID: "j", State: job.Running, ClusterID: cl, Config: job.Config{Group: "grp-ll"}})
		}
	}
	placeOn("cls-0", 3)
	placeOn("cls-1", 1)
	placeOn("cls-3", 1)
	placeOn("cls-5", 2)
	hold := func(rg string, cores int64) {
		var a quota.Account
		d, err := mb.Get(ctx, kindResourceGroup, rg)
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeInto(d.Data, &a); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Set(fmt.Sprintf("holder-%d", cores), quota.Cores(cores), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
		put(kindResourceGroup, rg, &a)
	}
	// agree asks both engines for 40 runs of each group and returns how
	// often each "policy member" was picked.
	agree := func(when string) map[string]int {
		t.Helper()
		picked := map[string]int{}
		for p, gid := range groups {
			for i := range 40 {
				r := &job.Run{ID: fmt.Sprintf("run-%s-%d", when, i), JobID: "j", State: job.Queued, Config: job.Config{Group: gid}}
				a, err := engines[0].chooseMember(ctx, r, gid)
				if err != nil {
					t.Fatal(err)
				}
				b, err := engines[1].chooseMember(ctx, r, gid)
				if err != nil {
					t.Fatal(err)
				}
				if a.cluster == nil || b.cluster == nil || a.cluster.ID != b.cluster.ID || a.reason != b.reason {
					t.Fatalf("%s, %s, run %s: %v %q and %v %q", when, p, r.ID, a.cluster, a.reason, b.cluster, b.reason)
				}
				picked[string(p)+" "+a.cluster.ID]++
			}
		}
		return picked
	}
	// check fails unless exactly the members of want were picked.
	check := func(when string, want ...string) {
		t.Helper()
		got := agree(when)
		if len(got) != len(want) {
			t.Errorf("%s: picked %v, want each of %v", when, got, want)
		}
		for _, k := range want {
			if got[k] == 0 {
				t.Errorf("%s: %s never picked: %v", when, k, got)
			}
		}
	}
	// Running: cls-0 (rg-a, 3 runs), cls-1 (rg-b, 1), cls-3 (rg-b, 1),
	// cls-5 (rg-b, 2). Least-loaded: cls-1 and cls-3 tie, the run id
	// chooses; ordered failover: cls-3 is first (cls-gone is no member);
	// most free quota: rg-b (40 cores free, rg-a 24), its members tie.
	check("at first", "least-loaded cls-1", "least-loaded cls-3", "ordered-failover cls-3",
		"most-free-quota cls-1", "most-free-quota cls-3", "most-free-quota cls-5")
	// The store changes: cls-3 turns abnormal, cls-1 gets two more runs,
	// rg-b holds 30 cores (10 free, rg-a 24).
	setCluster(3, cluster.Abnormal)
	placeOn("cls-1", 2)
	hold("rg-b", 30)
	check("after changes", "least-loaded cls-5", "ordered-failover cls-1", "most-free-quota cls-0")
}
