package dlc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/storage"
)

// J12: saving validates and resolves references; only a valid config is saved.
func TestSaveJobJ12(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	cl, err := f.c.CreateCluster(f.ctx, f.spec("c", 1, 1))
	f.must(err)
	cl.Spec.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/data"}}
	f.settle()
	cl, _ = f.c.GetCluster(f.ctx, cl.ID)
	cl.Spec.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/data"}}
	_, err = f.c.EditCluster(f.ctx, cl)
	f.must(err)
	base := func() *job.Builder {
		return dlc.NewJob("j").COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python main.py")
	}
	od := func(rg string, workers int) *job.Builder {
		return base().OnDemand("pkg-1", rg).Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c16g").WorkerGroup("w", "cu.8c32g", workers, workers)
	}
	cases := []struct {
		name string
		b    *job.Builder
		path string // "" = saved
	}{
		{"J12 valid cluster mode", base().OnCluster(cl.ID), ""},
		{"J12 valid group mode", base().OnGroup(f.grp), ""},
		{"J12 valid on-demand that fits", od("rg-1", 3), ""},
		{"J12 unknown cluster", base().OnCluster("cls-nope"), "cluster"},
		{"J12 unknown group", base().OnGroup("grp-nope"), "group"},
		{"J12 unknown resource group", od("rg-nope", 1), "onDemand.resourceGroup"},
		{"J12 minimum never fits the quota", od("rg-1", 4), "onDemand.environment"}, // 4 + 32 cores > 32
		{"J9 job mount on the cluster's path", base().OnCluster(cl.ID).Mount(storage.Mount{Type: storage.COS, Instance: "d-1250000000", MountPath: "/data"}), "mounts[0].mountPath"},
		{"J1 invalid config is not saved", base().OnGroup(f.grp).Tag("", "x"), "tags[]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := tc.b.Build()
			rec, err := f.c.SaveJob(f.ctx, cfg)
			if tc.path == "" {
				if err != nil || rec.Revision != 1 || rec.Creator != "alice" {
					t.Fatalf("save: %v %+v", err, rec)
				}
				return
			}
			fs := dlc.Fields(err)
			if len(fs) != 1 || string(fs[0].Path) != tc.path {
				t.Fatalf("got %v, want one problem at %s", err, tc.path)
			}
		})
	}
	list, _ := f.c.ListJobs(f.ctx)
	if len(list) != 3 {
		t.Fatalf("%d configs saved, want the 3 valid ones", len(list))
	}
}

// J13–J17: list columns, run, edit, copy, delete.
func TestJobLifecycleJ13toJ17(t *testing.T) {
	d := memory.DefaultDelays
	d.Run = 1e12
	f := newFixture(t, dlctest.MemoryOptions{Delays: &d})
	cl := f.runningCluster("c")
	rec := f.job(dlc.NewJob("训练任务").OnCluster(cl.ID).Tag("team", "cv"))
	r1, err := f.c.Run(f.ctx, rec.ID) // J14
	f.must(err)
	f.m.Settle(100e6, 5)
	// J13: every column.
	list, err := f.c.ListJobs(f.ctx)
	f.must(err)
	e := list[0]
	if e.ID != rec.ID || e.Name != "训练任务" || e.Mode != job.ClusterMode || e.Resource != cl.ID ||
		e.Package != "cos://jobs-1250000000/job.zip" || e.Running != 1 || e.Priority != 5 ||
		e.Tags["team"] != "cv" || e.Creator != "alice" || e.CreatedAt.IsZero() {
		t.Fatalf("J13 list entry: %+v", e)
	}
	// J15: only package, entrypoint, mounts and runtime env change; a new
	// revision; runs keep theirs.
	cur, _ := f.c.GetJob(f.ctx, rec.ID)
	cur.Config.Name = "renamed"
	cur.Config.Cluster = "cls-other"
	if _, err := f.c.EditJob(f.ctx, cur); !errors.Is(err, dlc.ErrInvalid) || len(dlc.Fields(err)) != 2 || !strings.Contains(err.Error(), "J15") {
		t.Fatalf("J15 forbidden edit: %v", err)
	}
	cur, _ = f.c.GetJob(f.ctx, rec.ID)
	cur.Config.Entrypoint = "python v2.py"
	cur.Config.Runtime.Pip = []string{"numpy<2"}
	edited, err := f.c.EditJob(f.ctx, cur)
	f.must(err)
	if edited.Revision != 2 {
		t.Fatalf("J15 revision %d", edited.Revision)
	}
	if _, err := f.c.EditJob(f.ctx, cur); !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("stale edit: %v", err)
	}
	r2, err := f.c.Run(f.ctx, rec.ID)
	f.must(err)
	if g := f.run(r1.ID); g.Revision != 1 || g.Config.Entrypoint != "python main.py" {
		t.Fatalf("J15 old run changed: rev %d %q", g.Revision, g.Config.Entrypoint)
	}
	if r2.Revision != 2 || r2.Config.Entrypoint != "python v2.py" {
		t.Fatalf("J14 new run: rev %d %q", r2.Revision, r2.Config.Entrypoint)
	}
	// J16: copy everything under a new name.
	cp, err := f.c.CopyJob(f.ctx, rec.ID, "")
	f.must(err)
	if cp.ID == rec.ID || cp.Config.Name != "训练任务 (copy)" || cp.Config.Entrypoint != "python v2.py" || cp.Config.Tags["team"] != "cv" {
		t.Fatalf("J16 copy: %+v", cp.Config)
	}
	// J17: no delete while a run is active.
	if err := f.c.DeleteJob(f.ctx, rec.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("J17 delete with active runs: %v", err)
	}
	for _, id := range []string{r1.ID, r2.ID} {
		r, err := f.c.StopRun(f.ctx, id)
		f.must(err)
		if r.State != job.Stopped || !strings.Contains(r.Message, "alice") {
			t.Fatalf("stop: %s %s", r.State, r.Message)
		}
	}
	if _, err := f.c.StopRun(f.ctx, r1.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("stopping a stopped run: %v", err)
	}
	f.must(f.c.DeleteJob(f.ctx, rec.ID))
	if _, err := f.c.GetJob(f.ctx, rec.ID); !errors.Is(err, dlc.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}

