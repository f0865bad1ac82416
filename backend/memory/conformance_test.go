package memory_test

import (
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest"
)

// The memory backend passes the conformance suite that every backend runs.
func TestConformance(t *testing.T) {
	d := memory.Delays{Create: time.Millisecond, Start: 3 * time.Millisecond, Hibernate: 2 * time.Millisecond,
		Delete: 2 * time.Millisecond, Submit: time.Millisecond, Run: 5 * time.Millisecond}
	dlctest.RunConformance(t, dlctest.Harness{
		NewBackend: func(t *testing.T) dlc.Backend { return memory.New(memory.Options{Delays: &d}) },
		// Well above the time between a start's reservation and the
		// cluster write that justifies it, which under -race on a loaded
		// machine (load 10 on 2 cores) passed 300 ms: the repair then
		// released a starting cluster's hold.
		RepairGrace: 2 * time.Second,
	})
}
