package dlc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// Ray follows a generation of a cluster that the store never reaches (the
// RayCluster written from outside the platform, a store restored from a
// backup): the cluster's generation is moved past Ray's, saying so, and
// Ray is taken back to the cluster as stored. Before, a starting cluster
// stayed starting for ever with no reason, and a run on a running one
// was refused by Ray (a conflict, never counted as a failure) for ever.
// A generation past any the platform could reach is a failed step: the
// cluster turns abnormal, saying why.
func TestRayAheadOfTheStore(t *testing.T) {
	for _, c := range []struct {
		name    string
		running bool  // the foreign write comes on a running cluster (else a starting one)
		ahead   int64 // how far ahead of the stored generation Ray is put
		want    cluster.State
	}{
		{"starting", false, 1, cluster.Running},
		{"running, then a run", true, 1, cluster.Running},
		{"a generation that cannot be passed", false, 1 << 62, cluster.Abnormal},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, dlctest.MemoryOptions{Delays: startTakes(time.Minute)})
			var cl *cluster.Cluster
			if c.running {
				cl = f.runningCluster("ahead")
			} else {
				created, err := f.c.Clusters().Create(f.ctx, f.spec("ahead", 1, 1))
				f.must(err)
				f.m.Settle(time.Millisecond, 10)
				cl, err = f.c.Clusters().Start(f.ctx, created.ID)
				f.must(err)
			}
			foreign := cl.DeepCopy()
			foreign.Generation += c.ahead // a write to Ray from outside
			f.must(f.m.Backend.ApplyCluster(context.Background(), foreign))
			f.m.Settle(time.Minute, 180) // 3 hours, 18 step timeouts
			got, err := f.c.Clusters().Get(f.ctx, cl.ID)
			f.must(err)
			if got.State != c.want {
				t.Fatalf("after 3 hours: %s, reason %q (stored generation %d, Ray's %d), want %s\n%s",
					got.State, got.Reason, got.Generation, foreign.Generation, c.want, f.events(cl.ID))
			}
			if c.want == cluster.Abnormal {
				if !strings.Contains(got.Reason, "never wrote") {
					t.Fatalf("abnormal, reason %q: does not say why", got.Reason)
				}
				return
			}
			if got.Generation <= foreign.Generation || !strings.Contains(f.events(cl.ID), "generation-fenced") {
				t.Fatalf("generation %d (Ray's was %d), events:\n%s", got.Generation, foreign.Generation, f.events(cl.ID))
			}
			rec := f.job(dlc.NewJob("j").OnCluster(cl.ID))
			r := f.start(rec.ID)
			f.settle()
			if r = f.run(r.ID); r.State != job.Succeeded {
				t.Fatalf("a run on the cluster: %s %q", r.State, r.Message)
			}
		})
	}
}

// suspendedRay reports an on-demand cluster that Ray says failed as
// suspended at its generation instead (hostile: someone suspended its
// RayCluster).
type suspendedRay struct{ *memory.Backend }

func (s suspendedRay) ClusterStatus(ctx context.Context, id string) (cluster.Observation, error) {
	o, err := s.Backend.ClusterStatus(ctx, id)
	if err == nil && o.Phase == cluster.PhaseFailed && strings.HasPrefix(id, "od-") {
		o.Phase, o.Pods, o.Reason = cluster.PhaseSuspended, nil, ""
	}
	return o, err
}

// An on-demand run whose cluster failed to start is failed by its next
// step; when that write is refused once and Ray meanwhile reports the
// cluster suspended at its generation, the cluster goes abnormal, then
// hibernated. The run fails then (its cluster will not run the job), and
// the cluster is deleted. Before, the run took every state of its
// cluster but running for "still starting", and stayed provisioning for
// ever.
func TestOnDemandRunOnHibernatedCluster(t *testing.T) {
	f, h := hookedWith(t, dlctest.MemoryOptions{Delays: startTakes(time.Minute),
		Ray: memory.RayHooks{ClusterStart: func(c *cluster.Cluster) error {
			if c.Temporary {
				return errors.New("no nodes")
			}
			return nil
		}}})
	f.m.CloseClient(f.c)
	f.c = f.m.NewClient(dlc.WithBackend(suspendedRay{f.m.Backend}))
	refused := false
	*h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if !refused && w.Doc.Kind == "run" && strings.Contains(string(w.Doc.Data), `"state":"failed"`) {
			refused = true
			return "", errs.Unavailable("store update", errors.New("the store refuses one write"))
		}
		return next(ctx)
	}
	cfg, err := dlc.NewJob("od").OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").WorkerGroup("w", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/job.zip").Entrypoint("python main.py").Build()
	f.must(err)
	rec, err := f.c.Jobs().Create(f.ctx, cfg, dlc.SaveOptions{})
	f.must(err)
	r, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	f.m.Settle(time.Minute, 180)
	r = f.run(r.ID)
	if r.State.Live() || !refused {
		cl, _ := f.c.Clusters().Get(f.ctx, r.ClusterID)
		t.Fatalf("refused once: %v; after 3 hours: run %s %q; its cluster %s %q", refused, r.State, r.Message, cl.State, cl.Reason)
	}
	if _, err := f.c.Clusters().Get(f.ctx, r.ClusterID); !errs.IsNotFound(err) {
		t.Fatalf("the run's on-demand cluster after it ended: %v, want deleted", err)
	}
}
