package dlchttp

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/plan"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/usage"
)

// clusterSpec is a valid spec of a cluster called name in rg-1 and the
// groups given.
func clusterSpec(t *testing.T, name string, groups ...string) *cluster.Spec {
	t.Helper()
	spec, err := dlc.NewCluster(name).Groups(groups...).Resources("pkg-1", "rg-1").
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c16g").WorkerGroup("cpu", "cu.4c8g", 1, 4).Build()
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// onClusterJob is a job config that runs on cluster id.
func onClusterJob(t *testing.T, name, clusterID string) *job.Config {
	t.Helper()
	cfg, err := dlc.NewJob(name).OnCluster(clusterID).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// register registers rg-1 through the API.
func (e *env) register(cpu int64) {
	e.t.Helper()
	e.must(req{method: "PUT", path: "/v1/resourcegroups/rg-1",
		body: registerBody{Package: "pkg-1", Capacity: quota.Resources{MilliCPU: cpu, Memory: 512 * quota.GiB}}}, 200, nil)
}

// state reads a cluster's state through the API.
func (e *env) clusterState(id string) cluster.State {
	e.t.Helper()
	var cl cluster.Cluster
	e.must(req{method: "GET", path: "/v1/clusters/" + id}, 200, &cl)
	return cl.State
}

// TestEveryRoute goes through the platform's story over HTTP, one step
// per route of the table, each answered with a success: a route in the
// table with no step here fails the test, and so does a step whose
// route is not in the table.
func TestEveryRoute(t *testing.T) {
	d := memory.DefaultDelays
	e := newEnv(t, dlctest.MemoryOptions{Delays: &d}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound, not a wait
	defer cancel()

	// What the steps pass on to each other.
	var (
		g1, g2          group.Group
		cl, clone       cluster.Cluster
		etagCl          string
		rec, rec2       job.Record
		run, waitingRun job.Run
	)
	steps := []struct {
		route string // the operationId
		do    func(t *testing.T)
	}{
		{"registerResourceGroup", func(t *testing.T) { e.register(64000) }},
		{"listResourceGroups", func(t *testing.T) {
			var p page[quota.Usage]
			e.must(req{method: "GET", path: "/v1/resourcegroups"}, 200, &p)
			if len(p.Items) != 1 || p.Items[0].ID != "rg-1" {
				t.Fatalf("%+v", p)
			}
		}},
		{"getResourceGroup", func(t *testing.T) {
			var u quota.Usage
			e.must(req{method: "GET", path: "/v1/resourcegroups/rg-1"}, 200, &u)
			if u.Capacity.MilliCPU != 64000 {
				t.Fatalf("%+v", u)
			}
		}},
		{"createGroup", func(t *testing.T) {
			a := e.must(req{method: "POST", path: "/v1/groups", body: groupBody{Name: "g1"}}, 201, &g1)
			if a.header.Get("Location") != "/v1/groups/"+g1.ID {
				t.Fatalf("Location %q", a.header.Get("Location"))
			}
			e.must(req{method: "POST", path: "/v1/groups", body: groupBody{Name: "g2", Scheduling: &group.Scheduling{Policy: group.LeastLoaded}}}, 201, &g2)
			if g2.Policy != group.LeastLoaded {
				t.Fatalf("%+v", g2)
			}
		}},
		{"listGroups", func(t *testing.T) {
			var p page[group.Group]
			e.must(req{method: "GET", path: "/v1/groups"}, 200, &p)
			if len(p.Items) != 2 {
				t.Fatalf("%+v", p)
			}
		}},
		{"getGroup", func(t *testing.T) {
			var g group.Group
			e.must(req{method: "GET", path: "/v1/groups/" + g1.ID}, 200, &g)
			if g.Name != "g1" {
				t.Fatalf("%+v", g)
			}
		}},
		{"saveTemplate", func(t *testing.T) {
			var saved cluster.Template
			e.must(req{method: "PUT", path: "/v1/templates/tpl", header: map[string]string{"Content-Type": "application/yaml"},
				body: "image: ray-2.46.0-py310-cpu\nheadGroup: {name: head, nodeSpec: cu.4c16g}\nworkerGroups:\n- {name: cpu, nodeSpec: cu.4c8g, instances: {min: 1, max: 2}}\n"}, 200, &saved)
			if saved.Name != "tpl" || len(saved.Workers) != 1 {
				t.Fatalf("%+v", saved)
			}
		}},
		{"listTemplates", func(t *testing.T) {
			var p page[cluster.Template]
			e.must(req{method: "GET", path: "/v1/templates"}, 200, &p)
			if len(p.Items) != 1 {
				t.Fatalf("%+v", p)
			}
		}},
		{"getTemplate", func(t *testing.T) { e.must(req{method: "GET", path: "/v1/templates/tpl"}, 200, nil) }},
		{"planCreateCluster", func(t *testing.T) {
			var p plan.Plan
			e.must(req{method: "POST", path: "/v1/clusters/plan", body: clusterSpec(t, "c1", g1.ID)}, 200, &p)
			if p.Quota == nil || !p.Quota.Fits {
				t.Fatalf("%+v", p)
			}
		}},
		{"createCluster", func(t *testing.T) {
			y, err := clusterSpec(t, "c1", g1.ID).MarshalYAML()
			if err != nil {
				t.Fatal(err)
			}
			r := req{method: "POST", path: "/v1/clusters", body: string(y),
				header: map[string]string{"Content-Type": "application/yaml", "Idempotency-Key": "create-c1"}}
			a := e.must(r, 201, &cl)
			if a.header.Get("ETag") == "" || a.header.Get("Location") != "/v1/clusters/"+cl.ID {
				t.Fatalf("headers %v", a.header)
			}
			var again cluster.Cluster
			e.must(r, 201, &again) // a retry with the same key: the same cluster
			if again.ID != cl.ID {
				t.Fatalf("a retry made %s, the first %s", again.ID, cl.ID)
			}
			e.settle()
			if s := e.clusterState(cl.ID); s != cluster.Created {
				t.Fatalf("state %s", s)
			}
		}},
		{"listClusters", func(t *testing.T) {
			var p page[cluster.Cluster]
			e.must(req{method: "GET", path: "/v1/clusters?state=created&group=" + g1.ID + "&kind=standing"}, 200, &p)
			if len(p.Items) != 1 || p.Items[0].ID != cl.ID {
				t.Fatalf("%+v", p)
			}
		}},
		{"getCluster", func(t *testing.T) {
			a := e.must(req{method: "GET", path: "/v1/clusters/" + cl.ID}, 200, &cl)
			if etagCl = a.header.Get("ETag"); etagCl == "" {
				t.Fatal("no ETag")
			}
		}},
		{"planUpdateCluster", func(t *testing.T) {
			spec := cl.Spec
			spec.Tags = map[string]string{"team": "nlp"}
			var p plan.Plan
			e.must(req{method: "POST", path: "/v1/clusters/" + cl.ID + "/plan", body: spec}, 200, &p)
			if p.Cluster == nil || p.Cluster.Spec.Tags["team"] != "nlp" {
				t.Fatalf("%+v", p)
			}
		}},
		{"updateCluster", func(t *testing.T) {
			spec := cl.Spec
			spec.Tags = map[string]string{"team": "nlp"}
			var res editResult
			a := e.must(req{method: "PUT", path: "/v1/clusters/" + cl.ID, body: spec, header: map[string]string{"If-Match": etagCl}}, 200, &res)
			if res.Cluster.Spec.Tags["team"] != "nlp" || a.header.Get("ETag") == etagCl {
				t.Fatalf("%+v, ETag %s", res, a.header.Get("ETag"))
			}
		}},
		{"planStartCluster", func(t *testing.T) {
			var p plan.Plan
			e.must(req{method: "POST", path: "/v1/clusters/" + cl.ID + "/start/plan"}, 200, &p)
			if p.Quota == nil || !p.Quota.Fits {
				t.Fatalf("%+v", p)
			}
		}},
		{"startCluster", func(t *testing.T) {
			e.must(req{method: "POST", path: "/v1/clusters/" + cl.ID + "/start"}, 200, &cl)
			e.settle()
			if s := e.clusterState(cl.ID); s != cluster.Running {
				t.Fatalf("state %s", s)
			}
		}},
		{"autoscaleCluster", func(t *testing.T) {
			var res autoscaleResult
			e.must(req{method: "POST", path: "/v1/clusters/" + cl.ID + "/autoscale", body: autoscaleBody{Group: "cpu", Replicas: 2}}, 200, &res)
			if res.Asked != 2 || res.Granted != 2 {
				t.Fatalf("%+v", res)
			}
		}},
		{"clusterDetails", func(t *testing.T) {
			var d cluster.Details
			e.must(req{method: "GET", path: "/v1/clusters/" + cl.ID + "/details"}, 200, &d)
			if d.Cluster.ID != cl.ID || len(d.Pods) == 0 {
				t.Fatalf("%+v", d)
			}
		}},
		{"clusterEvents", func(t *testing.T) {
			var p page[json.RawMessage]
			e.must(req{method: "GET", path: "/v1/clusters/" + cl.ID + "/events"}, 200, &p)
			if len(p.Items) == 0 {
				t.Fatal("no events")
			}
		}},
		{"cloneCluster", func(t *testing.T) {
			e.must(req{method: "POST", path: "/v1/clusters/" + cl.ID + "/clone", body: nameBody{Name: "c1_copy"}}, 201, &clone)
			e.settle()
		}},
		{"addGroupMembers", func(t *testing.T) {
			e.must(req{method: "POST", path: "/v1/groups/" + g2.ID + "/members/add", body: membersBody{Clusters: []string{cl.ID, clone.ID}}}, 204, nil)
		}},
		{"groupMembers", func(t *testing.T) {
			var p page[cluster.Cluster]
			e.must(req{method: "GET", path: "/v1/groups/" + g2.ID + "/members"}, 200, &p)
			if len(p.Items) != 2 {
				t.Fatalf("%+v", p)
			}
		}},
		{"removeGroupMembers", func(t *testing.T) {
			e.must(req{method: "POST", path: "/v1/groups/" + g2.ID + "/members/remove", body: membersBody{Clusters: []string{cl.ID}}}, 204, nil)
		}},
		{"renameGroup", func(t *testing.T) {
			var g group.Group
			e.must(req{method: "POST", path: "/v1/groups/" + g1.ID + "/rename", body: nameBody{Name: "g1-renamed"}}, 200, &g)
			if g.Name != "g1-renamed" {
				t.Fatalf("%+v", g)
			}
		}},
		{"setGroupPolicy", func(t *testing.T) {
			var g group.Group
			e.must(req{method: "PUT", path: "/v1/groups/" + g1.ID + "/policy", body: group.Scheduling{Policy: group.OrderedFailover, Order: []string{cl.ID}}}, 200, &g)
			if g.Policy != group.OrderedFailover {
				t.Fatalf("%+v", g)
			}
		}},
		{"createJob", func(t *testing.T) {
			cfg := onClusterJob(t, "j1", cl.ID)
			cfg.Schedule = &job.Schedule{Cron: "0 3 * * *"}
			a := e.must(req{method: "POST", path: "/v1/jobs", body: cfg, header: map[string]string{"Idempotency-Key": "j1"}}, 201, &rec)
			if a.header.Get("ETag") == "" {
				t.Fatal("no ETag")
			}
			e.must(req{method: "POST", path: "/v1/jobs", body: onClusterJob(t, "j2", clone.ID)}, 201, &rec2)
		}},
		{"listJobs", func(t *testing.T) {
			var p page[job.ListEntry]
			e.must(req{method: "GET", path: "/v1/jobs?mode=cluster&nameContains=j1"}, 200, &p)
			if len(p.Items) != 1 || p.Items[0].ID != rec.ID {
				t.Fatalf("%+v", p)
			}
		}},
		{"getJob", func(t *testing.T) { e.must(req{method: "GET", path: "/v1/jobs/" + rec.ID}, 200, nil) }},
		{"updateJob", func(t *testing.T) {
			a := e.must(req{method: "GET", path: "/v1/jobs/" + rec.ID}, 200, &rec)
			cfg := rec.Config
			cfg.Entrypoint = "python b.py"
			var out job.Record
			e.must(req{method: "PUT", path: "/v1/jobs/" + rec.ID, body: cfg, header: map[string]string{"If-Match": a.header.Get("ETag")}}, 200, &out)
			if out.Revision != rec.Revision+1 || out.Config.Entrypoint != "python b.py" {
				t.Fatalf("%+v", out)
			}
		}},
		{"cloneJob", func(t *testing.T) {
			var out job.Record
			e.must(req{method: "POST", path: "/v1/jobs/" + rec.ID + "/clone", body: nameBody{}}, 201, &out)
			if out.Config.Name != "j1 (copy)" {
				t.Fatalf("%+v", out.Config.Name)
			}
		}},
		{"jobEvents", func(t *testing.T) { e.must(req{method: "GET", path: "/v1/jobs/" + rec.ID + "/events"}, 200, nil) }},
		{"suspendJobSchedule", func(t *testing.T) {
			var out job.Record
			e.must(req{method: "POST", path: "/v1/jobs/" + rec.ID + "/schedule/suspend"}, 200, &out)
			if !out.ScheduleStatus.Suspended {
				t.Fatalf("%+v", out.ScheduleStatus)
			}
		}},
		{"resumeJobSchedule", func(t *testing.T) {
			var out job.Record
			e.must(req{method: "POST", path: "/v1/jobs/" + rec.ID + "/schedule/resume"}, 200, &out)
			if out.ScheduleStatus.Suspended {
				t.Fatalf("%+v", out.ScheduleStatus)
			}
		}},
		{"jobNextTicks", func(t *testing.T) {
			var out ticksResult
			e.must(req{method: "GET", path: "/v1/jobs/" + rec.ID + "/schedule/next?n=3"}, 200, &out)
			if len(out.Times) != 3 || out.Times[0].Hour() != 3 {
				t.Fatalf("%+v", out)
			}
		}},
		{"planRun", func(t *testing.T) {
			var p plan.Plan
			e.must(req{method: "POST", path: "/v1/jobs/" + rec.ID + "/runs/plan"}, 200, &p)
			if p.Run == nil {
				t.Fatalf("%+v", p)
			}
		}},
		{"createRun", func(t *testing.T) {
			a := e.must(req{method: "POST", path: "/v1/jobs/" + rec.ID + "/runs", header: map[string]string{"Idempotency-Key": "r1"}}, 201, &run)
			if a.header.Get("Location") != "/v1/runs/"+run.ID {
				t.Fatalf("Location %q", a.header.Get("Location"))
			}
			// A run on the clone, which is not running, waits.
			e.must(req{method: "POST", path: "/v1/jobs/" + rec2.ID + "/runs"}, 201, &waitingRun)
			e.settle()
		}},
		{"listRuns", func(t *testing.T) {
			var p page[job.Run]
			e.must(req{method: "GET", path: "/v1/runs?state=succeeded&job=" + rec.ID}, 200, &p)
			if len(p.Items) != 1 || p.Items[0].ID != run.ID {
				t.Fatalf("%+v", p)
			}
		}},
		{"getRun", func(t *testing.T) {
			var r job.Run
			e.must(req{method: "GET", path: "/v1/runs/" + run.ID}, 200, &r)
			if r.State != job.Succeeded {
				t.Fatalf("%s", r.State)
			}
		}},
		{"runLogs", func(t *testing.T) {
			var out logsResult
			e.must(req{method: "GET", path: "/v1/runs/" + run.ID + "/logs"}, 200, &out)
			if len(out.Lines) == 0 {
				t.Fatal("no lines")
			}
		}},
		{"followRunLogs", func(t *testing.T) {
			// An ended run: its lines, then the end.
			stop := e.m.Drive(ctx, 100*time.Millisecond, time.Millisecond)
			defer stop()
			var names []string
			for ev := range e.stream(ctx, "/v1/runs/"+run.ID+"/logs/follow") {
				names = append(names, ev.name)
			}
			if len(names) < 2 || names[len(names)-1] != "end" || names[0] != "line" {
				t.Fatalf("events %v", names)
			}
		}},
		{"runEvents", func(t *testing.T) { e.must(req{method: "GET", path: "/v1/runs/" + run.ID + "/events"}, 200, nil) }},
		{"runPending", func(t *testing.T) {
			var p job.Pending
			e.must(req{method: "GET", path: "/v1/runs/" + waitingRun.ID + "/pending"}, 200, &p)
			if p.Reason != job.ClusterNotRunning {
				t.Fatalf("%+v", p)
			}
		}},
		{"resourceGroupPending", func(t *testing.T) {
			var p page[job.Pending]
			e.must(req{method: "GET", path: "/v1/resourcegroups/rg-1/pending"}, 200, &p)
		}},
		{"usageReport", func(t *testing.T) {
			// The running cluster's pods are metered: a report of the span
			// so far, by resource group, in JSON and in CSV.
			from, to := e.m.Clock.Now().Add(-24*time.Hour).Format(time.RFC3339), e.m.Clock.Now().Add(time.Hour).Format(time.RFC3339)
			q := `{"from":"` + from + `","to":"` + to + `","groupBy":"resourceGroup","prices":{"currency":"CNY","nodeHour":{"cu.4c8g":2}}}`
			var rep usage.Report
			e.must(req{method: "POST", path: "/v1/usage", body: q}, 200, &rep)
			if len(rep.Rows) == 0 || rep.Rows[0].Key != "rg-1" || rep.Total.CPUCoreHours <= 0 || rep.Currency != "CNY" {
				t.Fatalf("report %+v", rep)
			}
			csv := e.must(req{method: "POST", path: "/v1/usage?format=csv", body: q}, 200, nil)
			if !strings.HasPrefix(string(csv.body), "resourceGroup,cpu_core_hours,") || !strings.Contains(string(csv.body), "\nrg-1,") {
				t.Fatalf("CSV %q", csv.body)
			}
			if got := e.must(req{method: "POST", path: "/v1/usage", body: `{"from":"` + to + `","to":"` + from + `"}`}, 422, nil).err(t); len(got.Fields) == 0 || got.Fields[0].Rule != "U1" {
				t.Fatalf("a backwards span: %+v", got)
			}
			e.must(req{method: "POST", path: "/v1/usage?format=xml", body: q}, 400, nil)
		}},
		{"stopRun", func(t *testing.T) {
			var r job.Run
			e.must(req{method: "POST", path: "/v1/runs/" + waitingRun.ID + "/stop"}, 200, &r)
			e.settle()
		}},
		{"watchRuns", func(t *testing.T) {
			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			ev := <-e.stream(wctx, "/v1/watch/runs?initial=true&job="+rec.ID)
			if ev.name != "ADDED" || !strings.Contains(ev.data, run.ID) {
				t.Fatalf("%+v", ev)
			}
		}},
		{"watchClusters", func(t *testing.T) {
			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			ev := <-e.stream(wctx, "/v1/watch/clusters?initial=true&id="+cl.ID)
			if ev.name != "ADDED" || !strings.Contains(ev.data, cl.ID) {
				t.Fatalf("%+v", ev)
			}
		}},
		{"deleteResourceGroup", func(t *testing.T) {
			// In use (the running cluster holds quota in it): refused, and
			// a group registered in quantities and unused: deleted.
			if got := e.must(req{method: "DELETE", path: "/v1/resourcegroups/rg-1"}, 409, nil).err(t); got.Code != CodeState {
				t.Fatalf("delete of a resource group in use: %+v", got)
			}
			e.must(req{method: "PUT", path: "/v1/resourcegroups/rg-spare",
				body: `{"package":"pkg-1","capacity":{"cpu":"8","memory":"32Gi"}}`}, 200, nil)
			var u quota.Usage
			e.must(req{method: "GET", path: "/v1/resourcegroups/rg-spare"}, 200, &u)
			if u.Capacity != (quota.Resources{MilliCPU: 8000, Memory: 32 * quota.GiB}) {
				t.Fatalf("capacity given in quantities: %+v", u.Capacity)
			}
			e.must(req{method: "DELETE", path: "/v1/resourcegroups/rg-spare"}, 204, nil)
			e.must(req{method: "GET", path: "/v1/resourcegroups/rg-spare"}, 404, nil)
		}},
		{"hibernateCluster", func(t *testing.T) {
			e.must(req{method: "POST", path: "/v1/clusters/" + cl.ID + "/hibernate?force=true"}, 200, nil)
			e.settle()
			if s := e.clusterState(cl.ID); s != cluster.Hibernated {
				t.Fatalf("state %s", s)
			}
		}},
		{"deleteJob", func(t *testing.T) {
			e.must(req{method: "DELETE", path: "/v1/jobs/" + rec2.ID}, 204, nil)
			e.must(req{method: "GET", path: "/v1/jobs/" + rec2.ID}, 404, nil)
		}},
		{"deleteTemplate", func(t *testing.T) {
			e.must(req{method: "DELETE", path: "/v1/templates/tpl"}, 204, nil)
		}},
		{"deleteCluster", func(t *testing.T) {
			e.must(req{method: "DELETE", path: "/v1/clusters/" + clone.ID + "?force=true"}, 202, nil)
			e.settle()
			e.must(req{method: "GET", path: "/v1/clusters/" + clone.ID}, 404, nil)
		}},
		{"deleteGroup", func(t *testing.T) {
			e.must(req{method: "DELETE", path: "/v1/groups/" + g2.ID + "?target=" + g1.ID}, 204, nil)
		}},
		{"openAPI", func(t *testing.T) {
			e.must(req{method: "GET", path: "/v1/openapi.json", user: "-"}, 200, &map[string]any{})
		}},
	}

	// Every route has a step, and every step a route.
	ids := map[string]*route{}
	for _, rt := range e.h.routes {
		ids[rt.id] = rt
	}
	var stepped []string
	for _, s := range steps {
		if ids[s.route] == nil {
			t.Errorf("step %q: no such route", s.route)
		}
		stepped = append(stepped, s.route)
	}
	for id := range ids {
		if !slices.Contains(stepped, id) {
			t.Errorf("route %s has no step", id)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for _, s := range steps {
		if !t.Run(s.route, s.do) {
			t.FailNow() // the later steps build on this one
		}
	}
	// Each route answered a success to a request of the step's.
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range steps {
		rt := ids[s.route]
		if e.hits[rt.method+" "+rt.path] == 0 {
			t.Errorf("route %s (%s %s) never answered a success", rt.id, rt.method, rt.path)
		}
	}
}
