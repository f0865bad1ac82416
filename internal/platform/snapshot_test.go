package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/quota"
)

// lateSnapshot is a backend whose watch tells of changes made after its
// snapshot before the client has applied that snapshot: as an informer's
// goroutine does when another replica writes while a client starts. Its
// Watch takes the snapshot, then makes each of changes through the
// store (each change is told to the watch there and then), then returns
// the snapshot, older than those changes.
type lateSnapshot struct {
	backend.Backend
	changes func(ctx context.Context, s backend.Store) error
}

func (l lateSnapshot) Watch(ctx context.Context, h func(backend.Change)) ([]backend.Doc, error) {
	snap, err := l.Backend.Watch(ctx, h)
	if err != nil {
		return nil, err
	}
	return snap, l.changes(ctx, l.Backend)
}

// A change the watch tells of before the client has applied the store's
// snapshot is newer than the snapshot's copy: the cache ends with it,
// whatever the order (it once ended with the snapshot's copy, for good,
// and a new replica read a hibernated cluster's settled reservation as
// still held: TestSettledReservationsOnAPIServer).
func TestChangesBeforeTheSnapshotIsApplied(t *testing.T) {
	ctx := context.Background()
	mb := memory.New(memory.Options{})
	hold := func(seq int64, cpu int64) []byte {
		data, err := json.Marshal(holdDoc{ResourceGroup: "rg", Holder: "cls-1", Hold: quota.Hold{Resources: quota.Resources{MilliCPU: cpu}, Seq: seq}})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	labels := map[string]string{labelResourceGroup: "rg"}
	held, err := mb.Create(ctx, backend.Doc{Kind: kindHold, ID: holdID("rg", "cls-1"), Labels: labels, Data: hold(1, 8000)})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := mb.Create(ctx, backend.Doc{Kind: kindHold, ID: holdID("rg", "cls-2"), Labels: labels, Data: hold(1, 4000)})
	if err != nil {
		t.Fatal(err)
	}
	var released string
	b := lateSnapshot{Backend: mb, changes: func(ctx context.Context, s backend.Store) error {
		// Two changes of one document, in order: the last one is what the
		// cache ends with.
		grown, err := s.Update(ctx, backend.Doc{Kind: kindHold, ID: holdID("rg", "cls-1"), Version: held, Labels: labels, Data: hold(2, 16000)})
		if err != nil {
			return err
		}
		released, err = s.Update(ctx, backend.Doc{Kind: kindHold, ID: holdID("rg", "cls-1"), Version: grown, Labels: labels, Data: hold(3, 0)})
		if err != nil {
			return err
		}
		return s.Delete(ctx, kindHold, holdID("rg", "cls-2"), gone)
	}}
	c, err := New(WithBackend(b), WithWorkers(0), WithResync(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	d, ok := c.cache.Get(kindHold, holdID("rg", "cls-1"))
	if !ok || d.Version != released {
		t.Errorf("the cache has cls-1's hold at version %q (present %v), want the release's %q", d.Version, ok, released)
	}
	if h := (holdSource{acc: c.acc, rg: "rg"}).All(); len(h) != 1 || !h["cls-1"].Resources.IsZero() {
		t.Errorf("the settled holds read %v, want cls-1's released and cls-2's gone", fmt.Sprint(h))
	}
	if _, ok := c.cache.Get(kindHold, holdID("rg", "cls-2")); ok {
		t.Error("the cache has cls-2's hold, deleted after the snapshot")
	}
}

// The same for the members sharing the work: one that left while the
// client started is not counted, and one that renewed its membership
// meanwhile still counts as there before the client (not a newcomer on
// probation, whose share both would take).
func TestMembersChangedBeforeTheSnapshotIsApplied(t *testing.T) {
	ctx := context.Background()
	mb := memory.New(memory.Options{})
	member := func(id string, beat uint64) backend.Doc {
		data, err := json.Marshal(replicaDoc{ID: id, Beat: beat, TTL: "1h"})
		if err != nil {
			t.Fatal(err)
		}
		return backend.Doc{Kind: kindReplica, ID: id, Data: data}
	}
	leaving, err := mb.Create(ctx, member("replica-leaving", 1))
	if err != nil {
		t.Fatal(err)
	}
	renewing, err := mb.Create(ctx, member("replica-renewing", 1))
	if err != nil {
		t.Fatal(err)
	}
	b := lateSnapshot{Backend: mb, changes: func(ctx context.Context, s backend.Store) error {
		if err := s.Delete(ctx, kindReplica, "replica-leaving", leaving); err != nil {
			return err
		}
		d := member("replica-renewing", 2)
		d.Version = renewing
		_, err := s.Update(ctx, d)
		return err
	}}
	// A periodic resync, so that a newcomer waits its probation.
	c, err := New(WithBackend(b), WithWorkers(0), WithWorkSharing(time.Hour), WithResync(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	live := c.share.rep.view.Load().live
	if !slices.Contains(live, "replica-renewing") || slices.Contains(live, "replica-leaving") || len(live) != 2 {
		t.Errorf("live members %v, want this client and replica-renewing", live)
	}
}
