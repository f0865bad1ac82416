package dlc_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// C11, C12: which operation each state allows; a refused one is a typed
// error naming the state and the states that allow it.
func TestClusterLifecycleC11C12(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	cl, err := f.c.Clusters().Create(f.ctx, f.spec("c1", 1, 2))
	f.must(err)
	if cl.State != cluster.Creating || cl.Creator != "alice" {
		t.Fatalf("created: %s by %s", cl.State, cl.Creator)
	}
	// C12: no start, edit or delete while creating.
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	var se *dlc.StateError
	if !errors.As(err, &se) || !errors.Is(err, dlc.ErrState) || se.State != "creating" || !strings.Contains(err.Error(), "created, hibernated, abnormal") {
		t.Fatalf("start while creating: %v", err)
	}
	f.settle()
	steps := []struct {
		name  string
		op    func() error
		state cluster.State // after settling
	}{
		{"start from created", func() error { _, err := f.c.Clusters().Start(f.ctx, cl.ID); return err }, cluster.Running},
		{"hibernate running", func() error {
			_, err := f.c.Clusters().Hibernate(f.ctx, cl.ID, dlc.DeleteOptions{})
			return err
		}, cluster.Hibernated},
		{"start from hibernated", func() error { _, err := f.c.Clusters().Start(f.ctx, cl.ID); return err }, cluster.Running},
	}
	for _, s := range steps {
		f.must(s.op())
		got, _ := f.c.Clusters().Get(f.ctx, cl.ID)
		if !got.State.Transitional() {
			t.Fatalf("%s: state %s right after the call, want a transitional one", s.name, got.State)
		}
		// C12: nothing but clone during a transition.
		if _, err := f.c.Clusters().Update(f.ctx, got); !errors.Is(err, dlc.ErrState) {
			t.Fatalf("%s: edit during %s: %v", s.name, got.State, err)
		}
		f.settle()
		got, _ = f.c.Clusters().Get(f.ctx, cl.ID)
		if got.State != s.state {
			t.Fatalf("%s: state %s, want %s", s.name, got.State, s.state)
		}
	}
	// Start is refused while running.
	if _, err := f.c.Clusters().Start(f.ctx, cl.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("start while running: %v", err)
	}
	// Clone in any state, with a new name required.
	if _, err := f.c.Clusters().Clone(f.ctx, cl.ID, ""); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("clone without a name: %v", err)
	}
	if _, err := f.c.Clusters().Clone(f.ctx, cl.ID, "c1"); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("clone with the same name: %v", err)
	}
	clone, err := f.c.Clusters().Clone(f.ctx, cl.ID, "c1_copy")
	f.must(err)
	if clone.Spec.Workers[0].NodeSpec != "cu.4c8g" || clone.ID == cl.ID {
		t.Fatalf("clone: %+v", clone.Spec)
	}
	// Delete releases everything.
	f.must(f.c.Clusters().Delete(f.ctx, cl.ID, dlc.DeleteOptions{}))
	// The operation log has user operations and system events (C13). It
	// lives on the cluster, so it is read while the cluster is deleting.
	evs, err := f.c.Clusters().Events(f.ctx, cl.ID)
	f.must(err)
	var users, systems int
	for _, e := range evs {
		if e.Source == "user" && e.Actor == "alice" {
			users++
		} else if e.Source == "system" {
			systems++
		}
	}
	if users < 4 || systems < 4 {
		t.Fatalf("event log: %d user, %d system entries: %+v", users, systems, evs)
	}
	f.settle()
	if _, err := f.c.Clusters().Get(f.ctx, cl.ID); !errors.Is(err, dlc.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := f.c.Clusters().Events(f.ctx, cl.ID); !errors.Is(err, dlc.ErrNotFound) {
		t.Fatalf("events of a deleted cluster: %v", err)
	}
	u, _ := f.c.ResourceGroups().Get(f.ctx, "rg-1")
	if !u.Reserved.IsZero() {
		t.Fatalf("quota still reserved after delete: %v", u.Reserved)
	}
}

