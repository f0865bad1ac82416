package dlc_test

import (
	"archive/zip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	cl, err := f.c.Clusters().Create(f.ctx, f.spec("c", 1, 1))
	f.must(err)
	f.settle()
	cl, _ = f.c.Clusters().Get(f.ctx, cl.ID)
	cl.Spec.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/data"}}
	_, err = f.c.Clusters().Update(f.ctx, cl)
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
			rec, err := f.c.Jobs().Create(f.ctx, cfg, dlc.SaveOptions{})
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
	list, _ := f.c.Jobs().List(f.ctx)
	if len(list) != 3 {
		t.Fatalf("%d configs saved, want the 3 valid ones", len(list))
	}
}

// writeZIP writes a ZIP archive holding files (name → content) and
// returns its path.
func writeZIP(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	p := filepath.Join(dir, "job.zip")
	out, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(out)
	for name, content := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// J5, J12: a local package is inspected when the config is saved: it must
// be a ZIP archive of at most 100 MB; a larger one belongs in COS.
func TestSaveJobLocalPackageJ5(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	cases := []struct {
		name    string
		file    func(t *testing.T, dir string) string
		saved   bool
		message string // what the problem says, for a refused package
	}{
		{"J5 a valid local ZIP saves", func(t *testing.T, dir string) string {
			return writeZIP(t, dir, map[string]string{"main.py": "print('hello')\n"})
		}, true, ""},
		{"J5 a file that is not a ZIP", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "job.zip")
			if err := os.WriteFile(p, []byte("print('not a zip archive, just a script')\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, false, "not a ZIP"},
		{"J5 over 100 MB", func(t *testing.T, dir string) string {
			p := writeZIP(t, dir, map[string]string{"main.py": "print('hello')\n"})
			if err := os.Truncate(p, storage.MaxLocalPackageSize+1); err != nil { // sparse
				t.Fatal(err)
			}
			return p
		}, false, "COS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.file(t, t.TempDir())
			cfg, err := dlc.NewJob("local-package").OnGroup(f.grp).
				LocalPackage(path).Entrypoint("python main.py").Build()
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			rec, err := f.c.Jobs().Create(f.ctx, cfg, dlc.SaveOptions{})
			if tc.saved {
				if err != nil {
					t.Fatalf("save: %v", err)
				}
				got, err := f.c.Jobs().Get(f.ctx, rec.ID)
				if err != nil || got.Config.Package.Local != path {
					t.Fatalf("saved config: %v %+v", err, got)
				}
				return
			}
			if !errors.Is(err, dlc.ErrInvalid) {
				t.Fatalf("save: %v, want ErrInvalid", err)
			}
			fs := dlc.Fields(err)
			if len(fs) == 0 {
				t.Fatalf("save: %v has no field problem", err)
			}
			for _, fe := range fs {
				if !strings.HasPrefix(string(fe.Path), "package.local") || fe.Rule != "J5" {
					t.Errorf("problem at %s [%s], want under package.local [J5]: %v", fe.Path, fe.Rule, fe)
				}
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("the problem %q does not say %q", err, tc.message)
			}
		})
	}
	list, _ := f.c.Jobs().List(f.ctx)
	if len(list) != 1 {
		t.Fatalf("%d configs saved, want the one with a valid package", len(list))
	}
}

// J13–J17: list columns, run, edit, copy, delete.
func TestJobLifecycleJ13toJ17(t *testing.T) {
	d := memory.DefaultDelays
	d.Run = 1e12
	f := newFixture(t, dlctest.MemoryOptions{Delays: &d})
	cl := f.runningCluster("c")
	rec := f.job(dlc.NewJob("训练任务").OnCluster(cl.ID).Tag("team", "cv"))
	r1, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{}) // J14
	f.must(err)
	f.m.Settle(100e6, 5)
	if r := f.run(r1.ID); r.State != job.Running {
		t.Fatalf("J14 run %s %s", r.State, r.Message)
	}
	// J13: every column.
	list, err := f.c.Jobs().List(f.ctx)
	f.must(err)
	e := list[0]
	if e.ID != rec.ID || e.Name != "训练任务" || e.Mode != job.ClusterMode || e.Resource != cl.ID ||
		e.Package != "cos://jobs-1250000000/job.zip" || e.Running != 1 || e.Priority != 5 ||
		e.Tags["team"] != "cv" || e.Creator != "alice" || e.CreatedAt.IsZero() {
		t.Fatalf("J13 list entry: %+v", e)
	}
	// J15: only package, entrypoint, mounts and runtime env change; a new
	// revision; runs keep theirs.
	cur, _ := f.c.Jobs().Get(f.ctx, rec.ID)
	cur.Config.Name = "renamed"
	cur.Config.Cluster = "cls-other"
	if _, err := f.c.Jobs().Update(f.ctx, cur); !errors.Is(err, dlc.ErrInvalid) || len(dlc.Fields(err)) != 2 || !strings.Contains(err.Error(), "J15") {
		t.Fatalf("J15 forbidden edit: %v", err)
	}
	cur, _ = f.c.Jobs().Get(f.ctx, rec.ID)
	cur.Config.Entrypoint = "python v2.py"
	cur.Config.Runtime.Pip = []string{"numpy<2"}
	edited, err := f.c.Jobs().Update(f.ctx, cur)
	f.must(err)
	if edited.Revision != 2 {
		t.Fatalf("J15 revision %d", edited.Revision)
	}
	if _, err := f.c.Jobs().Update(f.ctx, cur); !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("stale edit: %v", err)
	}
	r2, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	if g := f.run(r1.ID); g.Revision != 1 || g.Config.Entrypoint != "python main.py" {
		t.Fatalf("J15 old run changed: rev %d %q", g.Revision, g.Config.Entrypoint)
	}
	if r2.Revision != 2 || r2.Config.Entrypoint != "python v2.py" {
		t.Fatalf("J14 new run: rev %d %q", r2.Revision, r2.Config.Entrypoint)
	}
	// J16: copy everything under a new name.
	cp, err := f.c.Jobs().Clone(f.ctx, rec.ID, "")
	f.must(err)
	if cp.ID == rec.ID || cp.Config.Name != "训练任务 (copy)" || cp.Config.Entrypoint != "python v2.py" || cp.Config.Tags["team"] != "cv" {
		t.Fatalf("J16 copy: %+v", cp.Config)
	}
	// J17: no delete while a run is active.
	if err := f.c.Jobs().Delete(f.ctx, rec.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("J17 delete with active runs: %v", err)
	}
	for _, id := range []string{r1.ID, r2.ID} {
		r, err := f.c.Runs().Stop(f.ctx, id)
		f.must(err)
		if r.State != job.Stopped || !strings.Contains(r.Message, "alice") {
			t.Fatalf("stop: %s %s", r.State, r.Message)
		}
	}
	if _, err := f.c.Runs().Stop(f.ctx, r1.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("stopping a stopped run: %v", err)
	}
	f.must(f.c.Jobs().Delete(f.ctx, rec.ID))
	if _, err := f.c.Jobs().Get(f.ctx, rec.ID); !errors.Is(err, dlc.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	// The stopped run's Ray job is stopped once the reconcilers run.
	f.m.Settle(100e6, 5)
	if logs, _ := f.c.Runs().Logs(f.ctx, r1.ID); len(logs) == 0 || !strings.Contains(logs[len(logs)-1], "stopped") {
		t.Fatalf("the stopped run's Ray job: logs %q", logs)
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
	// submit saves and runs cfg, and lets the reconcilers take the run as
	// far as they can before the next call (no simulated time passes).
	submit := func(cfg *job.Config) *job.Run {
		t.Helper()
		_, r, err := job.Submit(f.ctx, f.c, cfg, "")
		f.must(err)
		f.m.Reconcile()
		return f.run(r.ID)
	}
	var runs []*job.Run
	for _, j := range []struct {
		name string
		prio int
	}{{"first", 5}, {"low", 1}, {"high-a", 9}, {"fails", 5}, {"high-b", 9}} {
		runs = append(runs, submit(mk(j.name, j.prio)))
	}
	if r := f.run(runs[0].ID); r.State != job.Provisioning {
		t.Fatalf("first run %s", r.State)
	}
	for _, r := range runs[1:] {
		if r = f.run(r.ID); r.State != job.Waiting || r.WaitReason != job.InsufficientQuota {
			t.Fatalf("queued run %s: %s %s", r.Config.Name, r.State, r.WaitReason)
		}
	}
	f.settle()
	if got := strings.Join(order, ","); got != "first,high-a,high-b,fails,low" {
		t.Errorf("admission order %s, want first,high-a,high-b,fails,low", got)
	}
	if r := f.run(runs[3].ID); r.State != job.Failed || r.Message != "exit code 1" {
		t.Fatalf("failing run: %s %s", r.State, r.Message)
	}
	if u, _ := f.c.ResourceGroups().Get(f.ctx, "rg-1"); !u.Reserved.IsZero() {
		t.Fatalf("left reserved: %v", u.Reserved)
	}
	// Stopping a queued on-demand run takes it out of the queue.
	a := submit(mk("a", 5))
	b := submit(mk("b", 5))
	if b.State != job.Waiting {
		t.Fatalf("b %s before the stop, want waiting", b.State)
	}
	if _, err := f.c.Runs().Stop(f.ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	f.settle()
	if f.run(a.ID).State != job.Succeeded || f.run(b.ID).State != job.Stopped {
		t.Fatalf("a %s, b %s", f.run(a.ID).State, f.run(b.ID).State)
	}
	if u, _ := f.c.ResourceGroups().Get(f.ctx, "rg-1"); !u.Reserved.IsZero() {
		t.Fatalf("left reserved after a stopped queued run: %v", u.Reserved)
	}
	// A temporary cluster belongs to its run.
	c := submit(mk("c", 5))
	if c.ClusterID == "" {
		t.Fatalf("run c %s has no cluster", c.State)
	}
	tmp, err := f.c.Clusters().Get(f.ctx, c.ClusterID)
	f.must(err)
	if !tmp.Temporary || tmp.OwnerRun != c.ID {
		t.Fatalf("temporary cluster %+v", tmp)
	}
	if err := f.c.Clusters().Delete(f.ctx, tmp.ID, dlc.DeleteOptions{}); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("deleting a run's cluster: %v", err)
	}
}

// C6: templates are saved, listed and copied, never shared.
func TestTemplatesC6(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	tmpl, err := dlc.NewCluster("").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c16g").
		WorkerGroup("w", "cu.4c8g", 1, 2).BuildTemplate("cpu-small")
	f.must(err)
	f.must(f.c.Templates().Save(f.ctx, tmpl))
	if err := f.c.Templates().Save(f.ctx, &cluster.Template{Name: "bad"}); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("invalid template saved: %v", err)
	}
	got, err := f.c.Templates().Get(f.ctx, "cpu-small")
	f.must(err)
	spec, err := dlc.NewCluster("from_tmpl").Groups(f.grp).Resources("pkg-1", "rg-1").FromTemplate(got).
		EditWorkerGroup("w", func(w *cluster.WorkerGroup) { w.Instances = cluster.Range(2, 2) }).Build()
	f.must(err)
	_, err = f.c.Clusters().Create(f.ctx, spec)
	f.must(err)
	again, _ := f.c.Templates().Get(f.ctx, "cpu-small")
	if again.Workers[0].Instances.Min != 1 {
		t.Fatal("adjusting a cluster changed the saved template")
	}
	cfg, err := dlc.NewJob("od").OnDemand("pkg-1", "rg-1").FromTemplate(again).
		COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").Build()
	f.must(err)
	if _, err := f.c.Jobs().Create(f.ctx, cfg, dlc.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	// Saving under the same name replaces the template.
	tmpl.Workers[0].Instances = cluster.Range(1, 3)
	f.must(f.c.Templates().Save(f.ctx, tmpl))
	if again, _ = f.c.Templates().Get(f.ctx, "cpu-small"); *again.Workers[0].Instances.Max != 3 {
		t.Fatalf("a second save did not replace the template: max %d", *again.Workers[0].Instances.Max)
	}
	list, _ := f.c.Templates().List(f.ctx)
	if len(list) != 1 {
		t.Fatalf("%d templates", len(list))
	}
	f.must(f.c.Templates().Delete(f.ctx, "cpu-small"))
	if _, err := f.c.Templates().Get(f.ctx, "cpu-small"); !errors.Is(err, dlc.ErrNotFound) {
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
	_, err := f.c.Clusters().Update(f.ctx, cl)
	f.must(err)
	rec := f.job(dlc.NewJob("clash").OnGroup(f.grp).Mount(storage.Mount{Type: storage.COS, Instance: "d-1250000000", MountPath: "/data"}))
	r := f.start(rec.ID)
	if r.State != job.Failed || !strings.Contains(r.Message, "mounts storage on a path") {
		t.Fatalf("clashing group run: %s %q", r.State, r.Message)
	}
	ok := f.job(dlc.NewJob("fine").OnGroup(f.grp).Mount(storage.Mount{Type: storage.COS, Instance: "d-1250000000", MountPath: "/models"}))
	r = f.start(ok.ID)
	if r.State != job.Provisioning || r.ClusterID != cl.ID {
		t.Fatalf("non-clashing group run: %s %q on %q", r.State, r.Message, r.ClusterID)
	}
}

// A retried Submit under one request id saves one config and starts one run.
func TestSubmitIdempotent(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	f.runningCluster("c")
	cfg, err := dlc.NewJob("retried").OnGroup(f.grp).COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").Build()
	f.must(err)
	rec1, run1, err := job.Submit(f.ctx, f.c, cfg, "req-42")
	f.must(err)
	for _, when := range []string{"at once", "after the run moved on"} {
		if when != "at once" {
			f.m.Reconcile()
		}
		rec2, run2, err := job.Submit(f.ctx, f.c, cfg, "req-42")
		f.must(err)
		if rec1.ID != rec2.ID || run1.ID != run2.ID {
			t.Fatalf("a retry %s made new objects: %s/%s vs %s/%s", when, rec1.ID, run1.ID, rec2.ID, run2.ID)
		}
	}
	runs, _ := f.c.Runs().List(f.ctx, dlc.RunListOptions{JobID: rec1.ID})
	jobs, _ := f.c.Jobs().List(f.ctx)
	if len(runs) != 1 || len(jobs) != 1 {
		t.Fatalf("%d runs, %d jobs after a retried submit", len(runs), len(jobs))
	}
	_, run3, err := job.Submit(f.ctx, f.c, cfg, "req-43")
	f.must(err)
	if run3.ID == run1.ID {
		t.Fatal("a new request id returned the old run")
	}
}

// TestClusterCreateIdempotent: with a request id, a create retried (its
// reply lost to the caller, or several at once) returns the cluster the
// first stored, and stores one; without, a retry fails on its own name;
// another request id stores another.
func TestClusterCreateIdempotent(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	opts := dlc.ClusterCreateOptions{RequestID: "nightly-7"}
	first, err := f.c.Clusters().Create(f.ctx, f.spec("idem", 1, 1), opts)
	f.must(err)
	if _, err := f.c.Clusters().Create(f.ctx, f.spec("idem", 1, 1)); !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("a retry without a request id: %v, want ErrConflict", err)
	}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			cl, err := f.c.Clusters().Create(f.ctx, f.spec("idem", 1, 1), opts)
			if err != nil {
				t.Errorf("a concurrent retry: %v", err)
				return
			}
			ids[i] = cl.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != first.ID {
			t.Fatalf("retries returned %v, want %s each", ids, first.ID)
		}
	}
	// Another user's request with the same id, on a client with no
	// authorizer: a conflict, not alice's cluster handed to bob.
	bob := dlc.WithUser(f.ctx, "bob")
	if cl, err := f.c.Clusters().Create(bob, f.spec("bobs", 1, 1), opts); !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("bob's create with alice's request id: %v, %v; want ErrConflict", cl, err)
	}
	other, err := f.c.Clusters().Create(f.ctx, f.spec("idem_other", 1, 1), dlc.ClusterCreateOptions{RequestID: "nightly-8"})
	f.must(err)
	if other.ID == first.ID {
		t.Fatal("two request ids made one cluster")
	}
	f.settle()
	list, err := f.c.Clusters().List(f.ctx)
	f.must(err)
	if len(list) != 2 {
		t.Fatalf("%d clusters stored, want 2", len(list))
	}
	if _, err := f.c.Clusters().Create(f.ctx, f.spec("x", 1, 1), opts, opts); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("two options values: %v, want ErrInvalid", err)
	}
	// A cluster the request made and that is being deleted is no success
	// to repeat; once it is gone, the request id makes a cluster anew.
	f.must(f.c.Clusters().Delete(f.ctx, first.ID, dlc.DeleteOptions{}))
	if _, err := f.c.Clusters().Create(f.ctx, f.spec("idem", 1, 1), opts); !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("a retry while its cluster is deleted: %v, want ErrConflict", err)
	}
	f.settle()
	again, err := f.c.Clusters().Create(f.ctx, f.spec("idem", 1, 1), opts)
	if err != nil || again.State != cluster.Creating {
		t.Fatalf("the request id once its cluster is gone: %+v, %v", again, err)
	}
}

