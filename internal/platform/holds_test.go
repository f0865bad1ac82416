package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// holdsEngine is a client without workers over a memory store, on a fake
// clock, with resource group "rg" of capacity; writes of hold documents
// fail while failHolds is set, and the largest account written is kept.
type holdsEngine struct {
	c     *Engine
	b     *memory.Backend
	clock *backend.FakeClock

	mu          sync.Mutex
	failHolds   bool
	failDelete  string // the id of a hold document whose deletes fail
	largest     int
	holdWrites  int
	accountOnes int
}

func newHoldsEngine(t *testing.T, capacity quota.Resources, settleAt int) *holdsEngine {
	t.Helper()
	// A clock in a zone of its own, half an hour off (Go shares one
	// Location per whole-hour offset it parses, not this one): a hold read
	// back is the same instant in another *time.Location, and must still
	// be taken for the same.
	h := &holdsEngine{clock: backend.NewFakeClock(time.Date(2026, 1, 1, 5, 30, 0, 0, time.FixedZone("IST", 5*3600+1800)))}
	h.b = memory.New(memory.Options{Store: memory.StoreHooks{Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		switch w.Doc.Kind {
		case kindHold:
			if h.failHolds || w.Op == memory.OpDelete && w.Doc.ID == h.failDelete {
				return "", errs.Unavailable("hold write", errors.New("injected"))
			}
			h.holdWrites++
		case kindResourceGroup:
			h.accountOnes++
			h.largest = max(h.largest, len(w.Doc.Data))
		}
		return next(ctx)
	}}})
	c, err := New(WithBackend(h.b), WithWorkers(0), WithResync(0), WithClock(h.clock))
	if err != nil {
		t.Fatal(err)
	}
	c.o.settleAt = settleAt
	t.Cleanup(func() { _ = c.Close() })
	h.c = c
	if _, err := c.ResourceGroups().Register(context.Background(), quota.Group{ID: "rg", Package: "pkg", Capacity: capacity}); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *holdsEngine) set(t *testing.T, holder string, r quota.Resources) {
	t.Helper()
	if _, err := h.c.ledger.changeAccount(t.Context(), "rg", func(a *quota.Account) (bool, error) {
		return a.Set(holder, r, h.clock.Now())
	}); err != nil {
		t.Fatalf("set %s to %s: %v", holder, r, err)
	}
}

// reconcile runs a step of the resource group, then one of its settling
// (which writes the documents when enough holds are pending).
func (h *holdsEngine) reconcile(t *testing.T) {
	t.Helper()
	if _, err := (resourceGroupReconciler{h.c}).reconcileResourceGroup(t.Context(), "rg"); err != nil {
		t.Fatal(err)
	}
	if _, err := (settleReconciler{ledger: h.c.ledger, at: h.c.o.settleAt}).Reconcile(t.Context(), "rg"); err != nil {
		t.Fatal(err)
	}
}

// stored reads the account and every hold document from the store.
func (h *holdsEngine) stored(t *testing.T) (*quota.Account, map[string]holdDoc) {
	t.Helper()
	d, err := h.b.Get(t.Context(), kindResourceGroup, "rg")
	if err != nil {
		t.Fatal(err)
	}
	var a quota.Account
	if err := json.Unmarshal(d.Data, &a); err != nil {
		t.Fatal(err)
	}
	docs, err := h.b.List(t.Context(), kindHold, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]holdDoc{}
	settled := quota.HoldMap{}
	for _, d := range docs {
		var hd holdDoc
		if err := json.Unmarshal(d.Data, &hd); err != nil {
			t.Fatal(err)
		}
		out[hd.Holder] = hd
		settled[hd.Holder] = hd.Hold
	}
	a.Bind(settled)
	return &a, out
}

