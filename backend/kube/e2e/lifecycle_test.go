package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/job"
)

// The lifecycle rules on the kube backend with Ray in the loop, at
// scaled-down times: a schedule every two seconds through two replicas
// (L1), deadlines on a cluster and on demand (L2), retries (L3) and an
// idle cluster hibernated (L4).
func TestLifecycle(t *testing.T) {
	s := newScene(t, kube.Options{})
	outer := t // what lives for the whole test is cleaned up at its end
	// A second replica on a backend of its own, on the same namespace.
	// Short retry backoffs, and schedules every two seconds (no floor).
	other := newClient(t, s.w.backend(t, kube.Options{Namespace: s.ns}), dlc.WithRunRetryBackoff(time.Second, 2*time.Second), dlc.WithScheduleFloor(0))
	_ = s.c.Close() // the scene's client, replaced by one with short retry backoffs
	s.c = newClient(t, s.be, dlc.WithRunRetryBackoff(time.Second, 2*time.Second), dlc.WithScheduleFloor(0))
	cl := s.cluster("生命周期", true)
	pkg := "cos://jobs-1250000000/lifecycle.zip"

	timed(t, "a schedule every two seconds, two replicas", func(t *testing.T) {
		cfg, err := dlc.NewJob("every-2s").OnCluster(cl.ID).COSPackage(pkg).Entrypoint("python main.py").
			Schedule("*/2 * * * * *", job.Concurrency(job.AllowConcurrent)).Build()
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.c.Jobs().Create(s.ctx, cfg, dlc.SaveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		forbid, err := dlc.NewJob("every-2s-forbid").OnCluster(cl.ID).COSPackage(pkg).Entrypoint("python slow.py").
			Schedule("*/2 * * * * *", job.Concurrency(job.ForbidConcurrent)).Build()
		if err != nil {
			t.Fatal(err)
		}
		frec, err := other.Jobs().Create(s.ctx, forbid, dlc.SaveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var runs []*job.Run
		succeeded := func(n int) func() (bool, string) {
			return func() (bool, string) {
				runs, err = s.c.Runs().List(s.ctx, dlc.RunListOptions{JobID: rec.ID, States: []job.RunState{job.Succeeded}})
				return err == nil && len(runs) >= n, fmt.Sprint(len(runs), " succeeded ", err)
			}
		}
		waitFor(t, "two scheduled runs succeeded", succeeded(2))
		// A replica restarts: the other is closed, a new one starts on a
		// backend of its own.
		_ = other.Close()
		other = newClient(outer, s.w.backend(outer, kube.Options{Namespace: s.ns}), dlc.WithRunRetryBackoff(time.Second, 2*time.Second), dlc.WithScheduleFloor(0))
		waitFor(t, "four scheduled runs succeeded", succeeded(4))
		// Forbid: slow.py runs 3 s, the ticks come every 2: some are skipped.
		waitFor(t, "a tick skipped under Forbid, recorded", func() (bool, string) {
			got, err := other.Jobs().Get(s.ctx, frec.ID)
			if err != nil {
				return false, err.Error()
			}
			skipped := slices.ContainsFunc(got.Events, func(e event.Event) bool {
				return e.Action == "tick-skipped" && strings.Contains(e.Message, "concurrency policy Forbid")
			})
			return skipped && got.ScheduleStatus.Missed > 0, fmt.Sprintf("%+v", got.ScheduleStatus)
		})
		suspended, err := other.Jobs().SuspendSchedule(s.ctx, frec.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Every tick skipped is in the log, those skipped one after another
		// for the same reason folded into one entry: the entries' counts,
		// kept by the CRD, add up to the ticks the status counts.
		logged := 0
		for _, e := range suspended.Events {
			if e.Action == "tick-skipped" || e.Action == "tick-missed" {
				logged += e.Times()
			}
		}
		if logged != suspended.ScheduleStatus.Missed || len(suspended.Events) >= event.MaxEntries {
			t.Fatalf("%d ticks skipped in %d entries of the log, %d in the status: %+v", logged, len(suspended.Events), suspended.ScheduleStatus.Missed, suspended.Events)
		}
		t.Logf("%d ticks skipped, in %d entries of the log", logged, len(suspended.Events))
		fruns, err := other.Runs().List(s.ctx, dlc.RunListOptions{JobID: frec.ID})
		if err != nil {
			t.Fatal(err)
		}
		live := 0
		for _, r := range fruns {
			if r.State.Live() {
				live++
			}
		}
		if live > 1 {
			t.Errorf("%d runs of the Forbid schedule live at once", live)
		}
		if _, err := s.c.Jobs().SuspendSchedule(s.ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		var got *job.Record
		waitFor(t, "the schedule suspended in the other replica's view", func() (bool, string) {
			got, err = other.Jobs().Get(s.ctx, rec.ID)
			return err == nil && got.ScheduleStatus.Suspended, fmt.Sprint(err)
		})
		all, err := other.Runs().List(s.ctx, dlc.RunListOptions{JobID: rec.ID})
		if err != nil {
			t.Fatal(err)
		}
		// One run per tick: no tick twice, and every tick from the first
		// to the last either ran or is counted missed.
		slices.SortFunc(all, func(a, b *job.Run) int { return a.Tick.Compare(b.Tick) })
		for i := 1; i < len(all); i++ {
			if all[i].Tick.Equal(all[i-1].Tick) {
				t.Fatalf("tick %s ran twice: %s and %s", all[i].Tick, all[i-1].ID, all[i].ID)
			}
		}
		span := int(all[len(all)-1].Tick.Sub(all[0].Tick)/(2*time.Second)) + 1
		if len(all)+got.ScheduleStatus.Missed < span {
			t.Fatalf("%d runs and %d missed over %d ticks", len(all), got.ScheduleStatus.Missed, span)
		}
		t.Logf("%d runs, %d missed, over %d ticks of two seconds", len(all), got.ScheduleStatus.Missed, span)
	})

	timed(t, "deadlines on a cluster and on demand", func(t *testing.T) {
		onCluster := s.run(dlc.NewJob("deadline-cluster").OnCluster(cl.ID).COSPackage(pkg).Entrypoint("python long.py").
			ActiveDeadline(3 * time.Second).Retries(1))
		onDemand := s.run(dlc.NewJob("deadline-od").OnDemand("pkg-1", "rg").Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).COSPackage(pkg).Entrypoint("python long.py").
			ActiveDeadline(8 * time.Second))
		for _, id := range []string{onCluster.ID, onDemand.ID} {
			r := s.ended(s.c, id)
			if r.State != job.Failed || !r.Final || !strings.Contains(r.Message, "deadline exceeded") {
				t.Errorf("run %s past its deadline: %s final=%v %q", id, r.State, r.Final, r.Message)
			}
			if r.FinishedAt.Sub(r.SubmittedAt) > time.Duration(r.Config.ActiveDeadlineSeconds)*time.Second+10*time.Second {
				t.Errorf("run %s ended %s after its submission, its deadline %ds", id, r.FinishedAt.Sub(r.SubmittedAt), r.Config.ActiveDeadlineSeconds)
			}
		}
		var rj rayv1.RayJobList
		if err := s.w.cp.Client().List(s.ctx, &rj, client.InNamespace(s.ns), client.MatchingLabels{kube.KeyRunID: onDemand.ID}); err == nil && len(rj.Items) == 1 {
			if d := rj.Items[0].Spec.ActiveDeadlineSeconds; d == nil || *d != 9 {
				t.Errorf("the RayJob's activeDeadlineSeconds %v, want 9 (8 and a second)", d)
			}
		}
		// The job on the cluster was stopped in Ray, and its retry never came.
		waitFor(t, "the on-demand cluster released", func() (bool, string) {
			return s.reserved().MilliCPU == 12000, "reserving " + s.reserved().String()
		})
		if r, err := s.c.Runs().Get(s.ctx, onCluster.ID); err != nil || r.NextAttempt != "" {
			t.Errorf("a run failed by its deadline was retried: %+v %v", r, err)
		}
	})

	timed(t, "a failing run retried twice", func(t *testing.T) {
		first := s.run(dlc.NewJob("fails").OnCluster(cl.ID).COSPackage(pkg).Entrypoint("python fails.py").Retries(2))
		var all []*job.Run
		waitFor(t, "three failed attempts", func() (bool, string) {
			var err error
			all, err = other.Runs().List(s.ctx, dlc.RunListOptions{JobID: first.JobID})
			failed := 0
			for _, r := range all {
				if r.State == job.Failed {
					failed++
				}
			}
			return err == nil && failed == 3, fmt.Sprint(len(all), " runs, ", failed, " failed ", err)
		})
		slices.SortFunc(all, func(a, b *job.Run) int { return a.AttemptNumber() - b.AttemptNumber() })
		for i, r := range all {
			if r.AttemptNumber() != i+1 || (i > 0 && r.PreviousAttempt != all[i-1].ID) {
				t.Errorf("attempt %d: %+v", i+1, r)
			}
		}
		if last := all[2]; last.Retries() || last.NextAttempt != "" {
			t.Errorf("the third attempt would be retried again")
		}
	})

	timed(t, "an idle cluster hibernated", func(t *testing.T) {
		before := s.reserved()
		spec, err := dlc.NewCluster("闲置").Groups(s.grp.ID).Resources("pkg-1", "rg").Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).IdleTimeout(3 * time.Second).Build()
		if err != nil {
			t.Fatal(err)
		}
		idle, err := s.c.Clusters().Create(s.ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		s.clusterState(idle.ID, cluster.Created)
		if _, err := s.c.Clusters().Start(s.ctx, idle.ID); err != nil {
			t.Fatal(err)
		}
		s.clusterState(idle.ID, cluster.Running)
		got := s.clusterState(idle.ID, cluster.Hibernated)
		if !slices.ContainsFunc(got.Events, func(e event.Event) bool {
			return e.Action == "hibernate" && strings.Contains(e.Message, "idle timeout")
		}) {
			t.Errorf("no idle hibernate in the cluster's events: %+v", got.Events)
		}
		waitFor(t, "its quota released", func() (bool, string) {
			return s.reserved() == before, "reserving " + s.reserved().String() + ", was " + before.String()
		})
		s.clusterState(cl.ID, cluster.Running) // without an idle timeout, it stays
	})
	s.noWarnings()
}
