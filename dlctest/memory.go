package dlctest

import (
	"context"
	"slices"
	"sync"
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
// Ray does. Its clients run no reconciler goroutines: Settle runs their
// steps in the test's goroutine, so every run of a test takes the same
// steps in the same order.
type Memory struct {
	Client  *dlc.Client
	Clock   *backend.FakeClock
	Backend *memory.Backend

	opts MemoryOptions

	// step serialises what moves the fixture (Reconcile, Step, Settle),
	// so that Drive's goroutine and the test's take turns; mu guards
	// clients, which NewClient and CloseClient change meanwhile.
	step    sync.Mutex
	mu      sync.Mutex
	clients []*dlc.Client
	drivers []func() // Drive's stops, which Close calls
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
	// T, when set (a *testing.T, *testing.B or *testing.F), closes the
	// fixture's clients when the test ends, as if Close were deferred.
	T Cleaner
}

// Cleaner is what MemoryOptions.T needs of a test: testing.TB's Cleanup.
type Cleaner interface{ Cleanup(func()) }

// NewMemory returns a Memory fixture. It needs no test: nothing is
// started that must be stopped but its clients' watches, which Close
// stops (or the test's end, with MemoryOptions.T).
func NewMemory(o MemoryOptions) *Memory {
	clk := backend.NewFakeClock(Epoch)
	be := memory.New(memory.Options{Clock: clk, Delays: o.Delays, Ray: o.Ray, Store: o.Store})
	m := &Memory{Clock: clk, Backend: be, opts: o}
	m.Client = m.NewClient()
	if o.T != nil {
		o.T.Cleanup(m.Close)
	}
	return m
}

// NewClient starts another client on the fixture's backend, as another
// replica of a service, or a restarted process, would be. Settle runs its
// steps too. It panics when dlc.New refuses the options (a value out of
// its range, in MemoryOptions or more): a fixture's set-up is the test's
// own code.
func (m *Memory) NewClient(more ...dlc.Option) *dlc.Client {
	seed := m.opts.Seed
	if seed == 0 {
		seed = 1
	}
	m.mu.Lock()
	n := len(m.clients)
	m.mu.Unlock()
	opts := append([]dlc.Option{dlc.WithBackend(m.Backend), dlc.WithClock(m.Clock), dlc.WithWorkers(0), dlc.WithResync(0),
		dlc.WithPolicy(scheduler.NewRandom(seed + int64(n))), dlc.WithMaxWait(m.opts.MaxWait)}, m.opts.Options...)
	c, err := dlc.New(append(opts, more...)...)
	if err != nil {
		panic("dlctest: the memory client's options are refused: " + err.Error())
	}
	m.mu.Lock()
	m.clients = append(m.clients, c)
	m.mu.Unlock()
	return c
}

// NewSkewedClient is NewClient for a client whose clock reads skew ahead
// of the fixture's (behind, when skew is negative), as a replica on a
// machine whose clock is off does. Its timers fire as the fixture's clock
// advances; what it stamps (a reservation's date, an event's time) reads
// skew off to every other client.
func (m *Memory) NewSkewedClient(skew time.Duration, more ...dlc.Option) *dlc.Client {
	return m.NewClient(append([]dlc.Option{dlc.WithClock(skewedClock{m.Clock, skew})}, more...)...)
}

// skewedClock reads its base clock's time off by skew.
type skewedClock struct {
	base *backend.FakeClock
	skew time.Duration
}

func (c skewedClock) Now() time.Time { return c.base.Now().Add(c.skew) }

func (c skewedClock) AfterFunc(d time.Duration, f func()) func() bool {
	return c.base.AfterFunc(d, f)
}

// CloseClient closes c and stops settling it, as a process that stops.
func (m *Memory) CloseClient(c *dlc.Client) {
	_ = c.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, x := range m.clients {
		if x == c {
			m.clients = append(m.clients[:i], m.clients[i+1:]...)
			break
		}
	}
}

// Close closes every client of the fixture.
// Drivers are stopped first, and a step in progress ends before the
// clients close.
func (m *Memory) Close() {
	m.mu.Lock()
	drivers := m.drivers
	m.drivers = nil
	m.mu.Unlock()
	for _, stop := range drivers {
		stop()
	}
	m.step.Lock()
	defer m.step.Unlock()
	m.mu.Lock()
	clients := m.clients
	m.clients = nil
	m.mu.Unlock()
	for _, c := range clients {
		_ = c.Close()
	}
}

// Reconcile runs every client's queued reconcile steps until none is
// left, and returns how many ran.
func (m *Memory) Reconcile() int {
	m.step.Lock()
	defer m.step.Unlock()
	return m.reconcile()
}

// reconcile is Reconcile with m.step held.
func (m *Memory) reconcile() int {
	total := 0
	for {
		n := 0
		m.mu.Lock()
		clients := slices.Clone(m.clients)
		m.mu.Unlock()
		for _, c := range clients {
			n += c.Reconcile()
		}
		if n == 0 {
			return total
		}
		total += n
	}
}

// Step advances the fake clock by exactly d and runs what comes due on
// the way, in order: the clients' queued steps first, then, timer by
// timer, the clock moved to the next one due within d and the steps it
// queued; it returns the steps run. Unlike Settle it never goes past d:
// an hour-long run is still running after Step(time.Minute). Timers that
// keep coming due at the same instant stop it after maxStepTimers.
func (m *Memory) Step(d time.Duration) int {
	m.step.Lock()
	defer m.step.Unlock()
	target := m.Clock.Now().Add(d)
	n := m.reconcile()
	for range maxStepTimers {
		next, ok := m.Clock.Next()
		now := m.Clock.Now()
		if !ok || next.After(target) {
			if target.After(now) {
				m.Clock.Advance(target.Sub(now))
			}
			return n + m.reconcile()
		}
		if next.After(now) {
			m.Clock.Advance(next.Sub(now))
		} else {
			m.Clock.Advance(0) // due already: fire it
		}
		n += m.reconcile()
	}
	return n
}

// maxStepTimers bounds the timers one Step fires.
const maxStepTimers = 100_000

// Settle runs the clients' steps and advances the fake clock in steps of
// d until nothing is left to happen within max steps (nothing is due
// before max×d from the call), or max steps have passed; it returns the
// steps taken. What is due later than that, such as a finished run's
// deletion at the end of its retention (days away), does not keep it
// going: Advance the clock to reach it.
func (m *Memory) Settle(d time.Duration, max int) int {
	m.step.Lock()
	defer m.step.Unlock()
	until := m.Clock.Now().Add(time.Duration(max) * d)
	for i := 0; i < max; i++ {
		m.reconcile()
		if next, ok := m.Clock.Next(); !ok || next.After(until) {
			return i
		}
		m.Clock.Advance(d)
	}
	m.reconcile()
	return max
}

// Drive moves the fixture from a goroutine of its own until ctx ends:
// every real interval every, it runs the queued steps and advances the
// fake clock by d (Step). It is for code under test that blocks on the
// platform, as a handler that calls Wait or Follow does, while the test's
// goroutine is in that call. The test's own Step, Settle and Reconcile
// take turns with it. It returns at once; the returned function stops it
// and waits until it has, as Close does (and the test's end, with
// MemoryOptions.T). every must be above 0.
func (m *Memory) Drive(ctx context.Context, d, every time.Duration) (stop func()) {
	if every <= 0 {
		panic("dlctest: Drive needs a real interval above 0")
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				m.Step(d)
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	m.mu.Lock()
	m.drivers = append(m.drivers, stop)
	m.mu.Unlock()
	return stop
}
