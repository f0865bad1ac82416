package cli_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
)

// The flags that change what a command does do it: --force on delete and
// hibernate (refused without it while a run is active), --move-to on a
// group's delete.
func TestFlagsTakeEffect(t *testing.T) {
	f := newFixture(t, fixtureOptions{ray: memory.RayHooks{
		RunOutcome: func(*job.Run) memory.Outcome { return memory.Outcome{Duration: 10 * time.Hour} },
	}})
	c := f.m.Client
	g2, err := c.Groups().Create(f.admin, "other")
	if err != nil {
		t.Fatal(err)
	}
	busy := func(name string, groups ...string) string {
		t.Helper()
		spec, err := dlc.NewCluster(name).Groups(groups...).Resources("pkg-1", "rg-cpu").Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c16g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := c.Clusters().Create(f.admin, spec)
		if err != nil {
			t.Fatal(err)
		}
		f.settle()
		if _, err := c.Clusters().Start(f.admin, cl.ID); err != nil {
			t.Fatal(err)
		}
		f.settle()
		cfg, err := dlc.NewJob(name + "-job").OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := job.Submit(f.admin, c, cfg, ""); err != nil {
			t.Fatal(err)
		}
		f.m.Settle(time.Second, 30) // the run is placed and runs
		return cl.ID
	}
	state := func(id string) cluster.State {
		cl, err := c.Clusters().Get(f.admin, id)
		if err != nil {
			return cluster.Gone
		}
		return cl.State
	}

	h := busy("h", f.group)
	if _, errOut, code := f.run("hibernate", h); code == 0 {
		t.Fatalf("hibernate of a cluster with an active run succeeded: %s", errOut)
	}
	f.must("hibernate", h, "--force")
	f.settle()
	if s := state(h); s != cluster.Hibernated {
		t.Fatalf("after hibernate --force the cluster is %s", s)
	}

	d := busy("d", g2.ID)
	if _, errOut, code := f.run("delete", "cluster", d); code == 0 {
		t.Fatalf("delete of a cluster with an active run succeeded: %s", errOut)
	}
	if s := state(d); s != cluster.Running {
		t.Fatalf("a refused delete left the cluster %s", s)
	}
	moved := busy("m", g2.ID)
	f.must("delete", "group", g2.ID, "--move-to", f.group)
	if cl, err := c.Clusters().Get(f.admin, moved); err != nil || !slices.Contains(cl.Spec.Groups, f.group) {
		t.Fatalf("the member of the deleted group is in %v (%v), want %s", cl.Spec.Groups, err, f.group)
	}
	f.must("delete", "cluster", d, "--force")
	f.settle()
	if s := state(d); s != cluster.Gone {
		t.Fatalf("after delete --force the cluster is %s", s)
	}
}
