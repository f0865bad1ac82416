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
	cl, err := f.c.CreateCluster(f.ctx, f.spec("c1", 1, 2))
	f.must(err)
	if cl.State != cluster.Creating || cl.Creator != "alice" {
		t.Fatalf("created: %s by %s", cl.State, cl.Creator)
	}
	// C12: no start, edit or delete while creating.
	_, err = f.c.StartCluster(f.ctx, cl.ID)
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
		{"start from created", func() error { _, err := f.c.StartCluster(f.ctx, cl.ID); return err }, cluster.Running},
		{"hibernate running", func() error { _, err := f.c.HibernateCluster(f.ctx, cl.ID); return err }, cluster.Hibernated},
		{"start from hibernated", func() error { _, err := f.c.StartCluster(f.ctx, cl.ID); return err }, cluster.Running},
	}
	for _, s := range steps {
		f.must(s.op())
		got, _ := f.c.GetCluster(f.ctx, cl.ID)
		if !got.State.Transitional() {
			t.Fatalf("%s: state %s right after the call, want a transitional one", s.name, got.State)
		}
		// C12: nothing but clone during a transition.
		if _, err := f.c.EditCluster(f.ctx, got); !errors.Is(err, dlc.ErrState) {
			t.Fatalf("%s: edit during %s: %v", s.name, got.State, err)
		}
		f.settle()
		got, _ = f.c.GetCluster(f.ctx, cl.ID)
		if got.State != s.state {
			t.Fatalf("%s: state %s, want %s", s.name, got.State, s.state)
		}
	}
	// Start is refused while running.
	if _, err := f.c.StartCluster(f.ctx, cl.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("start while running: %v", err)
	}
	// Clone in any state, with a new name required.
	if _, err := f.c.CloneCluster(f.ctx, cl.ID, ""); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("clone without a name: %v", err)
	}
	if _, err := f.c.CloneCluster(f.ctx, cl.ID, "c1"); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("clone with the same name: %v", err)
	}
	clone, err := f.c.CloneCluster(f.ctx, cl.ID, "c1_copy")
	f.must(err)
	if clone.Spec.Workers[0].NodeSpec != "cu.4c8g" || clone.ID == cl.ID {
		t.Fatalf("clone: %+v", clone.Spec)
	}
	// Delete releases everything.
	f.must(f.c.DeleteCluster(f.ctx, cl.ID))
	f.settle()
	if _, err := f.c.GetCluster(f.ctx, cl.ID); !errors.Is(err, dlc.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	u, _ := f.c.ResourceGroup(f.ctx, "rg-1")
	if !u.Reserved.IsZero() {
		t.Fatalf("quota still reserved after delete: %v", u.Reserved)
	}
	// The operation log has user operations and system events (C13).
	evs, _ := f.c.Events(f.ctx, "cluster", cl.ID)
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
			_, err := f.c.CreateCluster(f.ctx, s)
			fs := dlc.Fields(err)
			if len(fs) != 1 || string(fs[0].Path) != tc.path || fs[0].Rule != tc.rule {
				t.Fatalf("got %v", err)
			}
		})
	}
	all, _ := f.c.ListClusters(f.ctx)
	if len(all) != 0 {
		t.Fatalf("a refused create stored %d clusters", len(all))
	}
	_, err := f.c.CreateCluster(f.ctx, f.spec("same", 1, 1))
	f.must(err)
	if _, err := f.c.CreateCluster(f.ctx, f.spec("same", 1, 1)); !errors.Is(err, dlc.ErrConflict) {
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
	cl, err := f.c.CreateCluster(f.ctx, s)
	f.must(err)
	f.settle()
	_, err = f.c.StartCluster(f.ctx, cl.ID)
	f.must(err)
	f.settle()
	u, _ := f.c.ResourceGroup(f.ctx, "rg-1")
	want := quota.Resources{MilliCPU: 2*4000 + 4000, Memory: 2*16*quota.GiB + 8*quota.GiB}
	if u.Reserved != want {
		t.Fatalf("C7 reserved %v, want %v (two heads + one worker)", u.Reserved, want)
	}
	d, _ := f.c.ClusterDetails(f.ctx, cl.ID)
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
	granted, err := f.c.Autoscale(f.ctx, cl.ID, "cpu", 10)
	f.must(err)
	if granted != 6 {
		t.Fatalf("C14 granted %d workers, want 6", granted)
	}
	u, _ = f.c.ResourceGroup(f.ctx, "rg-1")
	if u.Allocatable.MilliCPU != 0 {
		t.Fatalf("C14 allocatable cpu %d after scale-up", u.Allocatable.MilliCPU)
	}
	f.must(f.c.CheckQuota())
	// C15: a run on the full cluster still runs; its driver takes no quota.
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID))
	r, err := f.c.Run(f.ctx, rec.ID)
	f.must(err)
	f.settle()
	if r = f.run(r.ID); r.State != job.Succeeded {
		t.Fatalf("C15 run on a full cluster: %s %s", r.State, r.Message)
	}
	if u2, _ := f.c.ResourceGroup(f.ctx, "rg-1"); u2.Reserved != u.Reserved {
		t.Fatalf("C15 a run changed the reservation: %v → %v", u.Reserved, u2.Reserved)
	}
	// Scale-down releases; a range edit applies live and the reservation follows.
	granted, err = f.c.Autoscale(f.ctx, cl.ID, "cpu", 0)
	f.must(err)
	if granted != 1 {
		t.Fatalf("scale-down to the minimum: %d", granted)
	}
	cur, _ := f.c.GetCluster(f.ctx, cl.ID)
	cur.Spec.Workers[0].Instances = cluster.Range(3, 4)
	cur.Spec.Image = "ray-2.46.0-py311-cpu"
	res, err := f.c.EditCluster(f.ctx, cur)
	f.must(err)
	if strings.Join(res.Applied, ",") != "workerGroups[0].instances" || strings.Join(res.NeedsRestart, ",") != "image" {
		t.Fatalf("edit: applied %v, restart %v", res.Applied, res.NeedsRestart)
	}
	if res.Cluster.Replicas["cpu"] != 3 {
		t.Fatalf("live min raised replicas to %d", res.Cluster.Replicas["cpu"])
	}
	// Hibernate releases everything.
	_, err = f.c.HibernateCluster(f.ctx, cl.ID)
	f.must(err)
	f.settle()
	if u, _ = f.c.ResourceGroup(f.ctx, "rg-1"); !u.Reserved.IsZero() {
		t.Fatalf("hibernate left %v reserved", u.Reserved)
	}
	// A start that cannot fit is ErrQuota and changes nothing.
	big := f.spec("big", 9, 9) // 4 + 36 cores > 32
	bc, err := f.c.CreateCluster(f.ctx, big)
	f.must(err)
	f.settle()
	_, err = f.c.StartCluster(f.ctx, bc.ID)
	var qe *errs.QuotaError
	if !errors.Is(err, dlc.ErrQuota) || !errors.As(err, &qe) {
		t.Fatalf("start over quota: %v", err)
	}
	if got, _ := f.c.GetCluster(f.ctx, bc.ID); got.State != cluster.Created {
		t.Fatalf("refused start changed state to %s", got.State)
	}
}