// C2: a cluster needs existing groups; C4: an existing resource group.
func TestCreateClusterReferencesC2C4(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	cases := []struct {
		name string
		edit func(*cluster.Spec)
		path string
		rule string
	}{
		{"C2 unknown group", func(s *cluster.Spec) { s.Groups = []string{"grp-nope"} }, "groups[0]", "C2"},
		{"C4 unknown resource group", func(s *cluster.Spec) { s.ResourceGroup = "rg-nope" }, "resourceGroup", "C4"},
		{"C4 package mismatch", func(s *cluster.Spec) { s.ResourcePackage = "pkg-2" }, "resourcePackage", "C4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := f.spec("x", 1, 1)
			tc.edit(s)
			_, err := f.c.Clusters().Create(f.ctx, s)
			fs := dlc.Fields(err)
			if len(fs) != 1 || string(fs[0].Path) != tc.path || fs[0].Rule != tc.rule {
				t.Fatalf("got %v", err)
			}
		})
	}
	all, _ := f.c.Clusters().List(f.ctx)
	if len(all) != 0 {
		t.Fatalf("a refused create stored %d clusters", len(all))
	}
	_, err := f.c.Clusters().Create(f.ctx, f.spec("same", 1, 1))
	f.must(err)
	if _, err := f.c.Clusters().Create(f.ctx, f.spec("same", 1, 1)); !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("duplicate name: %v", err)
	}
}

// C7, C14, C15: the head counts twice with HA; the start reserves the
// minimum; scale-up is granted only while the resource group can
// allocate; a run's driver is not counted.
func TestQuotaC7C14C15(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	s := f.spec("ha", 1, 10) // head cu.4c16g, workers cu.4c8g
	s.Head.HighAvailability = true
	cl := f.started(s)
	u, _ := f.c.ResourceGroups().Get(f.ctx, "rg-1")
	want := quota.Resources{MilliCPU: 2*4000 + 4000, Memory: 2*16*quota.GiB + 8*quota.GiB}
	if u.Reserved != want {
		t.Fatalf("C7 reserved %v, want %v (two heads + one worker)", u.Reserved, want)
	}
	d, _ := f.c.Clusters().Details(f.ctx, cl.ID)
	heads := 0
	for _, p := range d.Pods {
		if p.Role == "head" {
			heads++
		}
	}
	if heads != 2 || len(d.Pods) != 3 {
		t.Fatalf("C7 pods: %d heads of %d", heads, len(d.Pods))
	}
	// C14: 32 cores − 12 = 20 left → at most 5 more workers of 4 cores,
	// and memory (128 − 40 = 88 GiB → 11) is not the limit.
	res, err := f.c.Clusters().Autoscale(f.ctx, cl.ID, "cpu", 10)
	f.must(err)
	if res.Granted != 6 || res.Asked != 10 || !res.QuotaRefused || res.Reason == "" {
		t.Fatalf("C14 autoscale to 10: %+v, want 6 granted, refused for quota", res)
	}
	u, _ = f.c.ResourceGroups().Get(f.ctx, "rg-1")
	if u.Allocatable.MilliCPU != 0 {
		t.Fatalf("C14 allocatable cpu %d after scale-up", u.Allocatable.MilliCPU)
	}
	f.must(f.c.CheckQuota(f.ctx))
	// C15: a run on the full cluster still runs; its driver takes no quota.
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID))
	r, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	f.settle()
	if r = f.run(r.ID); r.State != job.Succeeded {
		t.Fatalf("C15 run on a full cluster: %s %s", r.State, r.Message)
	}
	if u2, _ := f.c.ResourceGroups().Get(f.ctx, "rg-1"); u2.Reserved != u.Reserved {
		t.Fatalf("C15 a run changed the reservation: %v → %v", u.Reserved, u2.Reserved)
	}
	if d, _ = f.c.Clusters().Details(f.ctx, cl.ID); len(d.Pods) != 2+6 {
		t.Fatalf("C14 Ray runs %d pods after the scale-up, want 8", len(d.Pods))
	}
	// Scale-down releases; a range edit applies live and the reservation follows.
	res, err = f.c.Clusters().Autoscale(f.ctx, cl.ID, "cpu", 0)
	f.must(err)
	if res.Granted != 1 || res.QuotaRefused {
		t.Fatalf("scale-down to the minimum: %+v", res)
	}
	cur, _ := f.c.Clusters().Get(f.ctx, cl.ID)
	cur.Spec.Workers[0].Instances = cluster.Range(3, 4)
	cur.Spec.Image = "ray-2.46.0-py311-cpu"
	er, err := f.c.Clusters().Update(f.ctx, cur)
	f.must(err)
	if strings.Join(er.Applied, ",") != "workerGroups[0].instances" || strings.Join(er.NeedsRestart, ",") != "image" {
		t.Fatalf("edit: applied %v, restart %v", er.Applied, er.NeedsRestart)
	}
	if er.Cluster.Replicas["cpu"] != 3 {
		t.Fatalf("live min raised replicas to %d", er.Cluster.Replicas["cpu"])
	}
	// The scale-down's quota comes back once Ray runs the smaller size.
	f.settle()
	if u, _ = f.c.ResourceGroups().Get(f.ctx, "rg-1"); u.Reserved.MilliCPU != 2*4000+3*4000 {
		t.Fatalf("after the live edit %v reserved, want two heads + three workers", u.Reserved)
	}
	// Hibernate releases everything.
	_, err = f.c.Clusters().Hibernate(f.ctx, cl.ID, dlc.DeleteOptions{})
	f.must(err)
	f.settle()
	if u, _ = f.c.ResourceGroups().Get(f.ctx, "rg-1"); !u.Reserved.IsZero() {
		t.Fatalf("hibernate left %v reserved", u.Reserved)
	}
	// A cluster whose start could never fit the whole quota is refused at
	// create, with the figures.
	if _, err := f.c.Clusters().Create(f.ctx, f.spec("big", 9, 9)); !errors.Is(err, dlc.ErrInvalid) || // 4 + 36 cores > 32
		!strings.Contains(err.Error(), "its start reserves cpu=40") || !strings.Contains(err.Error(), "whole quota, cpu=32") {
		t.Fatalf("create of a cluster that could never start: %v", err)
	}
	// A start that does not fit what is free now is ErrQuota and changes
	// nothing.
	filler, err := f.c.Clusters().Create(f.ctx, f.spec("filler", 5, 5)) // 4 + 20 cores
	f.must(err)
	f.settle()
	_, err = f.c.Clusters().Start(f.ctx, filler.ID)
	f.must(err)
	f.settle()
	bc, err := f.c.Clusters().Create(f.ctx, f.spec("more", 2, 2)) // 4 + 8 cores > 32 - 24
	f.must(err)
	f.settle()
	_, err = f.c.Clusters().Start(f.ctx, bc.ID)
	var qe *errs.QuotaError
	if !errors.Is(err, dlc.ErrQuota) || !errors.As(err, &qe) {
		t.Fatalf("start over quota: %v", err)
	}
	if got, _ := f.c.Clusters().Get(f.ctx, bc.ID); got.State != cluster.Created {
		t.Fatalf("refused start changed state to %s", got.State)
	}
	if u, _ = f.c.ResourceGroups().Get(f.ctx, "rg-1"); u.Reserved.MilliCPU != 24000 {
		t.Fatalf("refused start left %v reserved, want the filler's 24 cores", u.Reserved)
	}
}