// Holds changed through the account are settled out of it into their
// own documents, and the account stays small: every reservation reads the
// same from the account as stored, the sum is theirs, and a release
// leaves a document of no resources that goes once its holder has and the
// grace has passed.
func TestHoldsSettleOutOfTheAccount(t *testing.T) {
	h := newHoldsEngine(t, quota.Cores(1000), 4)
	const n = 60
	for i := range n {
		h.set(t, fmt.Sprintf("cls-%02d", i), quota.Cores(int64(i%7+1)))
		if i%5 == 4 {
			h.reconcile(t)
		}
	}
	h.reconcile(t)
	a, docs := h.stored(t)
	var want quota.Resources
	for i := range n {
		want = want.Add(quota.Cores(int64(i%7 + 1)))
		if got := a.Held(fmt.Sprintf("cls-%02d", i)); got != quota.Cores(int64(i%7+1)) {
			t.Errorf("cls-%02d holds %s, want %d cores", i, got, i%7+1)
		}
	}
	if a.Reserved() != want || len(a.Holds()) != n {
		t.Errorf("reserved %s of %d holds, want %s of %d", a.Reserved(), len(a.Holds()), want, n)
	}
	if len(a.Pending) >= 4 || len(docs) < n-4 {
		t.Errorf("%d holds pending and %d documents after the reconcile, want fewer than 4 pending", len(a.Pending), len(docs))
	}
	if err := a.Check(); err != nil {
		t.Error(err)
	}
	// The client's own view of it, from its cache, is the same.
	cached, _, err := cached[quota.Account](t.Context(), h.c.acc, kindResourceGroup, "rg")
	if err != nil || fmt.Sprint(cached.Usage()) != fmt.Sprint(a.Usage()) {
		t.Errorf("the cache's account %+v (%v), the store's %+v", cached.Usage(), err, a.Usage())
	}
	if err := h.c.CheckQuota(t.Context()); err != nil {
		t.Errorf("CheckQuota: %v", err)
	}

	for i := range n {
		h.set(t, fmt.Sprintf("cls-%02d", i), quota.Resources{})
	}
	for range 3 {
		h.reconcile(t)
	}
	a, docs = h.stored(t)
	if !a.Reserved().IsZero() || len(a.Holds()) != 0 || len(docs) == 0 {
		t.Fatalf("after every release: reserved %s, holds %v, %d documents (released ones are kept a while)", a.Reserved(), a.Holds(), len(docs))
	}
	// The grace passes for the released holds' documents; their holders
	// are gone (no cluster has their ids): they go, but the one the
	// account settled last, which readers wait for. (The repair sees them
	// once, then again after the grace.)
	repair := func() {
		h.c.ledger.repairAgain("rg")
		h.reconcile(t)
	}
	repair()
	h.clock.Advance(time.Minute)
	repair()
	_, docs = h.stored(t)
	if len(docs) > 1+len(a.Pending) {
		t.Errorf("%d released holds' documents left after the grace, want at most the last settled one", len(docs))
	}
}

// A released hold's document whose delete fails holds up no other: the
// repair deletes the rest in the same pass, and the failed one at the
// next, without waiting a grace again.
func TestTombstoneDeleteFailureHoldsUpNoOther(t *testing.T) {
	h := newHoldsEngine(t, quota.Cores(1000), 4)
	const n = 12
	for i := range n {
		h.set(t, fmt.Sprintf("cls-%02d", i), quota.Cores(1))
	}
	h.reconcile(t)
	for i := range n {
		h.set(t, fmt.Sprintf("cls-%02d", i), quota.Resources{})
	}
	for range 3 {
		h.reconcile(t)
	}
	a, docs := h.stored(t)
	if !a.Reserved().IsZero() || len(docs) < n-len(a.Pending)-1 {
		t.Fatalf("after every release: reserved %s, %d documents, %d pending", a.Reserved(), len(docs), len(a.Pending))
	}
	// Fail the delete of a tombstone the repair will want to delete (not
	// the one the account settled last, which it keeps).
	var failing string
	stored := a // the account as stored: its last settled version and its pending holds
	for holder := range docs {
		id := holdID("rg", holder)
		if hd, err := h.b.Get(t.Context(), kindHold, id); err == nil && hd.Version != stored.Settled {
			if _, pending := stored.Pending[holder]; !pending {
				failing = id
				break
			}
		}
	}
	if failing == "" {
		t.Fatal("no tombstone to fail")
	}
	h.mu.Lock()
	h.failDelete = failing
	h.mu.Unlock()
	repair := func() error {
		h.c.ledger.repairAgain("rg")
		_, err := (resourceGroupReconciler{h.c}).reconcileResourceGroup(t.Context(), "rg")
		return err
	}
	if err := repair(); err != nil { // sees them
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute) // past the grace
	if err := repair(); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("the repair with a failing delete: %v, want the failure", err)
	}
	left, err := h.b.List(t.Context(), kindHold, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range left {
		if d.ID != failing && d.Version != stored.Settled {
			if _, pending := stored.Pending[d.ID[len("rg."):]]; !pending {
				t.Errorf("tombstone %s left beside the failing one", d.ID)
			}
		}
	}
	h.mu.Lock()
	h.failDelete = ""
	h.mu.Unlock()
	if err := repair(); err != nil { // no grace again: it was seen
		t.Fatal(err)
	}
	if _, err := h.b.Get(t.Context(), kindHold, failing); !errs.IsNotFound(err) {
		t.Errorf("the tombstone whose delete failed is still there at the next repair: %v", err)
	}
}