// C13: details while running: basic info, history, events, pods, dashboard.
func TestClusterDetailsC13(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{Ray: memory.RayHooks{RunOutcome: func(r *job.Run) memory.Outcome {
		return memory.Outcome{Logs: []string{"epoch 1 loss=0.9", "epoch 2 loss=0.5"}}
	}}})
	cl := f.runningCluster("detail")
	rec := f.job(dlc.NewJob("history").OnCluster(cl.ID))
	r, err := f.c.Run(f.ctx, rec.ID)
	f.must(err)
	f.settle()
	d, err := f.c.ClusterDetails(f.ctx, cl.ID)
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
	logs, _ := f.c.RunLogs(f.ctx, r.ID)
	if len(logs) < 2 || logs[0] != "epoch 1 loss=0.9" {
		t.Fatalf("logs %q", logs)
	}
	// The dashboard goes away with the cluster's compute.
	_, err = f.c.HibernateCluster(f.ctx, cl.ID)
	f.must(err)
	f.settle()
	if d, _ = f.c.ClusterDetails(f.ctx, cl.ID); d.Dashboard != "" || len(d.Pods) != 0 {
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
	r, err := f.c.Run(f.ctx, rec.ID)
	f.must(err)
	f.m.Settle(100e6, 5)
	if r = f.run(r.ID); r.State != job.Running {
		t.Fatalf("run %s", r.State)
	}
	if err := f.c.DeleteCluster(f.ctx, cl.ID); !errors.Is(err, dlc.ErrState) || !strings.Contains(err.Error(), "Force") {
		t.Fatalf("delete with an active run: %v", err)
	}
	if _, err := f.c.HibernateCluster(f.ctx, cl.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("hibernate with an active run: %v", err)
	}
	f.must(f.c.DeleteCluster(f.ctx, cl.ID, dlc.Force()))
	if r = f.run(r.ID); r.State != job.Stopped || !strings.Contains(r.Message, "deleted") {
		t.Fatalf("forced delete left the run %s: %s", r.State, r.Message)
	}
	f.m.Settle(100e6, 10)
	// J18/J19 for existing-cluster mode: the next run fails, saying why.
	r2, err := f.c.Run(f.ctx, rec.ID)
	f.must(err)
	if r2.State != job.Failed || !strings.Contains(r2.Message, "does not exist") {
		t.Fatalf("run on a deleted cluster: %s %s", r2.State, r2.Message)
	}
}

