package dlc_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/storage"
)

const logsBucket = cosfake.DefaultBucket

// archiveFixture is a memory client whose runs print printed lines, with
// its logs' location in a COS server on loopback (which holds the job
// package), and its COS client; more options may follow.
func archiveFixture(t *testing.T, printed int, srvOpts []cosfake.Option, more ...dlc.Option) (*fixture, *cosfake.Server, []string) {
	t.Helper()
	srv := cosfake.New(t, srvOpts...)
	var pkg bytes.Buffer
	zw := zip.NewWriter(&pkg)
	if w, err := zw.Create("main.py"); err != nil {
		t.Fatal(err)
	} else if _, err := w.Write([]byte("print('hi')\n")); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.PutObject(logsBucket, "job.zip", pkg.Bytes()); err != nil {
		t.Fatal(err)
	}
	cc, err := storage.NewCOSClient(storage.COSOptions{Region: cosfake.DefaultRegion, Endpoint: srv.URL,
		Credentials: storage.Credentials{SecretID: "AKIDexample", SecretKey: "example-secret"},
		RetryBase:   time.Millisecond, RetryMax: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, printed)
	for i := range lines {
		lines[i] = fmt.Sprintf("step %d: loss %.3f", i, 1/float64(i+1))
	}
	opts := append([]dlc.Option{dlc.WithCOS(cc), dlc.WithLogsLocation("cos://" + logsBucket + "/dlc/logs")}, more...)
	f := newFixture(t, dlctest.MemoryOptions{Options: opts, Ray: memory.RayHooks{
		RunOutcome: func(*job.Run) memory.Outcome { return memory.Outcome{Logs: lines} }}})
	return f, srv, lines
}

// onDemandRun submits an on-demand run of a job config with a package in
// COS, and settles until it has ended and its cluster is gone.
func (f *fixture) onDemandRun() *job.Run {
	f.t.Helper()
	cfg, err := dlc.NewJob("train").OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
		WorkerGroup("cpu", "cu.4c8g", 1, 1).COSPackage("cos://" + logsBucket + "/job.zip").Entrypoint("python main.py").Build()
	f.must(err)
	_, r, err := job.Submit(f.ctx, f.c, cfg, "")
	f.must(err)
	f.settle()
	r = f.run(r.ID)
	if r.State != job.Succeeded || !r.RayDone {
		f.t.Fatalf("the run is %s (Ray done: %v), want succeeded and released", r.State, r.RayDone)
	}
	// Ray's record goes with the head, as a real head's does.
	f.must(f.m.Backend.Ray.ForgetRun(f.ctx, r.ID))
	return r
}

// With the logs' location in COS and a COS client, a run's whole log is
// written there when it ends, and read back whole by Logs and Follow, on
// any client, once Ray and the run's cluster are gone: not the 200-line
// tail.
func TestRunWholeLogInCOS(t *testing.T) {
	f, srv, lines := archiveFixture(t, 500, nil)
	r := f.onDemandRun()
	want := append(slices.Clone(lines), fmt.Sprintf("Job %s succeeded", r.ID))
	if r.LogsArchived.Lines != len(want) || r.LogsArchived.Dropped != 0 || r.Logs != "cos://"+logsBucket+"/dlc/logs/"+r.ID {
		t.Fatalf("archived %+v at %s, want %d lines at cos://%s/dlc/logs/%s", r.LogsArchived, r.Logs, len(want), logsBucket, r.ID)
	}
	obj, err := srv.Object(logsBucket, "dlc/logs/"+r.ID)
	if err != nil || string(obj) != strings.Join(want, "\n")+"\n" {
		t.Fatalf("the object in COS: %d bytes, %v; want the whole log as text", len(obj), err)
	}
	for i, c := range []*dlc.Client{f.c, f.m.NewClient()} {
		got, err := c.Runs().Logs(f.ctx, r.ID)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("client %d: Logs = %d lines, %v; want the whole %d", i+1, len(got), err, len(want))
		}
		ch, err := c.Runs().Follow(f.ctx, r.ID)
		f.must(err)
		var followed []string
		for l := range ch {
			followed = append(followed, l)
		}
		if !slices.Equal(followed, want) {
			t.Fatalf("client %d: Follow sent %d lines, want the whole %d", i+1, len(followed), len(want))
		}
	}

	// An object that does not hold what the run recorded (written by
	// someone else, even with as many lines) is not taken: the kept tail
	// is read instead.
	forged := strings.Repeat("\x1b]0;owned\x07 https://x/y?q-signature=secret\n", len(want))
	for _, obj := range []string{"forged\n", forged} {
		f.must(srv.PutObject(logsBucket, "dlc/logs/"+r.ID, []byte(obj)))
		got, err := f.c.Runs().Logs(f.ctx, r.ID)
		f.must(err)
		if len(got) != job.MaxLogTailLines+1 || got[0] != fmt.Sprintf("[%d earlier lines not kept]", len(want)-job.MaxLogTailLines) {
			t.Fatalf("Logs over a forged object: %d lines, first %q; want the kept tail", len(got), got[0])
		}
	}
}

