package dlctest

import (
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/scheduler"
)

// Epoch is the time a Memory fixture's fake clock starts at.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Memory is a ready client on the memory backend, with a fake clock and a
// seeded random policy, so that a test decides when time passes and what
// Ray does.
type Memory struct {
	Client  *dlc.Client
	Clock   *backend.FakeClock
	Backend *memory.Backend
}

// MemoryOptions configure NewMemory. The zero value gives the memory
// backend's default delays, no hooks, and seed 1.
type MemoryOptions struct {
	Delays  *memory.Delays
	Ray     memory.RayHooks
	Store   memory.StoreHooks
	Seed    int64
	MaxWait time.Duration
	Options []dlc.Option // more client options
}

// NewMemory returns a Memory fixture. It needs no TestingT: nothing is
// started that must be stopped.
func NewMemory(o MemoryOptions) *Memory {
	clk := backend.NewFakeClock(Epoch)
	be := memory.New(memory.Options{Clock: clk, Delays: o.Delays, Ray: o.Ray, Store: o.Store})
	seed := o.Seed
	if seed == 0 {
		seed = 1
	}
	opts := append([]dlc.Option{dlc.WithBackend(be), dlc.WithClock(clk),
		dlc.WithPolicy(scheduler.NewRandom(seed)), dlc.WithMaxWait(o.MaxWait)}, o.Options...)
	return &Memory{Client: dlc.New(opts...), Clock: clk, Backend: be}
}

// Settle advances the fake clock in steps of d until nothing is left to
// happen, or max steps have passed; it returns the steps taken.
func (m *Memory) Settle(d time.Duration, max int) int {
	for i := 0; i < max; i++ {
		if m.Clock.Pending() == 0 {
			return i
		}
		m.Clock.Advance(d)
	}
	return max
}