// Two users' creates with one request id, the second's replay read made
// before the first's write: the second conflicts, and the name it claimed
// for the id is given back (a create of that name succeeds after).
func TestClusterCreateRequestIDRace(t *testing.T) {
	var hook atomic.Pointer[func()]
	f := newFixture(t, dlctest.MemoryOptions{Store: memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if w.Op == memory.OpCreate && w.Doc.Kind == "cluster" {
				if h := hook.Swap(nil); h != nil {
					(*h)()
				}
			}
			return next(ctx)
		}}})
	opts := dlc.ClusterCreateOptions{RequestID: "shared"}
	c2 := f.m.NewClient()
	var first *cluster.Cluster
	alice := func() {
		var err error
		first, err = c2.Clusters().Create(f.ctx, f.spec("alices", 1, 1), opts)
		f.must(err)
	}
	hook.Store(&alice)
	bob := dlc.WithUser(f.ctx, "bob")
	if cl, err := f.c.Clusters().Create(bob, f.spec("bobs", 1, 1), opts); !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("bob's create racing alice's with one request id: %v, %v; want ErrConflict", cl, err)
	}
	f.settle()
	if got, err := f.c.Clusters().Get(f.ctx, first.ID); err != nil || got.Spec.Name != "alices" {
		t.Fatalf("alice's cluster: %v, %v", got, err)
	}
	if _, err := f.c.Clusters().Create(bob, f.spec("bobs", 1, 1)); err != nil {
		t.Fatalf("the name bob's refused create claimed was not given back: %v", err)
	}
}