// C14: a scale-up beyond what the resource group can allocate is granted
// only in part; the result says quota refused the rest and why, and the
// cluster's log records the refusal.
func TestAutoscaleQuotaRefusedC14(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	// Head 4 cores + 1 worker of 4: 8 of 32 cores reserved, 24 left → 6
	// more workers at most, 7 in all; the range allows 10.
	cl, err := f.c.Clusters().Create(f.ctx, f.spec("scaling", 1, 10))
	f.must(err)
	f.settle()
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	f.must(err)
	f.settle()
	cases := []struct {
		name        string
		asked       int
		wantGranted int
		wantRefused bool
	}{
		{"scale-up within quota", 3, 3, false},
		{"scale-up past quota", 10, 7, true},
		{"past the range max is kept at max, then refused for quota", 50, 7, true},
		{"scale-down to the range min", 0, 1, false},
	}
	for _, tc := range cases {
		res, err := f.c.Clusters().Autoscale(f.ctx, cl.ID, "cpu", tc.asked)
		f.must(err)
		if res.Asked != tc.asked || res.Granted != tc.wantGranted || res.QuotaRefused != tc.wantRefused {
			t.Fatalf("%s: %+v, want granted %d refused %v", tc.name, res, tc.wantGranted, tc.wantRefused)
		}
		if tc.wantRefused != (res.Reason != "") {
			t.Fatalf("%s: reason %q with refused %v", tc.name, res.Reason, res.QuotaRefused)
		}
		if tc.wantRefused && !strings.Contains(res.Reason, "rg-1") {
			t.Fatalf("%s: the reason %q does not name the resource group", tc.name, res.Reason)
		}
		got, _ := f.c.Clusters().Get(f.ctx, cl.ID)
		if got.Replicas["cpu"] != tc.wantGranted {
			t.Fatalf("%s: the cluster has %d workers, want %d", tc.name, got.Replicas["cpu"], tc.wantGranted)
		}
		f.must(f.c.CheckQuota(f.ctx))
		f.settle()
	}
	evs, err := f.c.Clusters().Events(f.ctx, cl.ID)
	f.must(err)
	refused := 0
	for _, e := range evs {
		if e.Action == "autoscale-refused" {
			refused++
			if !strings.Contains(e.Message, "quota") {
				t.Errorf("autoscale-refused entry says %q", e.Message)
			}
		}
	}
	if refused == 0 {
		t.Fatalf("no autoscale-refused entry in the log: %+v", evs)
	}
}

