package e2e_test

import (
	"testing"
	"time"

	"github.com/aidlc/dlc/dlctest/kubetest"
)

// settle waits, polling, until done holds, for at most two minutes.
func settle(b *testing.B, done func(*testing.B) bool) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !done(b) {
		if time.Now().After(deadline) {
			b.Fatal("the control plane did not settle in 2 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cost is the CPU a sub-benchmark's operations took, from startCost to
// report.
type cost struct {
	b     *testing.B
	on    bool
	start kubetest.CPU
}

// startCost begins counting CPU, if on and the machine tells (Linux).
func startCost(b *testing.B, on bool) cost {
	c := cost{b: b, on: on}
	if on {
		c.start = kubetest.CPUNow()
	}
	return c
}

// report reports the CPU since startCost per operation: cpu-ms/op of this
// process and server-cpu-ms/op of the API server and etcd.
func (c cost) report() {
	if !c.on {
		return
	}
	used := kubetest.CPUNow().Sub(c.start)
	if !used.Known() {
		return // not told: no /proc
	}
	n := float64(c.b.N)
	c.b.ReportMetric(float64(used.Self)/float64(time.Millisecond)/n, "cpu-ms/op")
	c.b.ReportMetric(float64(used.APIServer+used.Etcd)/float64(time.Millisecond)/n, "server-cpu-ms/op")
}
