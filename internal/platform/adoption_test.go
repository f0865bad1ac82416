package platform

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/quota"
)

// A member struck at two periodic resyncs in a row (not two apart) is
// left out for stallRounds rounds, then counted again; left out a second
// time, for twice as long; its document deleted, it is forgotten. The
// adoption remembers the versions of the keys the resync walks only, and
// forgets a deleted one at once.
func TestAdoptionLeavesOutAndLetsBack(t *testing.T) {
	clk := backend.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	mb := memory.New(memory.Options{Clock: clk})
	reg := prometheus.NewRegistry()
	c, err := New(WithBackend(mb), WithClock(clk), WithWorkers(0), WithWorkSharing(time.Hour), WithResync(time.Minute), WithMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	const x = "replica-x"
	if _, err := mb.Create(ctx, backend.Doc{Kind: kindReplica, ID: x, Data: []byte(`{"id":"replica-x"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := mb.Create(ctx, backend.Doc{Kind: kindCluster, ID: "c1", Data: []byte(`{"id":"c1"}`)}); err != nil {
		t.Fatal(err)
	}
	strike := func() { c.share.adoptedStep(x, &stepWrites{key: "cluster/c1", wrote: true}) }
	round := func() { clk.Advance(time.Minute); c.Reconcile() }
	out := func() bool { return slices.Contains(c.share.rep.view.Load().out, x) }
	reported := func() float64 { return testutil.ToFloat64(c.metrics.stalled.WithLabelValues(x)) }

	strike()
	round()
	round()
	strike()
	if out() {
		t.Fatal("left out for strikes two rounds apart")
	}
	round()
	strike()
	if !out() || reported() != 1 {
		t.Fatalf("struck at two rounds in a row: left out %v, reported %v times", out(), reported())
	}
	if _, mine := c.share.owner("cluster/c1"); !mine {
		t.Fatal("a key of the member left out is not this client's")
	}
	for i := 1; i < stallRounds; i++ {
		round()
		if !out() {
			t.Fatalf("counted again after %d rounds, want %d", i, stallRounds)
		}
	}
	round()
	if out() {
		t.Fatalf("still left out after %d rounds", stallRounds)
	}
	strike()
	round()
	strike()
	if !out() || reported() != 2 {
		t.Fatalf("struck again: left out %v, reported %v times", out(), reported())
	}
	for i := 1; i < 2*stallRounds; i++ {
		round()
		if !out() {
			t.Fatalf("left out a second time: counted again after %d rounds, want %d", i, 2*stallRounds)
		}
	}
	if err := mb.Delete(ctx, kindReplica, x, ""); err != nil {
		t.Fatal(err)
	}
	c.share.rep.mu.Lock()
	_, kept := c.share.rep.excluded[x]
	_, known := c.share.rep.versions["cluster/c1"]
	n := len(c.share.rep.versions)
	c.share.rep.mu.Unlock()
	if out() || kept {
		t.Fatalf("a deleted member still left out (%v) or remembered (%v)", out(), kept)
	}
	if !known || n != 1 {
		t.Fatalf("the adoption remembers %d versions (cluster/c1: %v), want that one", n, known)
	}
	if err := mb.Delete(ctx, kindCluster, "c1", ""); err != nil {
		t.Fatal(err)
	}
	c.share.rep.mu.Lock()
	n = len(c.share.rep.versions)
	c.share.rep.mu.Unlock()
	if n != 0 {
		t.Fatalf("a deleted key's version is still remembered (%d)", n)
	}
}

// A batch of account changes written in one compare-and-swap tells each
// adopted step whose change it wrote, and no other: the step of a change
// that changed nothing, first in the batch (whose context the batch's
// calls run in), is not told of the write.
func TestAdoptionBatchedAccountWrites(t *testing.T) {
	c, err := New(WithBackend(memory.New(memory.Options{})), WithWorkers(0), WithResync(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 8000}}); err != nil {
		t.Fatal(err)
	}
	idle, moved := &stepWrites{key: "cluster/a"}, &stepWrites{key: "cluster/b"}
	op := func(w *stepWrites, change bool) *accountOp {
		return &accountOp{ctx: context.WithValue(ctx, stepWritesKey{}, w), done: make(chan struct{}),
			f: func(a *quota.Account) (bool, error) {
				if !change {
					return false, nil
				}
				_, err := a.Set("b", quota.Resources{MilliCPU: 1000}, time.Now())
				return true, err
			}}
	}
	batch := []*accountOp{op(idle, false), op(moved, true)}
	c.ledger.writeAccount("rg-1", &accountLine{}, batch)
	for _, o := range batch {
		if o.err != nil {
			t.Fatal(o.err)
		}
	}
	if idle.wrote || !moved.wrote || moved.own {
		t.Fatalf("the unchanged step told of a write: %v; the changed one: %v (own key: %v)", idle.wrote, moved.wrote, moved.own)
	}
}
