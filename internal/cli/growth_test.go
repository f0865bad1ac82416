package cli_test

import (
	"strings"
	"testing"
)

// A cluster's growth that waits in its resource group's queue (issue 42)
// is shown by describe, with the queue's priority.
func TestDescribeAWaitingGrowth(t *testing.T) {
	f := newFixture(t, fixtureOptions{cpu: 24})
	cls := created(t, f.must("create", "-f", f.file("cluster-cpu-autoscaling.yaml"), "--request-id", "a"), "cluster")
	f.settle()
	f.must("start", cls)
	f.settle()
	f.in = onDemandJob("train-a") // 12 cores; 4 free
	f.must("submit", "-f", "-", "--request-id", "q1")
	f.settle()
	res, err := f.m.Client.Clusters().Autoscale(f.admin, cls, "cpu", 2)
	if err != nil {
		t.Fatal(err)
	}
	if !res.QuotaRefused {
		t.Fatalf("a growth past a waiting run was granted: %+v", res)
	}
	out := f.must("describe", "cluster", cls)
	if !strings.Contains(out, "Growth Waiting") || !strings.Contains(out, "cpu to 2 workers, in the resource group's queue at priority 6") {
		t.Fatalf("describe does not show the waiting growth:\n%s", out)
	}
}
