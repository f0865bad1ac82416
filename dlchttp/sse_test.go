package dlchttp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
)

// onDemandJob is an on-demand job config in rg-1.
func onDemandJob(t *testing.T, name string) *job.Config {
	t.Helper()
	cfg, err := dlc.NewJob(name).OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
		WorkerGroup("cpu", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestFollowLogs: a running run's log lines come over server-sent events
// as it runs, each once and in order, then an end event with the state
// it ended in.
func TestFollowLogs(t *testing.T) {
	var lines []string
	for i := range 20 {
		lines = append(lines, fmt.Sprintf("step %d: loss %.2f", i, 1/float64(i+1)))
	}
	e := newEnv(t, dlctest.MemoryOptions{Ray: memory.RayHooks{
		RunOutcome: func(*job.Run) memory.Outcome { return memory.Outcome{Logs: lines, Duration: 10 * time.Minute} },
	}}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound, not a wait
	defer cancel()
	e.register(64000)
	var rec job.Record
	e.must(req{method: "POST", path: "/v1/jobs", body: onDemandJob(t, "logs")}, 201, &rec)
	var run job.Run
	e.must(req{method: "POST", path: "/v1/jobs/" + rec.ID + "/runs"}, 201, &run)

	stop := e.m.Drive(ctx, time.Second, time.Millisecond)
	defer stop()
	if _, err := e.m.Client.Runs().Wait(ctx, run.ID, job.InState(job.Running)); err != nil {
		t.Fatal(err)
	}
	var got []string
	var end endEvent
	var liveAtFirst bool
	for ev := range e.stream(ctx, "/v1/runs/"+run.ID+"/logs/follow") {
		switch ev.name {
		case "line":
			var l string
			if err := json.Unmarshal([]byte(ev.data), &l); err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				var r job.Run
				e.must(req{method: "GET", path: "/v1/runs/" + run.ID}, 200, &r)
				liveAtFirst = r.State.Live()
			}
			got = append(got, l)
		case "end":
			if err := json.Unmarshal([]byte(ev.data), &end); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("event %+v", ev)
		}
	}
	want := append(slices.Clone(lines), fmt.Sprintf("Job %s succeeded", run.ID))
	if !slices.Equal(got, want) {
		t.Fatalf("followed %d lines %q, want %d %q", len(got), got, len(want), want)
	}
	if !liveAtFirst {
		t.Error("the first line came once the run had ended; want it while it ran")
	}
	if end.Reason != "ended" || end.State != job.Succeeded {
		t.Fatalf("end event %+v", end)
	}

	// A client that reconnects with the last line's id it got (17) gets
	// the lines after it.
	var again []string
	for ev := range e.stream(ctx, "/v1/runs/"+run.ID+"/logs/follow", "Last-Event-ID", "17") {
		if ev.name == "line" {
			var l string
			if err := json.Unmarshal([]byte(ev.data), &l); err != nil {
				t.Fatal(err)
			}
			again = append(again, l)
		}
	}
	if !slices.Equal(again, want[18:]) {
		t.Fatalf("after Last-Event-ID 17: %q, want %q", again, want[18:])
	}
}

// TestWatch: a watch opened over server-sent events tells of a cluster
// and a run made through the API, with the cluster's ETag; a stream ends
// with an end event once Options.MaxStream has passed.
func TestWatch(t *testing.T) {
	e := newEnv(t, dlctest.MemoryOptions{}, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound, not a wait
	defer cancel()
	e.register(64000)
	var g struct{ ID string }
	e.must(req{method: "POST", path: "/v1/groups", body: groupBody{Name: "g"}}, 201, &g)

	clusters := e.stream(ctx, "/v1/watch/clusters")
	runs := e.stream(ctx, "/v1/watch/runs")
	var cl cluster.Cluster
	a := e.must(req{method: "POST", path: "/v1/clusters", body: clusterSpec(t, "watched", g.ID)}, 201, &cl)
	for ev := range clusters {
		var d clusterEvent
		if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
			t.Fatal(err)
		}
		if d.ID != cl.ID {
			continue
		}
		if ev.name != "ADDED" || d.Type != "ADDED" || d.Cluster == nil || d.Cluster.Spec.Name != "watched" || d.ETag != a.header.Get("ETag") {
			t.Fatalf("event %s %+v, ETag of the create %s", ev.name, d, a.header.Get("ETag"))
		}
		break
	}
	var rec job.Record
	e.must(req{method: "POST", path: "/v1/jobs", body: onDemandJob(t, "watched")}, 201, &rec)
	var run job.Run
	e.must(req{method: "POST", path: "/v1/jobs/" + rec.ID + "/runs"}, 201, &run)
	for ev := range runs {
		var d runEvent
		if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
			t.Fatal(err)
		}
		if d.ID == run.ID {
			if ev.name != "ADDED" || d.Run == nil || d.Run.JobID != rec.ID {
				t.Fatalf("event %s %+v", ev.name, d)
			}
			break
		}
	}

	t.Run("bounded", func(t *testing.T) {
		short := newEnvOn(t, e.m, e.m.Client, Options{MaxStream: 50 * time.Millisecond, Heartbeat: 5 * time.Millisecond})
		a := short.do(req{method: "GET", path: "/v1/watch/clusters"}) // reads until the server ends the stream
		body := string(a.body)
		if a.status != 200 || !strings.Contains(body, ": heartbeat\n\n") ||
			!strings.HasSuffix(body, "event: end\ndata: {\"reason\":\"max-stream\"}\n\n") {
			t.Fatalf("%d %q", a.status, body)
		}
	})
	t.Run("client goes away", func(t *testing.T) {
		gone := newEnvOn(t, e.m, e.m.Client, Options{})
		sctx, scancel := context.WithCancel(ctx)
		follow := gone.stream(sctx, "/v1/watch/runs")
		scancel()
		for range follow {
		}
		closed := make(chan struct{})
		go func() { gone.srv.Close(); close(closed) }() // returns once every handler has
		select {
		case <-closed:
		case <-ctx.Done():
			t.Fatal("the stream's handler did not return once its client went away")
		}
	})
}