// C13: details while running: basic info, history, events, pods, dashboard.
func TestClusterDetailsC13(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{Ray: memory.RayHooks{RunOutcome: func(r *job.Run) memory.Outcome {
		return memory.Outcome{Logs: []string{"epoch 1 loss=0.9", "epoch 2 loss=0.5"}}
	}}})
	cl := f.runningCluster("detail")
	rec := f.job(dlc.NewJob("history").OnCluster(cl.ID))
	r, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	f.settle()
	d, err := f.c.Clusters().Details(f.ctx, cl.ID)
	f.must(err)
	if d.Dashboard == "" || !strings.HasSuffix(d.Dashboard, ":8265") {
		t.Fatalf("dashboard %q", d.Dashboard)
	}
	if len(d.History) != 1 || d.History[0].RunID != r.ID || d.History[0].Command != "python main.py" ||
		d.History[0].Status != "succeeded" || d.History[0].Duration <= 0 || d.History[0].Logs == "" {
		t.Fatalf("history: %+v", d.History)
	}
	if len(d.Pods) != 2 || d.Pods[0].Role != "head" || d.Pods[1].Requests.MilliCPU != 4000 || d.Pods[0].IP == "" {
		t.Fatalf("pods: %+v", d.Pods)
	}
	if d.Resources.MilliCPU != 8000 {
		t.Fatalf("resources %v", d.Resources)
	}
	logs, _ := f.c.Runs().Logs(f.ctx, r.ID)
	if len(logs) < 2 || logs[0] != "epoch 1 loss=0.9" {
		t.Fatalf("logs %q", logs)
	}
	// The dashboard goes away with the cluster's compute.
	_, err = f.c.Clusters().Hibernate(f.ctx, cl.ID, dlc.DeleteOptions{})
	f.must(err)
	f.settle()
	if d, _ = f.c.Clusters().Details(f.ctx, cl.ID); d.Dashboard != "" || len(d.Pods) != 0 {
		t.Fatalf("hibernated details: dashboard %q, %d pods", d.Dashboard, len(d.Pods))
	}
}

// Deleting a cluster with active runs is refused unless forced; forcing
// stops them with a clear reason.
func TestDeleteWithActiveRuns(t *testing.T) {
	d := memory.DefaultDelays
	d.Run = 1e12 // runs go on until stopped
	f := newFixture(t, dlctest.MemoryOptions{Delays: &d})
	cl := f.runningCluster("busy")
	rec := f.job(dlc.NewJob("long").OnCluster(cl.ID))
	r, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	f.m.Settle(100e6, 5)
	if r = f.run(r.ID); r.State != job.Running {
		t.Fatalf("run %s", r.State)
	}
	if err := f.c.Clusters().Delete(f.ctx, cl.ID, dlc.DeleteOptions{}); !errors.Is(err, dlc.ErrState) || !strings.Contains(err.Error(), "Force") {
		t.Fatalf("delete with an active run: %v", err)
	}
	if _, err := f.c.Clusters().Hibernate(f.ctx, cl.ID, dlc.DeleteOptions{}); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("hibernate with an active run: %v", err)
	}
	f.must(f.c.Clusters().Delete(f.ctx, cl.ID, dlc.DeleteOptions{Force: true}))
	if r = f.run(r.ID); r.State != job.Stopped || !strings.Contains(r.Message, "deleted") {
		t.Fatalf("forced delete left the run %s: %s", r.State, r.Message)
	}
	f.m.Settle(100e6, 10)
	if _, err := f.c.Clusters().Get(f.ctx, cl.ID); !errors.Is(err, dlc.ErrNotFound) {
		t.Fatalf("the force-deleted cluster is still there: %v", err)
	}
	// J18/J19 for existing-cluster mode: the next run fails, saying why.
	r2, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	if r2.State != job.Failed || !strings.Contains(r2.Message, "does not exist") {
		t.Fatalf("run on a deleted cluster: %s %s", r2.State, r2.Message)
	}
	if u, _ := f.c.ResourceGroups().Get(f.ctx, "rg-1"); !u.Reserved.IsZero() {
		t.Fatalf("force delete left %v reserved", u.Reserved)
	}
}

