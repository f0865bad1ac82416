package dlc_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/job"
)

// awaitingBackend is the memory backend as a store whose creates wait for
// its own cache apart (backend.AwaitingCreator), as the Kubernetes
// store's do, and whose reads past the cache are seen (LatestReader). The
// wait of a run's create returns only once the run's job config has been
// read past the cache after the run was stored: a run create returns at
// all only if its fence's read is made during that wait. before, if set,
// runs inside a run's create, before the run is stored.
type awaitingBackend struct {
	*memory.Backend
	before func()

	mu      sync.Mutex
	reads   int           // job configs read past the cache
	changed chan struct{} // closed and replaced on each
}

func (b *awaitingBackend) GetLatest(ctx context.Context, kind, id string) (backend.Doc, error) {
	d, err := b.Get(ctx, kind, id)
	if kind == "job" {
		b.mu.Lock()
		b.reads++
		close(b.changed)
		b.changed = make(chan struct{})
		b.mu.Unlock()
	}
	return d, err
}

// Create is CreateStored and its wait, as the Kubernetes store's is.
func (b *awaitingBackend) Create(ctx context.Context, d backend.Doc) (string, error) {
	v, await, err := b.CreateStored(ctx, d)
	if err == nil {
		await(ctx)
	}
	return v, err
}

func (b *awaitingBackend) CreateStored(ctx context.Context, d backend.Doc) (string, func(context.Context), error) {
	if d.Kind != "run" {
		v, err := b.Backend.Create(ctx, d)
		return v, func(context.Context) {}, err
	}
	if b.before != nil {
		b.before()
	}
	b.mu.Lock()
	stored := b.reads
	b.mu.Unlock()
	v, err := b.Backend.Create(ctx, d)
	return v, func(ctx context.Context) {
		for {
			b.mu.Lock()
			read, changed := b.reads > stored, b.changed
			b.mu.Unlock()
			if read {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}, err
}

// TestRunCreateFencesWhileTheCacheCatchesUp: where the store waits for its
// cache apart (the Kubernetes store), a run create reads its job config
// for the fence (J17) while the cache catches up with the run, not after:
// the create returns though the cache's wait lasts until that read. The
// fence still holds: a config deleted after the run create read it and
// before the run was stored leaves the run failed, saying so, and the
// create's error not found.
func TestRunCreateFencesWhileTheCacheCatchesUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		deleted bool
	}{{"config live", false}, {"config deleted inside the create", true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := &awaitingBackend{Backend: memory.New(memory.Options{}), changed: make(chan struct{})}
			c, err := dlc.New(dlc.WithBackend(b))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			other, err := dlc.New(dlc.WithBackend(b.Backend))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = other.Close() })
			ctx, cancel := context.WithTimeout(dlc.WithUser(context.Background(), "alice"), 10*time.Second)
			defer cancel()
			if _, err := c.ResourceGroups().Register(ctx, quotaGroup("rg-1", 64)); err != nil {
				t.Fatal(err)
			}
			cfg, err := dlc.NewJob("od").OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
				Head("head", "cu.4c8g").WorkerGroup("w", "cu.4c8g", 1, 1).
				COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").Build()
			if err != nil {
				t.Fatal(err)
			}
			rec, err := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.deleted {
				var once sync.Once
				b.before = func() {
					once.Do(func() {
						if err := other.Jobs().Delete(ctx, rec.ID); err != nil {
							t.Errorf("the delete, which saw no run: %v", err)
						}
					})
				}
			}
			r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
			if ctx.Err() != nil {
				t.Fatal("the run create waited for its cache before its fence's read")
			}
			if !tc.deleted {
				if err != nil || r.State.Terminal() {
					t.Fatalf("run create: %v, %+v", err, r)
				}
				return
			}
			if !errors.Is(err, dlc.ErrNotFound) {
				t.Fatalf("run create of a config deleted inside it: %v, want not found", err)
			}
			runs, err := c.Runs().List(ctx, dlc.RunListOptions{JobID: rec.ID})
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != 1 || runs[0].State != job.Failed || !strings.Contains(runs[0].Message, "deleted while the run was being created") {
				t.Fatalf("runs of the deleted config: %+v, want one failed saying why", runs)
			}
		})
	}
}