// A hold's document never goes back to an older change of it, whoever
// writes it late.
func TestHoldDocumentNeverGoesBack(t *testing.T) {
	h := newHoldsEngine(t, quota.Cores(8), 32)
	ctx := t.Context()
	newer := quota.Hold{Resources: quota.Cores(4), Seq: 5}
	v, err := h.c.ledger.putHold(ctx, "rg", "cls-a", newer)
	if err != nil || v == "" {
		t.Fatalf("writing change 5: %q, %v", v, err)
	}
	if again, err := h.c.ledger.putHold(ctx, "rg", "cls-a", newer); err != nil || again != v {
		t.Errorf("writing change 5 again: %q, %v; want %q, nothing written", again, err, v)
	}
	if late, err := h.c.ledger.putHold(ctx, "rg", "cls-a", quota.Hold{Resources: quota.Cores(2), Seq: 3}); err != nil || late != "" {
		t.Errorf("writing change 3 after 5: %q, %v; want nothing written", late, err)
	}
	_, docs := h.stored(t)
	if got := docs["cls-a"]; got.Seq != 5 || got.Resources != quota.Cores(4) {
		t.Errorf("the document holds %+v, want change 5", got)
	}
	// Not even a change no account has reached: the writer's account may
	// be older than the one that wrote it (TestStress found a release
	// of an older change written back over a newer hold that way).
	if late, err := h.c.ledger.putHold(ctx, "rg", "cls-a", quota.Hold{Seq: 4}); err != nil || late != "" {
		t.Errorf("writing change 4 after 5: %q, %v; want nothing written", late, err)
	}
}