// G1, G2, G5, G6: groups hold many clusters, a cluster many groups, across
// resource groups; rename; delete moves members to a target.
func TestGroupsG1toG6(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	_, err := f.c.ResourceGroups().Register(f.ctx, quota.Group{ID: "rg-2", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 16000, Memory: 64 * quota.GiB}})
	f.must(err)
	g2, err := f.c.Groups().Create(f.ctx, "备用组")
	f.must(err)
	a, err := f.c.Clusters().Create(f.ctx, f.spec("a", 1, 1))
	f.must(err)
	bs := f.spec("b", 1, 1)
	bs.ResourceGroup = "rg-2" // G2: another resource group
	b, err := f.c.Clusters().Create(f.ctx, bs)
	f.must(err)
	f.must(f.c.Groups().AddMembers(f.ctx, g2.ID, a.ID)) // G1: a is in two groups
	m1, _ := f.c.Groups().Members(f.ctx, f.grp)
	m2, _ := f.c.Groups().Members(f.ctx, g2.ID)
	if len(m1) != 2 || len(m2) != 1 || m2[0].ID != a.ID {
		t.Fatalf("members: %d and %d", len(m1), len(m2))
	}
	// G5: rename; names are unique.
	if _, err := f.c.Groups().Rename(f.ctx, g2.ID, "训练组"); !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("rename onto a taken name: %v", err)
	}
	g, err := f.c.Groups().Rename(f.ctx, g2.ID, "灾备组")
	f.must(err)
	if g.Name != "灾备组" {
		t.Fatal(g.Name)
	}
	if _, err := f.c.Groups().Create(f.ctx, "备用组"); err != nil {
		t.Fatalf("the name a rename gave up cannot be taken again: %v", err)
	}
	if _, err := f.c.Groups().Create(f.ctx, ""); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("empty group name: %v", err)
	}
	// C2: a cluster keeps one group at least.
	if err := f.c.Groups().RemoveMembers(f.ctx, f.grp, b.ID); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("removing b's last group: %v", err)
	}
	// G6: delete needs a real target, then moves the members there.
	if err := f.c.Groups().Delete(f.ctx, f.grp, f.grp); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("delete into itself: %v", err)
	}
	if err := f.c.Groups().Delete(f.ctx, f.grp, "grp-nope"); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("delete into a missing group: %v", err)
	}
	rec := f.job(dlc.NewJob("on-old-group").OnGroup(f.grp))
	f.must(f.c.Groups().Delete(f.ctx, f.grp, g2.ID))
	if m2, _ = f.c.Groups().Members(f.ctx, g2.ID); len(m2) != 2 {
		t.Fatalf("G6 target has %d members, want 2", len(m2))
	}
	got, _ := f.c.Clusters().Get(f.ctx, a.ID)
	if len(got.Spec.Groups) != 1 || got.Spec.Groups[0] != g2.ID || got.State == cluster.Deleting {
		t.Fatalf("G6 a's groups %v, state %s", got.Spec.Groups, got.State)
	}
	// J19: the job config is unchanged, and its next run fails saying why.
	kept, err := f.c.Jobs().Get(f.ctx, rec.ID)
	f.must(err)
	if kept.Config.Group != f.grp {
		t.Fatal("G6 changed a job config")
	}
	r, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	if r.State != job.Failed || !strings.Contains(r.Message, "cluster group "+f.grp+" does not exist") {
		t.Fatalf("J19: %s %q", r.State, r.Message)
	}
}

