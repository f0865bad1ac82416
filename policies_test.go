package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/internal/fieldtest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/scheduler"
)

// longRuns is a fixture whose runs stay active (a day each), so that they
// count on their member while a test places more.
func longRuns(t *testing.T) *fixture {
	return newFixture(t, dlctest.MemoryOptions{Ray: memory.RayHooks{
		RunOutcome: func(*job.Run) memory.Outcome { return memory.Outcome{Duration: 24 * time.Hour} }}})
}

// policyGroup creates a cluster group with policy p through c.
func (f *fixture) policyGroup(c *dlc.Client, name string, s group.Scheduling) string {
	f.t.Helper()
	g, err := c.Groups().Create(f.ctx, name, dlc.GroupCreateOptions{Scheduling: s})
	f.must(err)
	if g.Policy != s.Normalized().Policy {
		f.t.Fatalf("created with policy %q, want %q", g.Policy, s.Policy)
	}
	return g.ID
}

// member creates a running cluster of 8 cores and 24 GiB in group grp,
// drawing from resource group rg.
func (f *fixture) member(name, grp, rg string) *cluster.Cluster {
	f.t.Helper()
	s, err := dlc.NewCluster(name).Groups(grp).Resources("pkg-1", rg).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	f.must(err)
	cl, err := f.c.Clusters().Create(f.ctx, s)
	f.must(err)
	f.settle()
	f.startNow(cl.ID)
	f.clusterIs(cl.ID, cluster.Running)
	return cl
}

// clusterIs fails unless cluster id is in state want.
func (f *fixture) clusterIs(id string, want cluster.State) {
	f.t.Helper()
	if got, err := f.c.Clusters().Get(f.ctx, id); err != nil || got.State != want {
		f.t.Fatalf("cluster %s: %v %v, want %s", id, got.State, err, want)
	}
}

// placed creates a run of jobID through c, lets only client by take its
// steps (nil: every client), and returns it placed.
func (f *fixture) placed(c, by *dlc.Client, jobID string) *job.Run {
	f.t.Helper()
	r, err := c.Runs().Create(f.ctx, jobID, dlc.RunOptions{})
	f.must(err)
	if by != nil {
		by.Reconcile()
	} else {
		f.m.Reconcile()
	}
	r = f.run(r.ID)
	if r.State != job.Provisioning && r.State != job.Running {
		f.t.Fatalf("run %s is %s (%s %s), want placed", r.ID, r.State, r.WaitReason, r.Message)
	}
	return r
}

