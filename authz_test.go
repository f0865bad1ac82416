package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// teamPolicy: each team may do everything to what carries its tag or
// draws on its resource group, and create there; nobody else may do
// anything (templates and cluster groups have no tags: only their
// creator may touch them).
const teamPolicy = `
version: "2.0"
statement:
  - effect: allow
    principal: {group: [team-a]}
    action: ["dlc:*"]
    resource: ["*"]
    condition: {string_equal: {"dlc:tag/team": ["a"]}}
  - effect: allow
    principal: {group: [team-a]}
    action: ["dlc:*"]
    resource: ["resourcegroup/rg-a/*/*"]
  - effect: allow
    principal: {group: [team-b]}
    action: ["dlc:*"]
    resource: ["*"]
    condition: {string_equal: {"dlc:tag/team": ["b"]}}
  - effect: allow
    principal: {group: [team-b]}
    action: ["dlc:*"]
    resource: ["resourcegroup/rg-b/*/*"]
  - effect: allow
    action: ["dlc:*Group", "dlc:*Template"]
    resource: ["group/*", "template/*"]
    condition: {string_equal: {"dlc:creator": ["${user}"]}}
  - effect: allow
    action: ["dlc:CreateGroup"]
    resource: ["group/*"]
  - effect: allow
    action: ["dlc:RunJob", "dlc:DescribeJob"]
    resource: ["job/*"]
    condition: {string_equal: {"dlc:tag/shared": ["yes"], "dlc:resource_group": ["rg-shared"]}}
  - effect: allow
    action: ["dlc:UseResourceGroup"]
    resource: ["resourcegroup/rg-shared"]
`

// world is two teams' objects, made by an admin client with no
// authorizer: per team a resource group, a cluster group, a running
// cluster, a job config on it, a run, and an on-demand config.
type world struct {
	m                  *dlctest.Memory
	admin, gated       *dlc.Client
	alice, bob         context.Context
	clusterA, clusterB string
	groupA, groupB     string
	jobA, jobB, odB    string
	jobShared          string // an on-demand config both teams may run (tag shared=yes, rg-shared)
	runA, runB         string
	templateB          string
}

func newTeamsWorld(t *testing.T) *world {
	t.Helper()
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	t.Cleanup(m.Close)
	w := &world{m: m, admin: m.Client}
	w.alice = auth.NewContext(context.Background(), auth.User{Name: "alice", Groups: []string{"team-a"}})
	w.bob = auth.NewContext(context.Background(), auth.User{Name: "bob", Groups: []string{"team-b"}})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, team := range []string{"a", "b"} {
		ctx := w.alice
		if team == "b" {
			ctx = w.bob
		}
		_, err := w.admin.ResourceGroups().Register(ctx, quota.Group{ID: "rg-" + team, Package: "pkg",
			Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}})
		must(err)
		g, err := w.admin.Groups().Create(ctx, "group-"+team)
		must(err)
		spec, err := dlc.NewCluster("cluster_"+team).Groups(g.ID).Resources("pkg", "rg-"+team).Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Tag("team", team).Build()
		must(err)
		cl, err := w.admin.Clusters().Create(ctx, spec)
		must(err)
		m.Settle(time.Minute, 1000)
		_, err = w.admin.Clusters().Start(ctx, cl.ID)
		must(err)
		m.Settle(time.Minute, 1000)
		cfg, err := dlc.NewJob("job-"+team).OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/wc.zip").
			Entrypoint("python main.py").Tag("team", team).Build()
		must(err)
		rec, err := w.admin.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
		must(err)
		run, err := w.admin.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		must(err)
		od, err := dlc.NewJob("od-"+team).OnDemand("pkg", "rg-"+team).Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
			COSPackage("cos://jobs-1250000000/wc.zip").Entrypoint("python main.py").Build()
		must(err)
		odRec, err := w.admin.Jobs().Create(ctx, od, dlc.SaveOptions{})
		must(err)
		tpl := &cluster.Template{Name: "tpl-" + team, Environment: spec.Environment}
		must(w.admin.Templates().Save(ctx, tpl))
		if team == "a" {
			w.clusterA, w.groupA, w.jobA, w.runA = cl.ID, g.ID, rec.ID, run.ID
		} else {
			w.clusterB, w.groupB, w.jobB, w.runB, w.odB, w.templateB = cl.ID, g.ID, rec.ID, run.ID, odRec.ID, tpl.Name
		}
	}
	_, err := w.admin.ResourceGroups().Register(w.alice, quota.Group{ID: "rg-shared", Package: "pkg",
		Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}})
	must(err)
	shared, err := dlc.NewJob("shared").OnDemand("pkg", "rg-shared").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/wc.zip").Entrypoint("python main.py").Tag("shared", "yes").Build()
	must(err)
	sharedRec, err := w.admin.Jobs().Create(w.alice, shared, dlc.SaveOptions{})
	must(err)
	w.jobShared = sharedRec.ID
	m.Settle(time.Minute, 1000)
	p, err := auth.ParsePolicy([]byte(teamPolicy))
	must(err)
	a, err := auth.NewPolicyAuthorizer(p)
	must(err)
	w.gated = m.NewClient(dlc.WithAuthorizer(a))
	return w
}