// A client waits for its cache to have the settled holds of the account
// it reads before it decides on them, and says the store is unavailable
// if its context ends first.
func TestAwaitHoldsWaitsForTheSettledDocument(t *testing.T) {
	h := newHoldsEngine(t, quota.Cores(8), 32)
	v, err := h.c.ledger.putHold(t.Context(), "rg", "cls-a", quota.Hold{Resources: quota.Cores(1), Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := &quota.Account{Group: quota.Group{ID: "rg"}, Settled: v}
	if err := h.c.ledger.awaitHolds(t.Context(), a); err != nil {
		t.Fatalf("the cache has it: %v", err)
	}
	var n uint64
	fmt.Sscan(v, &n)
	a.Settled = fmt.Sprint(n + 2)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := h.c.ledger.awaitHolds(ctx, a); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("waiting for a document not written: %v, want ErrUnavailable", err)
	}
	done := make(chan error, 1)
	go func() { done <- h.c.ledger.awaitHolds(t.Context(), a) }()
	for i := range 2 {
		if _, err := h.c.ledger.putHold(t.Context(), "rg", fmt.Sprintf("cls-%d", i+2), quota.Hold{Resources: quota.Cores(1), Seq: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("after the document came: %v", err)
	}
	// A document someone deleted before this cache saw it never comes:
	// the read waits holdsWait once, then reads what there is, and the
	// next read does not wait.
	h.c.o.holdsWait = 20 * time.Millisecond
	a.Settled = fmt.Sprint(n + 1000)
	if err := h.c.ledger.awaitHolds(t.Context(), a); err != nil {
		t.Fatalf("a settled document that never comes: %v", err)
	}
	if ok, _ := h.c.ledger.holdVersions.reached(a.Settled); !ok {
		t.Error("waited for once, the version is still waited for")
	}
}

// With no reconciler to settle them, a client that changes an account
// writes the documents itself once half the bound is pending: the account
// never grows past it, whatever the holders; and a change that fails to
// write its document is settled later, never lost.
func TestPendingHoldsBounded(t *testing.T) {
	h := newHoldsEngine(t, quota.Resources{MilliCPU: 1 << 40}, 1<<30)
	const n = 3000
	for i := range n {
		h.set(t, fmt.Sprintf("cls-%05d", i), quota.Resources{MilliCPU: 1000})
	}
	a, docs := h.stored(t)
	if len(a.Pending) >= quota.MaxPending || len(docs) < n-quota.MaxPending {
		t.Errorf("%d pending, %d documents after %d changes", len(a.Pending), len(docs), n)
	}
	if a.Reserved().MilliCPU != 1000*n || len(a.Holds()) != n {
		t.Errorf("reserved %s of %d holds, want %d", a.Reserved(), len(a.Holds()), n)
	}
	h.mu.Lock()
	largest := h.largest
	h.mu.Unlock()
	if largest > 256<<10 {
		t.Errorf("the account was written at %d bytes, over 256 KiB", largest)
	}
	t.Logf("%d holders: the account at most %d bytes, now %d pending", n, largest, len(a.Pending))

	// The documents cannot be written for a while: the changes are made
	// all the same, and settled once they can.
	h.c.o.settleAt = 1
	h.mu.Lock()
	h.failHolds = true
	h.mu.Unlock()
	h.set(t, "cls-late", quota.Cores(3))
	if _, err := (settleReconciler{ledger: h.c.ledger, at: h.c.o.settleAt}).Reconcile(t.Context(), "rg"); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("a settling step that cannot write the documents: %v, want it to fail (and be retried)", err)
	}
	h.mu.Lock()
	h.failHolds = false
	h.mu.Unlock()
	// A settling step writes maxMaterialise documents at most, the oldest
	// first; the group's next step drops them from the account.
	for range (quota.MaxPending+maxMaterialise-1)/maxMaterialise + 1 {
		h.reconcile(t)
	}
	a, docs = h.stored(t)
	if len(a.Pending) != 0 || docs["cls-late"].Resources != quota.Cores(3) || a.Held("cls-late") != quota.Cores(3) {
		t.Errorf("after the documents could be written: %d pending, document %+v", len(a.Pending), docs["cls-late"])
	}
	if err := a.Check(); err != nil {
		t.Error(err)
	}
}

// A pending hold whose document a client finds written (by another, or
// by its own step whose account write was lost) is settled from the
// cache, whatever the zone its date was written in.
func TestSettleFromTheCache(t *testing.T) {
	h := newHoldsEngine(t, quota.Cores(8), 32)
	h.set(t, "cls-a", quota.Cores(2))
	a, _, err := cached[quota.Account](t.Context(), h.c.acc, kindResourceGroup, "rg")
	if err != nil {
		t.Fatal(err)
	}
	// The account keeps its pending holds' dates in UTC (quota.Hold.Encode);
	// the document is written with its date in another zone.
	p := a.Pending["cls-a"]
	p.Since = p.Since.In(time.FixedZone("CST", 8*3600))
	v, err := h.c.ledger.putHold(t.Context(), "rg", "cls-a", p)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := h.c.ledger.settle(t.Context(), a, false); err != nil || !changed || len(a.Pending) != 0 || a.Settled != v {
		t.Fatalf("settling from the cache: changed %v, %v, pending %+v, settled %q (document %q)", changed, err, a.Pending, a.Settled, v)
	}
}