// G3, G4 (primary/backup failover): with the ordered-failover policy, new
// runs go to the first running member in the group's order: to the
// standby while the primary is abnormal, back to the primary once Ray
// brings it back, to a member outside the order when no listed one runs;
// a changed order applies to the next run. Each run records where it went
// and why (Run.Placement), in its event log too.
func TestOrderedFailoverG3G4(t *testing.T) {
	f := longRuns(t)
	grp := f.policyGroup(f.c, "主备", group.Scheduling{Policy: group.OrderedFailover})
	spare := f.member("spare", grp, "rg-1") // created first: not in the order
	primary := f.member("primary", grp, "rg-1")
	standby := f.member("standby", grp, "rg-1")
	g, err := f.c.Groups().SetPolicy(f.ctx, grp, group.Scheduling{Policy: group.OrderedFailover, Order: []string{primary.ID, standby.ID}})
	f.must(err)
	if !slices.Equal(g.Order, []string{primary.ID, standby.ID}) {
		t.Fatalf("order %v", g.Order)
	}
	if got, _ := f.c.Groups().Get(f.ctx, grp); got.Policy != group.OrderedFailover || !slices.Equal(got.Order, g.Order) {
		t.Fatalf("Get: %q %v", got.Policy, got.Order)
	}
	rec := f.job(dlc.NewJob("主备 job").OnGroup(grp))
	steps := []struct {
		name string
		do   func()
		want *cluster.Cluster
		why  string
	}{
		{"the primary takes runs", func() {}, primary, "ordered-failover: #1 in order, the first"},
		{"the primary turns abnormal: the standby", func() {
			f.m.Backend.FailCluster(primary.ID, "head node lost")
			f.settle()
			f.clusterIs(primary.ID, cluster.Abnormal)
			// A plan of the job's next run says so too, and writes nothing.
			p, err := f.c.Jobs().PlanRun(f.ctx, rec.ID)
			f.must(err)
			if p.Cluster == nil || p.Cluster.ID != standby.ID || !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, "#2 in order") }) {
				t.Fatalf("plan of a run of the group: on %v, notes %q", p.Cluster, p.Notes)
			}
		}, standby, "ordered-failover: #2 in order, the first running (" + primary.ID + " abnormal)"},
		{"the primary recovers: back to it", func() {
			f.m.Backend.RecoverCluster(primary.ID)
			f.settle()
			f.clusterIs(primary.ID, cluster.Running)
		}, primary, "ordered-failover: #1 in order, the first"},
		{"neither runs: the member outside the order", func() {
			f.m.Backend.FailCluster(primary.ID, "head node lost")
			_, err := f.c.Clusters().Hibernate(f.ctx, standby.ID, dlc.HibernateOptions{Force: true})
			f.must(err)
			f.settle()
			f.clusterIs(standby.ID, cluster.Hibernated)
		}, spare, "ordered-failover: no member in the order is running; first running member by id (" + primary.ID + " abnormal, " + standby.ID + " not running)"},
		{"the standby back", func() { f.startNow(standby.ID) }, standby, "ordered-failover: #2 in order, the first running (" + primary.ID + " abnormal)"},
		{"the order changed: the standby is first", func() {
			f.m.Backend.RecoverCluster(primary.ID)
			f.settle()
			_, err := f.c.Groups().SetPolicy(f.ctx, grp, group.Scheduling{Policy: group.OrderedFailover, Order: []string{standby.ID, primary.ID}})
			f.must(err)
		}, standby, "ordered-failover: #1 in order, the first"},
		{"random again: any running member", func() {
			_, err := f.c.Groups().SetPolicy(f.ctx, grp, group.Scheduling{})
			f.must(err)
		}, nil, "random: one of 3 running members"},
	}
	for _, st := range steps {
		st.do()
		r := f.placed(f.c, nil, rec.ID)
		if (st.want != nil && r.ClusterID != st.want.ID) || r.Placement != st.why {
			t.Fatalf("%s: the run went to %s (%q), want %v (%q)", st.name, r.ClusterID, r.Placement, st.want, st.why)
		}
		if last := r.Events[len(r.Events)-1]; !strings.Contains(last.Message, r.ClusterID+", "+st.why) {
			t.Errorf("%s: the run's log says %q", st.name, last.Message)
		}
	}
	evs := g.Events
	if got, _ := f.c.Groups().Get(f.ctx, grp); len(got.Events) > 0 {
		evs = got.Events
	}
	var log []string
	for _, e := range evs {
		log = append(log, e.Action+": "+e.Message)
	}
	if want := "policy: ordered-failover (order " + standby.ID + ", " + primary.ID + ") → random"; !slices.Contains(log, want) {
		t.Errorf("the group's log %q lacks %q", log, want)
	}
}

// G3, G4 (one entry for many clusters): least-loaded spreads runs that stay
// active over the members within one run of each other, counting the
// runs already on a member (here three sent to one member by cluster mode).
func TestLeastLoadedSpreadsRunsG3G4(t *testing.T) {
	f := longRuns(t)
	grp := f.policyGroup(f.c, "均衡", group.Scheduling{Policy: group.LeastLoaded})
	var members []*cluster.Cluster
	for i := range 4 {
		members = append(members, f.member(fmt.Sprintf("m%d", i), grp, "rg-1"))
	}
	direct := f.job(dlc.NewJob("direct").OnCluster(members[2].ID))
	for range 3 {
		f.placed(f.c, nil, direct.ID)
	}
	rec := f.job(dlc.NewJob("spread").OnGroup(grp))
	var ids []string
	for range 100 {
		r, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
		f.must(err)
		ids = append(ids, r.ID)
	}
	f.m.Reconcile() // 100 runs placed one after another, each seeing those before
	total := map[string]int{}
	for _, id := range ids {
		r := f.run(id)
		if !r.State.Live() || r.ClusterID == "" || !strings.HasPrefix(r.Placement, "least-loaded: ") {
			t.Fatalf("run %s: %s on %q (%q)", id, r.State, r.ClusterID, r.Placement)
		}
		total[r.ClusterID]++
	}
	total[members[2].ID] += 3
	lo, hi := 1<<30, 0
	for _, m := range members {
		lo, hi = min(lo, total[m.ID]), max(hi, total[m.ID])
	}
	if hi-lo > 1 || lo+hi < 51 {
		t.Errorf("active runs per member %v: want 103 within ±1", total)
	}
	for _, m := range members {
		rs, err := f.c.Runs().List(f.ctx, dlc.RunListOptions{ClusterID: m.ID, States: []job.RunState{job.Provisioning, job.Running}})
		f.must(err)
		if len(rs) != total[m.ID] {
			t.Errorf("%s: %d active runs listed, %d counted", m.ID, len(rs), total[m.ID])
		}
	}
}