// A write to COS that fails past the COS client's retries leaves the run
// ended as Ray said, its tail kept, and the reason in its event log.
func TestRunWholeLogNotWritten(t *testing.T) {
	puts := func(r *http.Request) bool {
		return r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/dlc/logs/")
	}
	f, _, lines := archiveFixture(t, 300, []cosfake.Option{cosfake.WithMiddleware(cosfake.FailFirst(1000, http.StatusServiceUnavailable, "ServiceUnavailable", puts))})
	r := f.onDemandRun()
	if !r.LogsArchived.IsZero() || !r.LogsKept {
		t.Fatalf("archived %+v, kept %v; want the tail alone", r.LogsArchived, r.LogsKept)
	}
	events, err := f.c.Runs().Events(f.ctx, r.ID)
	f.must(err)
	if !slices.ContainsFunc(events, func(e event.Event) bool {
		return e.Action == "logs" && strings.Contains(e.Message, "could not be written") && strings.Contains(e.Message, "503")
	}) {
		t.Fatalf("no event says why the whole log was not written: %v", events)
	}
	got, err := f.c.Runs().Logs(f.ctx, r.ID)
	f.must(err)
	if len(got) != job.MaxLogTailLines+1 || got[len(got)-2] != lines[len(lines)-1] {
		t.Fatalf("Logs = %d lines, want the kept tail", len(got))
	}
}

// A location in COS that is not a COS URL is refused when there is a COS
// client to write it with.
func TestLogsLocationInCOSChecked(t *testing.T) {
	cc, err := storage.NewCOSClient(storage.COSOptions{Region: cosfake.DefaultRegion})
	f := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	f(err)
	_, err = dlc.New(dlc.WithCOS(cc), dlc.WithLogsLocation("cos://Not_A_Bucket/logs"))
	if !errors.Is(err, dlc.ErrInvalid) || !strings.Contains(err.Error(), "WithLogsLocation") {
		t.Fatalf("New with a bad COS location: %v, want ErrInvalid naming WithLogsLocation", err)
	}
	c, err := dlc.New(dlc.WithLogsLocation("cos://Not_A_Bucket/logs")) // named only: no COS client
	f(err)
	f(c.Close())
}

// A COS that does not answer costs the run's end at most half of what its
// step has left: the run ends as Ray said (succeeded), its tail kept and
// the reason recorded, not failed by a step that ran out of time.
func TestRunWholeLogCOSHangs(t *testing.T) {
	hang := cosfake.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/dlc/logs/") {
				_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client go
				<-r.Context().Done()               // until the client gives up
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	f, _, _ := archiveFixture(t, 10, []cosfake.Option{hang}, dlc.WithReconcileTimeout(2*time.Second), dlc.WithRetries(2, 10*time.Millisecond, 20*time.Millisecond))
	r := f.onDemandRun() // fails the test unless the run succeeded and was released
	if !r.LogsArchived.IsZero() || !r.LogsKept {
		t.Fatalf("archived %+v, kept %v; want the tail alone", r.LogsArchived, r.LogsKept)
	}
	events, err := f.c.Runs().Events(f.ctx, r.ID)
	f.must(err)
	if !slices.ContainsFunc(events, func(e event.Event) bool { return e.Action == "logs" }) {
		t.Fatalf("no event says the whole log was not written: %v", events)
	}
}
