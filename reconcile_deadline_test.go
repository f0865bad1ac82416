package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// realClient is a client on the real clock with workers, over a memory
// backend whose Ray calls go through call, with a resource group and a
// cluster group.
type realClient struct {
	t   *testing.T
	c   *dlc.Client
	ctx context.Context
	grp string
}

func newRealClient(t *testing.T, hooks memory.RayHooks, opts ...dlc.Option) *realClient {
	t.Helper()
	b := memory.New(memory.Options{Ray: hooks})
	c, err := dlc.New(append([]dlc.Option{dlc.WithBackend(b)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rc := &realClient{t: t, c: c, ctx: dlc.WithUser(context.Background(), "alice")}
	if _, err := c.ResourceGroups().Register(rc.ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	g, err := c.Groups().Create(rc.ctx, "组")
	if err != nil {
		t.Fatal(err)
	}
	rc.grp = g.ID
	return rc
}

// running creates and starts a cluster and waits until it runs.
func (rc *realClient) running(name string) *cluster.Cluster {
	rc.t.Helper()
	spec, err := dlc.NewCluster(name).Groups(rc.grp).Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	if err != nil {
		rc.t.Fatal(err)
	}
	cl, err := rc.c.Clusters().Create(rc.ctx, spec)
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.until("cluster "+name+" created", func() (bool, string) {
		got, err := rc.c.Clusters().Get(rc.ctx, cl.ID)
		return err == nil && got.State == cluster.Created, fmt.Sprint(got.State, err)
	})
	if _, err := rc.c.Clusters().Start(rc.ctx, cl.ID); err != nil {
		rc.t.Fatal(err)
	}
	rc.until("cluster "+name+" running", func() (bool, string) {
		got, err := rc.c.Clusters().Get(rc.ctx, cl.ID)
		return err == nil && got.State == cluster.Running, fmt.Sprint(got.State, err)
	})
	return cl
}

// runOn starts a run of a new job on cluster id.
func (rc *realClient) runOn(id, name string) *job.Run {
	rc.t.Helper()
	cfg, err := dlc.NewJob(name).OnCluster(id).COSPackage("cos://jobs-1250000000/job.zip").Entrypoint("python main.py").Build()
	if err != nil {
		rc.t.Fatal(err)
	}
	_, r, err := job.Submit(rc.ctx, rc.c, cfg, "")
	if err != nil {
		rc.t.Fatal(err)
	}
	return r
}

func (rc *realClient) ended(id string) *job.Run {
	rc.t.Helper()
	var r *job.Run
	rc.until("run "+id+" ended", func() (bool, string) {
		var err error
		r, err = rc.c.Runs().Get(rc.ctx, id)
		return err == nil && r.State.Terminal(), fmt.Sprint(r, err)
	})
	return r
}

func (rc *realClient) until(what string, cond func() (bool, string)) {
	rc.t.Helper()
	settleWithin(rc.t, 30*time.Second, what, cond)
}

// A Ray call that hangs (honouring its context, as the backends' calls
// do) holds its worker only until the step's deadline: with one worker, a
// run whose status call hangs does not keep another cluster from being
// created and started, nor its job from running.
func TestReconcileStepDeadline(t *testing.T) {
	var hang sync.Map // run ids whose status hangs
	rc := newRealClient(t, memory.RayHooks{Call: func(ctx context.Context, call, id string) error {
		if _, ok := hang.Load(id); ok && call == memory.CallRunStatus {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}, dlc.WithWorkers(1), dlc.WithReconcileTimeout(200*time.Millisecond), dlc.WithRetries(1000, 10*time.Millisecond, 50*time.Millisecond))
	a := rc.running("a")
	hungRun := rc.runOn(a.ID, "hangs")
	hang.Store(hungRun.ID, true)
	// Its status calls now hang, one after another, on the only worker.
	b := rc.running("b")
	if r := rc.ended(rc.runOn(b.ID, "fine").ID); r.State != job.Succeeded {
		t.Fatalf("the run on the healthy cluster: %s: %s", r.State, r.Message)
	}
	if r, err := rc.c.Runs().Get(rc.ctx, hungRun.ID); err != nil || r.State.Terminal() {
		t.Errorf("the hung run: %v, %v", r, err)
	}
}

// busyError is a call not made because its target was busy.
type busyError struct{}

func (busyError) Error() string     { return "busy" }
func (busyError) Busy() bool        { return true }
func (busyError) Is(err error) bool { return err == errs.ErrUnavailable }

// A call not made because its target was busy is retried and not counted
// as a failed step: a run whose head is busy many times in a row does not
// fail for it.
func TestReconcileBusyIsNotAFailure(t *testing.T) {
	var busyLeft atomic.Int64
	rc := newRealClient(t, memory.RayHooks{Call: func(ctx context.Context, call, id string) error {
		if call == memory.CallRunStatus && strings.HasPrefix(id, "run-") && busyLeft.Add(-1) >= 0 {
			return busyError{}
		}
		return nil
	}}, dlc.WithRetries(3, time.Millisecond, 5*time.Millisecond))
	cl := rc.running("a")
	busyLeft.Store(20) // far more than the 3 retries
	if r := rc.ended(rc.runOn(cl.ID, "busy").ID); r.State != job.Succeeded {
		t.Fatalf("a run whose head was busy 20 times: %s: %s", r.State, r.Message)
	}
}

// What Ray reports of a run is stored bounded, whatever the backend: the
// memory backend's simulated Ray ending a run with a 2 MiB message stores
// its last job.MaxMessage bytes.
func TestRunMessageBounded(t *testing.T) {
	long := strings.Repeat("Traceback line\n", 2<<20/15) + "RuntimeError: out of memory"
	rc := newRealClient(t, memory.RayHooks{RunOutcome: func(*job.Run) memory.Outcome {
		return memory.Outcome{Fail: true, Message: long}
	}})
	cl := rc.running("a")
	r := rc.ended(rc.runOn(cl.ID, "fails").ID)
	if r.State != job.Failed || len(r.Message) > job.MaxMessage || !strings.HasSuffix(r.Message, "RuntimeError: out of memory") {
		t.Fatalf("%s, %d bytes of message ending %q", r.State, len(r.Message), r.Message[max(0, len(r.Message)-40):])
	}
	for _, e := range r.Events {
		if len(e.Message) > job.MaxMessage {
			t.Errorf("event %s holds %d bytes of message", e.Action, len(e.Message))
		}
	}
}

// A run whose Ray stays unreachable past WithRayUnreachableTimeout fails
// with the call's error as the reason, bounded: the error may quote what
// a Ray head or a server answered.
func TestGiveUpReasonBounded(t *testing.T) {
	huge := errors.New(strings.Repeat("the head said: ", 1<<16) + "the end")
	rc := newRealClient(t, memory.RayHooks{Call: func(ctx context.Context, call, id string) error {
		if call == memory.CallRunStatus {
			return huge
		}
		return nil
	}}, dlc.WithRetries(2, time.Millisecond, 2*time.Millisecond), dlc.WithRayUnreachableTimeout(time.Millisecond))
	cl := rc.running("a")
	r := rc.ended(rc.runOn(cl.ID, "fails").ID)
	if r.State != job.Failed || len(r.Message) > job.MaxMessage || !strings.HasSuffix(r.Message, "the end") ||
		!strings.Contains(r.Message, "Ray unreachable since") {
		t.Fatalf("%s with %d bytes of message", r.State, len(r.Message))
	}
}