// G3, G4 (off-peak sharing across resource groups): most-free-quota sends a
// run to the member whose resource group can allocate most, GPUs counted
// first, then CPU, then memory; quota taken meanwhile (another cluster
// started in the group) counts.
func TestMostFreeQuotaG3G4(t *testing.T) {
	rg := func(id string, cores, gpus int64) quota.Group {
		return quota.Group{ID: id, Package: "pkg-1", Capacity: quota.Resources{MilliCPU: cores * 1000, Memory: cores * 4 * quota.GiB, GPU: gpus}}
	}
	cases := []struct {
		name   string
		a, b   quota.Group
		fill   string // a resource group a cluster outside the group is started in first
		want   string // the resource group whose member takes the run
		reason string
	}{
		{"more CPU free", rg("rg-a", 16, 0), rg("rg-b", 64, 0), "", "rg-b", "resource group rg-b can allocate gpu=0 cpu=56 memory=232Gi, most of 2 running members"},
		{"GPUs first", rg("rg-a", 16, 2), rg("rg-b", 64, 0), "", "rg-a", "resource group rg-a can allocate gpu=2 cpu=8"},
		{"memory last", quota.Group{ID: "rg-a", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 24000, Memory: 512 * quota.GiB}},
			quota.Group{ID: "rg-b", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 25000, Memory: 25 * quota.GiB}}, "", "rg-b", "cpu=17"},
		{"quota taken meanwhile", rg("rg-a", 24, 0), rg("rg-b", 30, 0), "rg-b", "rg-a", "resource group rg-a can allocate gpu=0 cpu=16"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := longRuns(t)
			for _, g := range []quota.Group{tc.a, tc.b} {
				_, err := f.c.ResourceGroups().Register(f.ctx, g)
				f.must(err)
			}
			grp := f.policyGroup(f.c, "错峰", group.Scheduling{Policy: group.MostFreeQuota})
			byRG := map[string]string{tc.a.ID: f.member("in_a", grp, tc.a.ID).ID, tc.b.ID: f.member("in_b", grp, tc.b.ID).ID}
			if tc.fill != "" {
				f.member("outside", f.grp, tc.fill)
			}
			rec := f.job(dlc.NewJob("j").OnGroup(grp))
			for range 3 { // the runs take no quota: the choice stays
				r := f.placed(f.c, nil, rec.ID)
				if r.ClusterID != byRG[tc.want] || !strings.HasPrefix(r.Placement, "most-free-quota: ") || !strings.Contains(r.Placement, tc.reason) {
					t.Fatalf("the run went to %s (%q), want the member in %s (%q)", r.ClusterID, r.Placement, tc.want, tc.reason)
				}
			}
		})
	}
}

