package cli_test

import (
	"strings"
	"testing"
)

// A cluster's growth that waits in its resource group's queue (issue 42)
// is shown by describe, with the queue's priority.
func TestDescribeAWaitingGrowth(t *testing.T) {
	f := newFixture(t, fixtureOptions{cpu: 30})
	cls := created(t, f.must("create", "-f", f.file("cluster-cpu-autoscaling.yaml"), "--request-id", "a"), "cluster")
	f.settle()
	f.must("start", cls)
	f.settle()
	// 12 cores at priority 9, above the cluster's 6; 10 free: the run
	// waits, and the growth (8 cores, 28 of 30 in all) waits behind it.
	f.in = strings.Replace(onDemandJob("train-a"), "  resourceGroup: rg-cpu\n", "  resourceGroup: rg-cpu\n  priority: 9\n", 1)
	f.must("submit", "-f", "-", "--request-id", "q1")
	f.settle()
	res, err := f.m.Client.Clusters().Autoscale(f.admin, cls, "cpu", 2)
	if err != nil {
		t.Fatal(err)
	}
	if !res.QuotaRefused || !res.Queued {
		t.Fatalf("a growth behind a waiting run: %+v, want refused and queued", res)
	}
	out := f.must("describe", "cluster", cls)
	if !strings.Contains(out, "Growth Waiting") || !strings.Contains(out, "cpu to 2 workers, in the resource group's queue at priority 6") {
		t.Fatalf("describe does not show the waiting growth:\n%s", out)
	}
}