// J14, J3: on-demand runs queue by priority, FIFO within one, and each
// gets a temporary cluster released when it ends; Submit saves and runs.
func TestOnDemandQueueJ3J14(t *testing.T) {
	d := memory.DefaultDelays
	d.Run = 1e9
	var order []string
	f := newFixture(t, dlctest.MemoryOptions{Delays: &d, Ray: memory.RayHooks{RunOutcome: func(r *job.Run) memory.Outcome {
		order = append(order, r.Config.Name)
		if r.Config.Name == "fails" {
			return memory.Outcome{Fail: true, Message: "exit code 1"}
		}
		return memory.Outcome{}
	}}})
	// Each run takes 16 + 16 cores: only one fits rg-1 (32 cores) at a time.
	mk := func(name string, prio int) *job.Config {
		cfg, err := dlc.NewJob(name).OnDemand("pkg-1", "rg-1").Priority(prio).Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.16c64g").WorkerGroup("w", "cu.16c32g", 1, 1).
			COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python main.py").Build()
		f.must(err)
		return cfg
	}
	var runs []*job.Run
	for _, j := range []struct {
		name string
		prio int
	}{{"first", 5}, {"low", 1}, {"high-a", 9}, {"fails", 5}, {"high-b", 9}} {
		_, r, err := job.Submit(f.ctx, f.c, mk(j.name, j.prio))
		f.must(err)
		runs = append(runs, r)
	}
	if runs[0].State != job.Provisioning {
		t.Fatalf("first run %s", runs[0].State)
	}
	for _, r := range runs[1:] {
		if r.State != job.Waiting || r.WaitReason != job.InsufficientQuota {
			t.Fatalf("queued run %s: %s %s", r.Config.Name, r.State, r.WaitReason)
		}
	}
	f.settle()
	if got := strings.Join(order, ","); got != "first,high-a,high-b,fails,low" {
		t.Fatalf("admission order %s", got)
	}
	if r := f.run(runs[3].ID); r.State != job.Failed || r.Message != "exit code 1" {
		t.Fatalf("failing run: %s %s", r.State, r.Message)
	}
	if u, _ := f.c.ResourceGroup(f.ctx, "rg-1"); !u.Reserved.IsZero() {
		t.Fatalf("left reserved: %v", u.Reserved)
	}
	// Stopping a queued on-demand run takes it out of the queue.
	_, a, _ := job.Submit(f.ctx, f.c, mk("a", 5))
	_, b, _ := job.Submit(f.ctx, f.c, mk("b", 5))
	if _, err := f.c.StopRun(f.ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	f.settle()
	if f.run(a.ID).State != job.Succeeded || f.run(b.ID).State != job.Stopped {
		t.Fatalf("a %s, b %s", f.run(a.ID).State, f.run(b.ID).State)
	}
	// A temporary cluster belongs to its run.
	_, c, _ := job.Submit(f.ctx, f.c, mk("c", 5))
	tmp, err := f.c.GetCluster(f.ctx, c.ClusterID)
	f.must(err)
	if !tmp.Temporary || tmp.OwnerRun != c.ID {
		t.Fatalf("temporary cluster %+v", tmp)
	}
	if err := f.c.DeleteCluster(f.ctx, tmp.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("deleting a run's cluster: %v", err)
	}
}

// C6: templates are saved, listed and copied, never shared.
func TestTemplatesC6(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	tmpl, err := dlc.NewCluster("").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c16g").
		WorkerGroup("w", "cu.4c8g", 1, 2).BuildTemplate("cpu-small")
	f.must(err)
	f.must(f.c.SaveTemplate(f.ctx, tmpl))
	if err := f.c.SaveTemplate(f.ctx, &cluster.Template{Name: "bad"}); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("invalid template saved: %v", err)
	}
	got, err := f.c.Template(f.ctx, "cpu-small")
	f.must(err)
	spec, err := dlc.NewCluster("from_tmpl").Groups(f.grp).Resources("pkg-1", "rg-1").FromTemplate(got).
		EditWorkerGroup("w", func(w *cluster.WorkerGroup) { w.Instances = cluster.Range(2, 2) }).Build()
	f.must(err)
	_, err = f.c.CreateCluster(f.ctx, spec)
	f.must(err)
	again, _ := f.c.Template(f.ctx, "cpu-small")
	if again.Workers[0].Instances.Min != 1 {
		t.Fatal("adjusting a cluster changed the saved template")
	}
	cfg, err := dlc.NewJob("od").OnDemand("pkg-1", "rg-1").FromTemplate(again).
		COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").Build()
	f.must(err)
	if _, err := f.c.SaveJob(f.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	list, _ := f.c.ListTemplates(f.ctx)
	if len(list) != 1 {
		t.Fatalf("%d templates", len(list))
	}
	f.must(f.c.DeleteTemplate(f.ctx, "cpu-small"))
	if _, err := f.c.Template(f.ctx, "cpu-small"); !errors.Is(err, dlc.ErrNotFound) {
		t.Fatalf("deleted template: %v", err)
	}
}

// C16, J9: a group run is not placed on a member whose mounts take one of
// the job's mount paths; when every running member clashes, it fails
// saying so.
func TestGroupRunMountClash(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	cl := f.runningCluster("mounted")
	cl.Spec.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/data"}}
	_, err := f.c.EditCluster(f.ctx, cl)
	f.must(err)
	rec := f.job(dlc.NewJob("clash").OnGroup(f.grp).Mount(storage.Mount{Type: storage.COS, Instance: "d-1250000000", MountPath: "/data"}))
	r, err := f.c.Run(f.ctx, rec.ID)
	f.must(err)
	if r.State != job.Failed || !strings.Contains(r.Message, "mounts storage on a path") {
		t.Fatalf("clashing group run: %s %q", r.State, r.Message)
	}
	ok := f.job(dlc.NewJob("fine").OnGroup(f.grp).Mount(storage.Mount{Type: storage.COS, Instance: "d-1250000000", MountPath: "/models"}))
	r, err = f.c.Run(f.ctx, ok.ID)
	f.must(err)
	if r.State != job.Provisioning {
		t.Fatalf("non-clashing group run: %s %q", r.State, r.Message)
	}
}

// A retried Submit under one request id saves one config and starts one run.
func TestSubmitIdempotent(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	f.runningCluster("c")
	cfg, err := dlc.NewJob("retried").OnGroup(f.grp).COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").Build()
	f.must(err)
	ctx := dlc.WithRequestID(f.ctx, "req-42")
	rec1, run1, err := job.Submit(ctx, f.c, cfg)
	f.must(err)
	rec2, run2, err := job.Submit(ctx, f.c, cfg)
	f.must(err)
	if rec1.ID != rec2.ID || run1.ID != run2.ID {
		t.Fatalf("a retry made new objects: %s/%s vs %s/%s", rec1.ID, run1.ID, rec2.ID, run2.ID)
	}
	runs, _ := f.c.ListRuns(f.ctx, rec1.ID)
	jobs, _ := f.c.ListJobs(f.ctx)
	if len(runs) != 1 || len(jobs) != 1 {
		t.Fatalf("%d runs, %d jobs after a retried submit", len(runs), len(jobs))
	}
	_, run3, err := job.Submit(dlc.WithRequestID(f.ctx, "req-43"), f.c, cfg)
	f.must(err)
	if run3.ID == run1.ID {
		t.Fatal("a new request id returned the old run")
	}
}