// G3: a group's policy is checked at create and at SetPolicy (every
// problem at once, with its path); a bad one changes nothing.
func TestGroupPolicyValidationG3(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	cases := []struct {
		name  string
		group string
		s     group.Scheduling
		wants []fieldtest.Want
	}{
		{"unknown policy", "g1", group.Scheduling{Policy: "round-robin"}, []fieldtest.Want{{"policy", "G3"}}},
		{"an order for least-loaded", "g2", group.Scheduling{Policy: group.LeastLoaded, Order: []string{"cls-a"}}, []fieldtest.Want{{"order", "G3"}}},
		{"a duplicate in the order", "g3", group.Scheduling{Policy: group.OrderedFailover, Order: []string{"cls-a", "cls-a"}}, []fieldtest.Want{{"order[1]", "G3"}}},
		{"a bad name and a bad id", "", group.Scheduling{Policy: group.OrderedFailover, Order: []string{"Cls A"}}, []fieldtest.Want{{"name", "G5"}, {"order[0]", "G3"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.c.Groups().Create(f.ctx, tc.group, dlc.GroupCreateOptions{Scheduling: tc.s})
			fieldtest.Check(t, err, tc.wants)
			if tc.group == "" {
				return
			}
			_, err = f.c.Groups().SetPolicy(f.ctx, f.grp, tc.s)
			fieldtest.Check(t, err, tc.wants)
			if g, _ := f.c.Groups().Get(f.ctx, f.grp); g.Policy != group.Random || g.Order != nil {
				t.Errorf("a refused policy changed the group: %q %v", g.Policy, g.Order)
			}
		})
	}
	if _, err := f.c.Groups().SetPolicy(f.ctx, "grp-nope", group.Scheduling{}); !errors.Is(err, dlc.ErrNotFound) {
		t.Errorf("SetPolicy of a missing group: %v", err)
	}
	g, err := f.c.Groups().Get(f.ctx, f.grp)
	f.must(err)
	same, err := f.c.Groups().SetPolicy(f.ctx, f.grp, group.Scheduling{Policy: group.Random})
	f.must(err)
	if same.Version != g.Version {
		t.Errorf("setting the policy a group has wrote it (%s → %s)", g.Version, same.Version)
	}
	// A member named in the order that leaves the group is passed over.
	cl := f.runningCluster("c1")
	_, err = f.c.Groups().SetPolicy(f.ctx, f.grp, group.Scheduling{Policy: group.OrderedFailover, Order: []string{"cls-gone", cl.ID}})
	f.must(err)
	r := f.start(f.job(dlc.NewJob("j").OnGroup(f.grp)).ID)
	if r.ClusterID != cl.ID || r.Placement != "ordered-failover: #1 in order, the first" {
		t.Errorf("with a non-member first in the order: %s %q", r.ClusterID, r.Placement)
	}
}

// G3 across clients: the policies other than random decide from the store
// and the run alone, so two clients on one store place alike. Runs are
// created through both clients, each placed by one of them only, in turn;
// every run goes where the scheduler's policy sends it given the store as
// the test reads it through the public API (the members, their active
// runs, their resource groups' accounts, the order), whichever client
// placed it, and says the same why.
func TestPoliciesAgreeAcrossClientsG3(t *testing.T) {
	cases := []struct {
		policy group.Policy
		// change alters the store halfway (nil: nothing).
		change func(f *fixture, members []*cluster.Cluster)
	}{
		{group.LeastLoaded, nil},
		{group.OrderedFailover, func(f *fixture, ms []*cluster.Cluster) {
			f.m.Backend.FailCluster(ms[0].ID, "head node lost")
			f.settle()
		}},
		{group.MostFreeQuota, func(f *fixture, ms []*cluster.Cluster) {
			f.member("filler", f.grp, "rg-b") // takes 8 cores of rg-b
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.policy), func(t *testing.T) {
			f := longRuns(t)
			other := f.m.NewClient()
			for _, g := range []quota.Group{quotaGroup("rg-a", 24), quotaGroup("rg-b", 40)} {
				_, err := f.c.ResourceGroups().Register(f.ctx, g)
				f.must(err)
			}
			grp := f.policyGroup(other, "shared", group.Scheduling{Policy: tc.policy})
			var ms []*cluster.Cluster
			for i, rg := range []string{"rg-a", "rg-b", "rg-b", "rg-a"} {
				ms = append(ms, f.member(fmt.Sprintf("m%d", i), grp, rg))
			}
			if tc.policy == group.OrderedFailover {
				_, err := f.c.Groups().SetPolicy(f.ctx, grp, group.Scheduling{Policy: tc.policy, Order: []string{ms[0].ID, ms[2].ID}})
				f.must(err)
			}
			rec := f.job(dlc.NewJob("j").OnGroup(grp))
			clients := []*dlc.Client{f.c, other}
			for i := range 24 {
				if i == 12 && tc.change != nil {
					tc.change(f, ms)
				}
				r, err := clients[i%2].Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
				f.must(err)
				want, ok := f.expectedChoice(clients[(i+1)%2], grp, r.ID)
				if !ok {
					t.Fatalf("run %d: the policy finds no member", i)
				}
				by := clients[(i+1)%2] // the other client places it
				by.Reconcile()
				got := f.run(r.ID)
				if got.ClusterID != want.ClusterID || got.Placement != want.Reason {
					t.Fatalf("run %d placed by client %d: %s (%q), the store says %s (%q)", i, (i+1)%2, got.ClusterID, got.Placement, want.ClusterID, want.Reason)
				}
				f.m.Reconcile() // the client that did not place it catches up
			}
		})
	}
}

// expectedChoice is where group grp's policy sends run runID, computed
// with package scheduler from what c reads of the store.
func (f *fixture) expectedChoice(c *dlc.Client, grp, runID string) (scheduler.Choice, bool) {
	f.t.Helper()
	g, err := c.Groups().Get(f.ctx, grp)
	f.must(err)
	ms, err := c.Groups().Members(f.ctx, grp)
	f.must(err)
	var cands []scheduler.Candidate
	for _, m := range ms {
		active, err := c.Runs().List(f.ctx, dlc.RunListOptions{ClusterID: m.ID, States: []job.RunState{job.Provisioning, job.Running}})
		f.must(err)
		u, err := c.ResourceGroups().Get(f.ctx, m.Spec.ResourceGroup)
		f.must(err)
		cand := scheduler.Candidate{ClusterID: m.ID, Running: m.State == cluster.Running, Abnormal: m.State == cluster.Abnormal,
			ActiveRuns: len(active), Order: slices.Index(g.Order, m.ID) + 1}
		if g.Policy == group.MostFreeQuota && cand.Running {
			cand.ResourceGroup, cand.Allocatable = m.Spec.ResourceGroup, u.Allocatable
		}
		cands = append(cands, cand)
	}
	var p scheduler.Placer
	switch g.Policy {
	case group.LeastLoaded:
		p = scheduler.LeastLoaded{}
	case group.OrderedFailover:
		p = scheduler.OrderedFailover{}
	case group.MostFreeQuota:
		p = scheduler.MostFreeQuota{}
	default:
		f.t.Fatalf("policy %q is not deterministic", g.Policy)
	}
	return p.Place(runID, cands)
}

// G3 with replicas that run their own workers on the real clock: runs
// created concurrently through two clients of an ordered-failover group
// all go to the primary while it runs, and all to the standby once every
// client sees the primary abnormal, whichever worker places them. It waits
// on conditions (watches), never on time.
func TestOrderedFailoverWithReplicasG3(t *testing.T) {
	rs := newReplicaSet(t, 2, 0, dlc.WithWorkSharing(0))
	rs.group("rg-1")
	ctx, cancel := context.WithTimeout(rs.ctx, 2*time.Minute)
	defer cancel()
	mb := rs.cs0
	g, err := rs.cls[1].Groups().Create(ctx, "主备", dlc.GroupCreateOptions{Scheduling: group.Scheduling{Policy: group.OrderedFailover}})
	if err != nil {
		t.Fatal(err)
	}
	rs.grp = g.ID
	var ms []*cluster.Cluster
	for i := range 2 {
		cl, err := rs.createStart(rs.cls[i], fmt.Sprintf("m%d", i), "rg-1")
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, cl)
	}
	clusterState := func(id string, want cluster.State) {
		t.Helper()
		for _, c := range rs.cls {
			if _, err := c.Clusters().Wait(ctx, id, func(cl *cluster.Cluster) (bool, error) { return cl.State == want, nil }); err != nil {
				t.Fatalf("cluster %s to be %s: %v", id, want, err)
			}
		}
	}
	clusterState(ms[0].ID, cluster.Running)
	clusterState(ms[1].ID, cluster.Running)
	primary, standby := ms[1], ms[0]
	if _, err := rs.cls[0].Groups().SetPolicy(ctx, g.ID, group.Scheduling{Policy: group.OrderedFailover, Order: []string{primary.ID, standby.ID}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range rs.cls { // both see the order before any run
		if _, err := c.Groups().Get(ctx, g.ID); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := dlc.NewJob("j").OnGroup(g.ID).COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").Build()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rs.cls[0].Jobs().Create(ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	burst := func(want string) {
		t.Helper()
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				c := rs.cls[i%2]
				r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				r, err = c.Runs().Wait(ctx, r.ID, func(r *job.Run) (bool, error) { return r.ClusterID != "" || !r.State.Live(), nil })
				if err != nil {
					t.Error(err)
					return
				}
				if r.ClusterID != want || !strings.HasPrefix(r.Placement, "ordered-failover: ") {
					t.Errorf("run %s went to %s (%q, %s %s), want %s", r.ID, r.ClusterID, r.Placement, r.State, r.Message, want)
				}
			})
		}
		wg.Wait()
	}
	burst(primary.ID)
	mb.FailCluster(primary.ID, "head node lost")
	clusterState(primary.ID, cluster.Abnormal)
	burst(standby.ID)
	mb.RecoverCluster(primary.ID)
	clusterState(primary.ID, cluster.Running)
	burst(primary.ID)
}