// fingerprint is every stored object's id and version, as the admin
// client reads them: equal fingerprints mean nothing changed.
func (w *world) fingerprint(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var out []string
	cls, err := w.admin.Clusters().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cls {
		out = append(out, "cluster "+c.ID+" "+c.Version+" "+string(c.State))
	}
	gs, _ := w.admin.Groups().List(ctx)
	for _, g := range gs {
		out = append(out, "group "+g.ID+" "+g.Version+" "+g.Name)
	}
	js, _ := w.admin.Jobs().List(ctx)
	for _, j := range js {
		rec, err := w.admin.Jobs().Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, "job "+rec.ID+" "+rec.Version)
	}
	rs, _ := w.admin.Runs().List(ctx, dlc.RunListOptions{})
	for _, r := range rs {
		out = append(out, "run "+r.ID+" "+r.Version+" "+string(r.State))
	}
	ts, _ := w.admin.Templates().List(ctx)
	for _, tp := range ts {
		out = append(out, "template "+tp.Name+" "+tp.Description)
	}
	us, _ := w.admin.ResourceGroups().List(ctx)
	for _, u := range us {
		out = append(out, fmt.Sprintf("rg %s %v", u.ID, u.Capacity))
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

// Every user operation of every service, done by team A's user to team
// B's objects through a client with the team policy, is refused with
// ErrForbidden naming the action, and changes nothing in the store.
func TestAuthorizerRefusesEveryOperation(t *testing.T) {
	w := newTeamsWorld(t)
	c, ctx := w.gated, w.alice
	specB := func() *cluster.Spec {
		s, err := dlc.NewCluster("new_b").Groups(w.groupB).Resources("pkg", "rg-b").Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Tag("team", "b").Build()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	clusterB := func() *cluster.Cluster {
		cl, err := w.admin.Clusters().Get(ctx, w.clusterB)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	jobOn := func(clusterID string, team string) *job.Config {
		cfg, err := dlc.NewJob("sneaky").OnCluster(clusterID).COSPackage("cos://jobs-1250000000/x.zip").
			Entrypoint("python x.py").Tag("team", team).Build()
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	recB := func() *job.Record {
		rec, err := w.admin.Jobs().Get(ctx, w.jobB)
		if err != nil {
			t.Fatal(err)
		}
		rec.Config.Entrypoint = "python evil.py"
		return rec
	}
	type op struct {
		name   string
		action auth.Action
		call   func() error
	}
	e := func(_ any, err error) error { return err }
	ops := []op{
		{"Clusters.Create", auth.CreateCluster, func() error { return e(c.Clusters().Create(ctx, specB())) }},
		{"Clusters.Get", auth.DescribeCluster, func() error { return e(c.Clusters().Get(ctx, w.clusterB)) }},
		{"Clusters.Get missing", auth.DescribeCluster, func() error { return e(c.Clusters().Get(ctx, "cls-missing")) }},
		{"Clusters.Wait", auth.DescribeCluster, func() error {
			return e(c.Clusters().Wait(ctx, w.clusterB, func(*cluster.Cluster) (bool, error) { return true, nil }))
		}},
		{"Clusters.Events", auth.DescribeCluster, func() error { return e(c.Clusters().Events(ctx, w.clusterB)) }},
		{"Clusters.Details", auth.DescribeCluster, func() error { return e(c.Clusters().Details(ctx, w.clusterB)) }},
		{"Clusters.Start", auth.StartCluster, func() error { return e(c.Clusters().Start(ctx, w.clusterB)) }},
		{"Clusters.PlanStart", auth.StartCluster, func() error { return e(c.Clusters().PlanStart(ctx, w.clusterB)) }},
		{"Clusters.Hibernate", auth.HibernateCluster, func() error {
			return e(c.Clusters().Hibernate(ctx, w.clusterB, dlc.HibernateOptions{Force: true}))
		}},
		{"Clusters.Delete", auth.DeleteCluster, func() error { return c.Clusters().Delete(ctx, w.clusterB, dlc.DeleteOptions{}) }},
		{"Clusters.Clone", auth.DescribeCluster, func() error { return e(c.Clusters().Clone(ctx, w.clusterB, "copy")) }},
		{"Clusters.Update", auth.UpdateCluster, func() error { return e(c.Clusters().Update(ctx, clusterB())) }},
		{"Clusters.PlanUpdate", auth.UpdateCluster, func() error { return e(c.Clusters().PlanUpdate(ctx, clusterB())) }},
		{"Clusters.Create tagged A in B's resource group", auth.UseResourceGroup, func() error {
			s := specB()
			s.Tags, s.Groups = map[string]string{"team": "a"}, []string{w.groupA}
			return e(c.Clusters().Create(ctx, s))
		}},
		{"Clusters.Create tagged A joining B's group", auth.UpdateGroup, func() error {
			s := specB()
			s.Tags, s.ResourceGroup = map[string]string{"team": "a"}, "rg-a"
			return e(c.Clusters().Create(ctx, s))
		}},
		{"Clusters.PlanCreate tagged A in B's resource group", auth.UseResourceGroup, func() error {
			s := specB()
			s.Tags, s.Groups = map[string]string{"team": "a"}, []string{w.groupA}
			return e(c.Clusters().PlanCreate(ctx, s))
		}},
		{"Clusters.Update of A into B's group", auth.UpdateGroup, func() error {
			cl, err := w.admin.Clusters().Get(ctx, w.clusterA)
			if err != nil {
				return err
			}
			cl.Spec.Groups = append(cl.Spec.Groups, w.groupB)
			return e(c.Clusters().Update(ctx, cl))
		}},
		{"Clusters.Autoscale", auth.UpdateCluster, func() error { return e(c.Clusters().Autoscale(ctx, w.clusterB, "cpu", 1)) }},
		{"Clusters.PlanCreate", auth.CreateCluster, func() error { return e(c.Clusters().PlanCreate(ctx, specB())) }},

		{"Groups.Get", auth.DescribeGroup, func() error { return e(c.Groups().Get(ctx, w.groupB)) }},
		{"Groups.SetPolicy", auth.UpdateGroup, func() error {
			return e(c.Groups().SetPolicy(ctx, w.groupB, group.Scheduling{Policy: group.Random}))
		}},
		{"Groups.Rename", auth.UpdateGroup, func() error { return e(c.Groups().Rename(ctx, w.groupB, "mine")) }},
		{"Groups.Members", auth.DescribeGroup, func() error { return e(c.Groups().Members(ctx, w.groupB)) }},
		{"Groups.AddMembers", auth.UpdateGroup, func() error { return c.Groups().AddMembers(ctx, w.groupB, w.clusterA) }},
		{"Groups.AddMembers of B's cluster to A's group", auth.UpdateCluster, func() error {
			return c.Groups().AddMembers(ctx, w.groupA, w.clusterB)
		}},
		{"Groups.RemoveMembers", auth.UpdateGroup, func() error { return c.Groups().RemoveMembers(ctx, w.groupB, w.clusterB) }},
		{"Groups.Delete", auth.DeleteGroup, func() error { return c.Groups().Delete(ctx, w.groupB, "") }},
		{"Groups.Delete into B's group", auth.UpdateGroup, func() error { return c.Groups().Delete(ctx, w.groupA, w.groupB) }},

		{"Templates.Save", auth.SaveTemplate, func() error {
			return c.Templates().Save(ctx, &cluster.Template{Name: w.templateB, Description: "mine now", Environment: specB().Environment})
		}},
		{"Templates.Get", auth.DescribeTemplate, func() error { return e(c.Templates().Get(ctx, w.templateB)) }},
		{"Templates.Delete", auth.DeleteTemplate, func() error { return c.Templates().Delete(ctx, w.templateB) }},

		{"Jobs.Create on B's cluster, tagged A", auth.RunJob, func() error {
			return e(c.Jobs().Create(ctx, jobOn(w.clusterB, "a"), dlc.SaveOptions{}))
		}},
		{"Jobs.Create tagged B", auth.CreateJob, func() error {
			return e(c.Jobs().Create(ctx, jobOn(w.clusterA, "b"), dlc.SaveOptions{}))
		}},
		{"Client.SaveJob", auth.RunJob, func() error { return e(c.SaveJob(ctx, jobOn(w.clusterB, "a"), "req-1")) }},
		{"Jobs.Get", auth.DescribeJob, func() error { return e(c.Jobs().Get(ctx, w.jobB)) }},
		{"Jobs.Events", auth.DescribeJob, func() error { return e(c.Jobs().Events(ctx, w.jobB)) }},
		{"Jobs.NextTicks", auth.DescribeJob, func() error { return e(c.Jobs().NextTicks(ctx, w.jobB, 3)) }},
		{"Jobs.Update of A's config onto B's cluster", auth.RunJob, func() error {
			rec, err := w.admin.Jobs().Get(ctx, w.jobA)
			if err != nil {
				return err
			}
			rec.Config.Cluster = w.clusterB
			return e(c.Jobs().Update(ctx, rec))
		}},
		{"Jobs.Update", auth.UpdateJob, func() error { return e(c.Jobs().Update(ctx, recB())) }},
		{"Jobs.Clone", auth.DescribeJob, func() error { return e(c.Jobs().Clone(ctx, w.jobB, "copy")) }},
		{"Jobs.Delete", auth.DeleteJob, func() error { return c.Jobs().Delete(ctx, w.jobB) }},
		{"Jobs.SuspendSchedule", auth.UpdateJob, func() error { return e(c.Jobs().SuspendSchedule(ctx, w.jobB)) }},
		{"Jobs.ResumeSchedule", auth.UpdateJob, func() error { return e(c.Jobs().ResumeSchedule(ctx, w.jobB)) }},
		{"Jobs.PlanRun", auth.RunJob, func() error { return e(c.Jobs().PlanRun(ctx, w.odB)) }},

		{"Runs.Create", auth.RunJob, func() error { return e(c.Runs().Create(ctx, w.jobB, dlc.RunOptions{})) }},
		{"Client.RunJob", auth.RunJob, func() error { return e(c.RunJob(ctx, w.odB, "req-2")) }},
		{"Runs.Get", auth.DescribeRun, func() error { return e(c.Runs().Get(ctx, w.runB)) }},
		{"Runs.Wait", auth.DescribeRun, func() error {
			return e(c.Runs().Wait(ctx, w.runB, func(*job.Run) (bool, error) { return true, nil }))
		}},
		{"Runs.Pending", auth.DescribeRun, func() error { return e(c.Runs().Pending(ctx, w.runB)) }},
		{"Runs.Events", auth.DescribeRun, func() error { return e(c.Runs().Events(ctx, w.runB)) }},
		{"Runs.Stop", auth.StopRun, func() error { return e(c.Runs().Stop(ctx, w.runB)) }},
		{"Runs.Logs", auth.ReadRunLogs, func() error { return e(c.Runs().Logs(ctx, w.runB)) }},
		{"Runs.Follow", auth.ReadRunLogs, func() error { return e(c.Runs().Follow(ctx, w.runB)) }},

		{"ResourceGroups.Register", auth.RegisterResourceGroup, func() error {
			return e(c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-b", Package: "pkg", Capacity: quota.Resources{MilliCPU: 1000}}))
		}},
		{"ResourceGroups.Get", auth.DescribeResourceGroup, func() error { return e(c.ResourceGroups().Get(ctx, "rg-b")) }},
		{"ResourceGroups.Pending", auth.DescribeResourceGroup, func() error { return e(c.ResourceGroups().Pending(ctx, "rg-b")) }},
		{"ResourceGroups.Delete", auth.DeleteResourceGroup, func() error { return c.ResourceGroups().Delete(ctx, "rg-b") }},
	}
	// Bob's replays to be tried: a job config saved with a request id, and
	// a run of a config both may run, made with one.
	if _, err := w.admin.Jobs().Create(w.bob, jobOn(w.clusterB, "b"), dlc.SaveOptions{RequestID: "nightly-b"}); err != nil {
		t.Fatal(err)
	}
	replayB := specB()
	replayB.Name = "replayed_b"
	if _, err := w.admin.Clusters().Create(w.bob, replayB, dlc.ClusterCreateOptions{RequestID: "cls-b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.admin.Runs().Create(w.bob, w.jobShared, dlc.RunOptions{RequestID: "run-b"}); err != nil {
		t.Fatal(err)
	}
	w.m.Reconcile()
	before := w.fingerprint(t)
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			err := o.call()
			var fe *dlc.ForbiddenError
			if !errors.Is(err, dlc.ErrForbidden) || !errors.As(err, &fe) {
				t.Fatalf("got %v, want ErrForbidden", err)
			}
			if fe.Action != string(o.action) || fe.User != "alice" {
				t.Fatalf("refused %+v, want action %s", fe, o.action)
			}
			w.m.Reconcile() // what the call queued, if anything; the clock stands still
			if after := w.fingerprint(t); after != before {
				t.Fatalf("the refused call changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	// Bob's request ids, replayed by alice: a request id names one user's
	// request, so hers is a conflict (with or without an authorizer), and
	// she gets nothing of his back.
	for _, o := range []struct {
		name string
		call func() error
	}{
		{"Clusters.Create with B's request id", func() error {
			s, err := dlc.NewCluster("mine_a").Groups(w.groupA).Resources("pkg", "rg-a").Image("ray-2.46.0-py310-cpu").
				Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Tag("team", "a").Build()
			if err != nil {
				return err
			}
			return e(c.Clusters().Create(ctx, s, dlc.ClusterCreateOptions{RequestID: "cls-b"}))
		}},
		{"Jobs.Create with B's request id", func() error {
			return e(c.Jobs().Create(ctx, jobOn(w.clusterA, "a"), dlc.SaveOptions{RequestID: "nightly-b"}))
		}},
		{"Runs.Create with B's request id", func() error {
			return e(c.Runs().Create(ctx, w.jobShared, dlc.RunOptions{RequestID: "run-b"}))
		}},
		{"Client.RunJob with B's request id", func() error { return e(c.RunJob(ctx, w.jobShared, "run-b")) }},
	} {
		t.Run(o.name, func(t *testing.T) {
			if err := o.call(); !errors.Is(err, dlc.ErrConflict) {
				t.Fatalf("got %v, want ErrConflict", err)
			}
			w.m.Reconcile()
			if after := w.fingerprint(t); after != before {
				t.Fatalf("the refused replay changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	// The same operations by team B's own user through the same client
	// are not refused (the gate is not a wall): a few, each allowed.
	if _, err := c.Clusters().Get(w.bob, w.clusterB); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runs().Logs(w.bob, w.runB); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Jobs().Create(w.bob, jobOn(w.clusterB, "b"), dlc.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Lists and watches tell a user only of what it may describe, and a page
// is a full page.
func TestAuthorizerFiltersLists(t *testing.T) {
	w := newTeamsWorld(t)
	c := w.gated
	// More of team B's clusters than of A's, with ids on both sides.
	for i := range 5 {
		for j, team := range []string{"a", "b", "b"} {
			ctx, grp := w.alice, w.groupA
			if team == "b" {
				ctx, grp = w.bob, w.groupB
			}
			spec, err := dlc.NewCluster(fmt.Sprintf("more_%s_%d_%d", team, i, j)).Groups(grp).Resources("pkg", "rg-"+team).
				Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Tag("team", team).Build()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.admin.Clusters().Create(ctx, spec); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.m.Settle(time.Minute, 1000)
	all, err := w.admin.Clusters().List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var wantA []string
	for _, cl := range all {
		if cl.Spec.Tags["team"] == "a" {
			wantA = append(wantA, cl.ID)
		}
	}
	got, err := c.Clusters().List(w.alice)
	if err != nil {
		t.Fatal(err)
	}
	if ids := clusterIDs(got); !slices.Equal(ids, wantA) {
		t.Fatalf("alice lists %v, want %v", ids, wantA)
	}
	// Pages of two: every page full but the last, joined they are the list.
	var paged []string
	for cont := ""; ; {
		p, err := c.Clusters().ListPage(w.alice, dlc.ClusterListOptions{Limit: 2, Continue: cont})
		if err != nil {
			t.Fatal(err)
		}
		if p.Continue != "" && len(p.Items) != 2 {
			t.Fatalf("a page of %d before the end", len(p.Items))
		}
		paged = append(paged, clusterIDs(p.Items)...)
		if cont = p.Continue; cont == "" {
			break
		}
	}
	if !slices.Equal(paged, wantA) {
		t.Fatalf("pages %v, want %v", paged, wantA)
	}
	// Jobs, runs, groups, templates, resource groups, members.
	js, err := c.Jobs().List(w.alice)
	if err != nil || len(js) != 3 { // job-a (tagged), od-a (rg-a) and the shared one
		t.Fatalf("jobs %v %v", js, err)
	}
	rs, err := c.Runs().List(w.alice, dlc.RunListOptions{})
	if err != nil || len(rs) != 1 || rs[0].ID != w.runA {
		t.Fatalf("runs %v %v", runIDs(rs), err)
	}
	rp, err := c.Runs().ListPage(w.alice, dlc.RunListOptions{JobID: w.jobB, Limit: 10})
	if err != nil || len(rp.Items) != 0 {
		t.Fatalf("runs of B's job %v %v", rp, err)
	}
	gs, err := c.Groups().List(w.alice)
	if err != nil || len(gs) != 1 || gs[0].ID != w.groupA {
		t.Fatalf("groups %v %v", gs, err)
	}
	ts, err := c.Templates().List(w.alice)
	if err != nil || len(ts) != 0 { // templates have no creator: only the admin's
		t.Fatalf("templates %v %v", ts, err)
	}
	us, err := c.ResourceGroups().List(w.alice)
	if err != nil || len(us) != 1 || us[0].ID != "rg-a" {
		t.Fatalf("resource groups %v %v", us, err)
	}
	ms, err := c.Groups().Members(w.alice, w.groupA)
	if err != nil || !slices.Equal(clusterIDs(ms), wantA) {
		t.Fatalf("members %v %v", clusterIDs(ms), err)
	}

	// Cluster A's history, seen by a user who may describe the cluster
	// but not B's run on it, leaves that run out.
	bobOnA, err := dlc.NewJob("bob_on_a").OnCluster(w.clusterA).COSPackage("cos://jobs-1250000000/x.zip").
		Entrypoint("python secret_sauce.py").Tag("team", "b").Build()
	if err != nil {
		t.Fatal(err)
	}
	recBobOnA, err := w.admin.Jobs().Create(w.bob, bobOnA, dlc.SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runBobOnA, err := w.admin.Runs().Create(w.bob, recBobOnA.ID, dlc.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.m.Settle(time.Minute, 1000)
	full, err := w.admin.Clusters().Details(context.Background(), w.clusterA)
	if err != nil {
		t.Fatal(err)
	}
	alicesView, err := c.Clusters().Details(w.alice, w.clusterA)
	if err != nil {
		t.Fatal(err)
	}
	hasRun := func(d *cluster.Details, id string) bool {
		return slices.ContainsFunc(d.History, func(h cluster.HistoryEntry) bool { return h.RunID == id })
	}
	if !hasRun(full, runBobOnA.ID) || hasRun(alicesView, runBobOnA.ID) || !hasRun(alicesView, w.runA) {
		t.Fatalf("cluster A's history: %d entries in all (bob's run %v), alice sees %d (bob's run %v, hers %v)",
			len(full.History), hasRun(full, runBobOnA.ID), len(alicesView.History), hasRun(alicesView, runBobOnA.ID), hasRun(alicesView, w.runA))
	}

	// A run waiting on a group with both teams' clusters: its queue
	// position names only the members the user may describe.
	mix, err := w.admin.Groups().Create(w.alice, "mix")
	if err != nil {
		t.Fatal(err)
	}
	var mixed []string
	for _, team := range []string{"a", "b"} {
		spec, err := dlc.NewCluster("mix_"+team).Groups(mix.ID).Resources("pkg", "rg-"+team).Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Tag("team", team).Build()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := w.admin.Clusters().Create(w.alice, spec)
		if err != nil {
			t.Fatal(err)
		}
		mixed = append(mixed, cl.ID)
	}
	onMix, err := dlc.NewJob("on_mix").OnGroup(mix.ID).COSPackage("cos://jobs-1250000000/x.zip").Entrypoint("python x.py").Tag("team", "a").Build()
	if err != nil {
		t.Fatal(err)
	}
	recMix, err := w.admin.Jobs().Create(w.alice, onMix, dlc.SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := w.admin.Runs().Create(w.alice, recMix.ID, dlc.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.m.Settle(time.Minute, 1000)
	allP, err := w.admin.Runs().Pending(context.Background(), waiting.ID)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := c.Runs().Pending(w.alice, waiting.ID)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(p *job.Pending) []string {
		var out []string
		for _, cw := range p.Clusters {
			out = append(out, cw.ID)
		}
		slices.Sort(out)
		return out
	}
	if got, want := ids(allP), slices.Sorted(slices.Values(mixed)); !slices.Equal(got, want) {
		t.Fatalf("the waiting run's clusters for the admin: %v, want %v", got, want)
	}
	if got := ids(mine); !slices.Equal(got, mixed[:1]) {
		t.Fatalf("alice sees the waiting run's clusters %v, want only %v", got, mixed[:1])
	}

	// A watch of every cluster tells alice of A's only; a cluster whose
	// tag moves to B leaves her view as Deleted (on a client whose policy
	// decides by the tag alone).
	tagOnly, err := auth.NewPolicyAuthorizer(&auth.Policy{Version: "2.0", Statement: []auth.Statement{{
		Effect: auth.Allow, Principal: &auth.Principal{Group: []string{"team-a"}}, Action: []string{"dlc:*"}, Resource: []string{"*"},
		Condition: map[string]map[string][]string{auth.StringEqual: {auth.KeyResourceTag: {"team&a"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	c = w.m.NewClient(dlc.WithAuthorizer(tagOnly))
	wctx, cancel := context.WithCancel(w.alice)
	defer cancel()
	ch, err := c.Clusters().Watch(wctx, dlc.ClusterWatchOptions{Initial: true})
	if err != nil {
		t.Fatal(err)
	}
	nowAll, err := w.admin.Clusters().List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var nowA []*cluster.Cluster
	for _, x := range nowAll {
		if x.Spec.Tags["team"] == "a" {
			nowA = append(nowA, x)
		}
	}
	seen := map[string]bool{}
	for len(seen) < len(nowA) {
		ev := <-ch
		if ev.Cluster == nil || ev.Cluster.Spec.Tags["team"] != "a" {
			t.Fatalf("alice was told of %s %+v", ev.ID, ev.Cluster)
		}
		seen[ev.ID] = true
	}
	// One not started (an edit of tags needs no restart).
	i := slices.IndexFunc(nowA, func(x *cluster.Cluster) bool { return x.State == cluster.Created })
	if i < 0 {
		t.Fatal("no cluster of team a in state created to retag")
	}
	cl := nowA[i]
	cl.Spec.Tags = map[string]string{"team": "b"}
	if _, err := w.admin.Clusters().Update(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	for {
		w.m.Settle(time.Second, 100)
		select {
		case ev := <-ch:
			if ev.ID != cl.ID || (ev.Cluster != nil && ev.Cluster.Spec.Tags["team"] == "a") {
				continue // another cluster, or this one before the edit
			}
			if ev.Type != dlc.Deleted || ev.Cluster != nil {
				t.Fatalf("the cluster that left alice's view: %v %+v", ev.Type, ev.Cluster)
			}
			return
		case <-time.After(10 * time.Second):
			t.Fatal("no Deleted for the cluster that left alice's view")
		}
	}
}

func clusterIDs(cls []*cluster.Cluster) []string {
	out := make([]string, len(cls))
	for i, cl := range cls {
		out[i] = cl.ID
	}
	return out
}
