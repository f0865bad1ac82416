package e2e_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/usage"
)

// TestMeteringFollowsThePods: on the Kubernetes loop (KubeRay's
// reconcilers, the kubelet stand-in), a cluster started, hibernated,
// started again and deleted through two replicas, one of them restarted:
// the report's CPU core-seconds for the cluster equal what the kubelet
// stand-in ran of its pods (its record: from its Running write to the
// pod's delete), within a second per pod start and stop (each side dates
// a change when its own informer sees it), no pod runs after the cluster
// is gone, and both replicas report the same.
func TestMeteringFollowsThePods(t *testing.T) {
	s := newScene(t, kube.Options{})
	other := newClient(t, s.w.backend(t, kube.Options{Namespace: s.ns}))
	began := time.Now()
	cl := s.cluster("计量", true)
	meteredFor := func(c *dlc.Client) float64 {
		rep, err := c.Usage(s.ctx, usage.Query{From: began.Add(-time.Minute), To: time.Now().Add(time.Hour), Filter: usage.Filter{Cluster: cl.ID}})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Total.CPUCoreHours * 3600
	}
	waitFor(t, "some usage metered while it runs", func() (bool, string) {
		got := meteredFor(other)
		return got >= 24, fmt.Sprintf("%.1f core-seconds", got) // 12 cores for 2 s
	})
	if _, err := other.Clusters().Hibernate(s.ctx, cl.ID, dlc.HibernateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.clusterState(cl.ID, cluster.Hibernated)
	asleep := meteredFor(s.c)
	if _, err := s.c.Clusters().Start(s.ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	s.clusterState(cl.ID, cluster.Running)
	_ = other.Close() // a replica restarts
	other = newClient(t, s.w.backend(t, kube.Options{Namespace: s.ns}))
	waitFor(t, "usage metered again after the start", func() (bool, string) {
		got := meteredFor(other)
		return got >= asleep+24, fmt.Sprintf("%.1f core-seconds, %.1f before the start", got, asleep)
	})
	if err := other.Clusters().Delete(s.ctx, cl.ID, dlc.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cluster gone", func() (bool, string) {
		_, err := s.c.Clusters().Get(s.ctx, cl.ID)
		return errs.IsNotFound(err), fmt.Sprint(err)
	})
	metered := meteredFor(s.c)

	var ran, slack float64
	pods := 0
	for _, r := range s.w.loop.Kubelet.Runs() {
		if r.Labels[kube.KeyClusterID] != cl.ID {
			continue
		}
		if r.End.IsZero() {
			t.Errorf("pod %s still runs after the cluster is gone", r.Name)
			continue
		}
		cores := float64(r.Requests.Cpu().MilliValue()) / 1000
		ran += cores * r.End.Sub(r.Start).Seconds()
		slack += 2 * cores // a second at each end
		pods++
	}
	t.Logf("metered %.2f core-seconds; the kubelet ran %.2f in %d pod runs (allowed ±%.0f)", metered, ran, pods, slack)
	if pods < 6 {
		t.Fatalf("%d pod runs of the cluster, want its three pods twice", pods)
	}
	if math.Abs(metered-ran) > slack {
		t.Errorf("metered %.2f core-seconds, the kubelet ran %.2f: off by more than %.0f", metered, ran, slack)
	}
	if again := meteredFor(other); again != metered {
		t.Errorf("one replica reports %.2f core-seconds, the other %.2f", metered, again)
	}
}