// G1, G2, G5, G6: groups hold many clusters, a cluster many groups, across
// resource groups; rename; delete moves members to a target.
func TestGroupsG1toG6(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	f.must(f.c.RegisterResourceGroup(f.ctx, quota.Group{ID: "rg-2", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 16000, Memory: 64 * quota.GiB}}))
	g2, err := f.c.CreateGroup(f.ctx, "备用组")
	f.must(err)
	a, err := f.c.CreateCluster(f.ctx, f.spec("a", 1, 1))
	f.must(err)
	bs := f.spec("b", 1, 1)
	bs.ResourceGroup = "rg-2" // G2: another resource group
	b, err := f.c.CreateCluster(f.ctx, bs)
	f.must(err)
	f.must(f.c.AddMembers(f.ctx, g2.ID, a.ID)) // G1: a is in two groups
	m1, _ := f.c.Members(f.ctx, f.grp)
	m2, _ := f.c.Members(f.ctx, g2.ID)
	if len(m1) != 2 || len(m2) != 1 || m2[0].ID != a.ID {
		t.Fatalf("members: %d and %d", len(m1), len(m2))
	}
	// G5: rename; names are unique.
	if _, err := f.c.RenameGroup(f.ctx, g2.ID, "训练组"); !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("rename onto a taken name: %v", err)
	}
	g, err := f.c.RenameGroup(f.ctx, g2.ID, "灾备组")
	f.must(err)
	if g.Name != "灾备组" {
		t.Fatal(g.Name)
	}
	if _, err := f.c.CreateGroup(f.ctx, ""); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("empty group name: %v", err)
	}
	// C2: a cluster keeps one group at least.
	if err := f.c.RemoveMembers(f.ctx, f.grp, b.ID); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("removing b's last group: %v", err)
	}
	// G6: delete needs a real target, then moves the members there.
	if err := f.c.DeleteGroup(f.ctx, f.grp, f.grp); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("delete into itself: %v", err)
	}
	if err := f.c.DeleteGroup(f.ctx, f.grp, "grp-nope"); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("delete into a missing group: %v", err)
	}
	rec := f.job(dlc.NewJob("on-old-group").OnGroup(f.grp))
	f.must(f.c.DeleteGroup(f.ctx, f.grp, g2.ID))
	if m2, _ = f.c.Members(f.ctx, g2.ID); len(m2) != 2 {
		t.Fatalf("G6 target has %d members, want 2", len(m2))
	}
	got, _ := f.c.GetCluster(f.ctx, a.ID)
	if len(got.Spec.Groups) != 1 || got.Spec.Groups[0] != g2.ID || got.State == cluster.Deleting {
		t.Fatalf("G6 a's groups %v, state %s", got.Spec.Groups, got.State)
	}
	// J19: the job config is unchanged, and its next run fails saying why.
	kept, err := f.c.GetJob(f.ctx, rec.ID)
	f.must(err)
	if kept.Config.Group != f.grp {
		t.Fatal("G6 changed a job config")
	}
	r, err := f.c.Run(f.ctx, rec.ID)
	f.must(err)
	if r.State != job.Failed || !strings.Contains(r.Message, "cluster group "+f.grp+" does not exist") {
		t.Fatalf("J19: %s %q", r.State, r.Message)
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
	cl, err := f.c.CreateCluster(f.ctx, f.spec("idle", 1, 1))
	f.must(err)
	f.settle()
	rc := f.job(dlc.NewJob("on-cluster").OnCluster(cl.ID))
	r1, err := f.c.Run(f.ctx, rc.ID)
	f.must(err)
	if r1.State != job.Waiting || r1.WaitReason != job.ClusterNotRunning {
		t.Fatalf("J18 cluster mode: %s %s", r1.State, r1.WaitReason)
	}
	// Group with no running member, then all abnormal.
	g, _ := f.c.CreateGroup(f.ctx, "broken-group")
	bs := f.spec("broken1", 1, 1)
	bs.Groups = []string{g.ID}
	bc, err := f.c.CreateCluster(f.ctx, bs)
	f.must(err)
	rg := f.job(dlc.NewJob("on-group").OnGroup(g.ID))
	r2, err := f.c.Run(f.ctx, rg.ID)
	f.must(err)
	if r2.WaitReason != job.NoMemberRunning {
		t.Fatalf("J18 group mode: %s %s", r2.State, r2.WaitReason)
	}
	f.settle()
	_, err = f.c.StartCluster(f.ctx, bc.ID)
	f.must(err)
	f.settle()
	if got, _ := f.c.GetCluster(f.ctx, bc.ID); got.State != cluster.Abnormal || got.Reason != "image pull failed" {
		t.Fatalf("broken cluster: %s %q", got.State, got.Reason)
	}
	if r2 = f.run(r2.ID); r2.WaitReason != job.AllMembersAbnormal {
		t.Fatalf("J18 all abnormal: %s %s", r2.State, r2.WaitReason)
	}
	// On-demand without quota: a second cluster's worth does not fit.
	f.must(f.c.RegisterResourceGroup(f.ctx, quota.Group{ID: "rg-small", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 8000, Memory: 24 * quota.GiB}}))
	od := f.job(dlc.NewJob("od").OnDemand("pkg-1", "rg-small").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").WorkerGroup("w", "cu.4c8g", 1, 1))
	a, err := f.c.Run(f.ctx, od.ID)
	f.must(err)
	b, err := f.c.Run(f.ctx, od.ID)
	f.must(err)
	if a.State != job.Provisioning || b.State != job.Waiting || b.WaitReason != job.InsufficientQuota {
		t.Fatalf("J18 on-demand: a %s, b %s %s", a.State, b.State, b.WaitReason)
	}
	// Start the idle cluster: the cluster-mode run goes; the on-demand
	// ones run one after the other as quota frees.
	_, err = f.c.StartCluster(f.ctx, cl.ID)
	f.must(err)
	f.settle()
	for _, id := range []string{r1.ID, a.ID, b.ID} {
		if r := f.run(id); r.State != job.Succeeded {
			t.Fatalf("run %s ended %s %s (%s)", id, r.State, r.Message, r.WaitReason)
		}
	}
	if u, _ := f.c.ResourceGroup(f.ctx, "rg-small"); !u.Reserved.IsZero() {
		t.Fatalf("on-demand clusters left %v reserved", u.Reserved)
	}
	all, _ := f.c.ListClusters(f.ctx)
	for _, c := range all {
		if c.Temporary {
			t.Fatalf("temporary cluster %s left behind (%s)", c.ID, c.State)
		}
	}
}