// J19: a run already waiting for a group fails when the group is deleted.
func TestWaitingGroupRunFailsOnGroupDeleteJ19(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	other, err := f.c.Groups().Create(f.ctx, "other")
	f.must(err)
	rec := f.job(dlc.NewJob("waits").OnGroup(f.grp))
	r := f.start(rec.ID)
	if r.State != job.Waiting || r.WaitReason != job.NoMemberRunning {
		t.Fatalf("run before the delete: %s %s", r.State, r.WaitReason)
	}
	f.must(f.c.Groups().Delete(f.ctx, f.grp, other.ID))
	f.m.Reconcile()
	if r = f.run(r.ID); r.State != job.Failed || !strings.Contains(r.Message, f.grp) {
		t.Fatalf("waiting run after its group was deleted: %s %q", r.State, r.Message)
	}
}

// J18: waiting runs say why, and move when the reason goes away.
func TestWaitingReasonsJ18(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{Ray: memory.RayHooks{ClusterStart: func(c *cluster.Cluster) error {
		if strings.HasPrefix(c.Spec.Name, "broken") {
			return fmt.Errorf("image pull failed")
		}
		return nil
	}}})
	// Existing cluster not running.
	cl, err := f.c.Clusters().Create(f.ctx, f.spec("idle", 1, 1))
	f.must(err)
	f.settle()
	rc := f.job(dlc.NewJob("on-cluster").OnCluster(cl.ID))
	r1 := f.start(rc.ID)
	if r1.State != job.Waiting || r1.WaitReason != job.ClusterNotRunning || r1.Message != "waiting for cluster "+cl.ID+" to run" {
		t.Fatalf("J18 cluster mode: %s %s %q", r1.State, r1.WaitReason, r1.Message)
	}
	// Group with no running member, then all abnormal.
	g, err := f.c.Groups().Create(f.ctx, "broken-group")
	f.must(err)
	bs := f.spec("broken1", 1, 1)
	bs.Groups = []string{g.ID}
	bc, err := f.c.Clusters().Create(f.ctx, bs)
	f.must(err)
	rg := f.job(dlc.NewJob("on-group").OnGroup(g.ID))
	r2 := f.start(rg.ID)
	if r2.State != job.Waiting || r2.WaitReason != job.NoMemberRunning || r2.Message != "waiting for a running member of group "+g.ID {
		t.Fatalf("J18 group mode: %s %s %q", r2.State, r2.WaitReason, r2.Message)
	}
	f.settle()
	_, err = f.c.Clusters().Start(f.ctx, bc.ID)
	f.must(err)
	f.settle()
	if got, _ := f.c.Clusters().Get(f.ctx, bc.ID); got.State != cluster.Abnormal || got.Reason != "image pull failed" {
		t.Fatalf("broken cluster: %s %q", got.State, got.Reason)
	}
	if r2 = f.run(r2.ID); r2.WaitReason != job.AllMembersAbnormal {
		t.Fatalf("J18 all abnormal: %s %s", r2.State, r2.WaitReason)
	}
	// On-demand without quota: a second cluster's worth does not fit.
	_, err = f.c.ResourceGroups().Register(f.ctx, quota.Group{ID: "rg-small", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 8000, Memory: 24 * quota.GiB}})
	f.must(err)
	od := f.job(dlc.NewJob("od").OnDemand("pkg-1", "rg-small").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").WorkerGroup("w", "cu.4c8g", 1, 1))
	a := f.start(od.ID)
	b := f.start(od.ID)
	if a.State != job.Provisioning || b.State != job.Waiting || b.WaitReason != job.InsufficientQuota ||
		b.Message != "waiting for quota in resource group rg-small" {
		t.Fatalf("J18 on-demand: a %s, b %s %s %q", a.State, b.State, b.WaitReason, b.Message)
	}
	// Start the idle cluster: the cluster-mode run goes; the on-demand
	// ones run one after the other as quota frees.
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	f.must(err)
	f.settle()
	for _, id := range []string{r1.ID, a.ID, b.ID} {
		if r := f.run(id); r.State != job.Succeeded {
			t.Fatalf("run %s ended %s %s (%s)", id, r.State, r.Message, r.WaitReason)
		}
	}
	if u, _ := f.c.ResourceGroups().Get(f.ctx, "rg-small"); !u.Reserved.IsZero() {
		t.Fatalf("on-demand clusters left %v reserved", u.Reserved)
	}
	all, _ := f.c.Clusters().List(f.ctx)
	for _, c := range all {
		if c.Temporary {
			t.Fatalf("temporary cluster %s left behind (%s)", c.ID, c.State)
		}
	}
	f.must(f.c.CheckQuota(f.ctx))
}
