package platform

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc/backend"
)

// joinedNext is how many callers wait for the read after the one in flight.
func (l *latestReads) joinedNext(kind, id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.slots[docKey{kind, id}]; s != nil && s.next != nil {
		return s.next.joined
	}
	return 0
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLatestReadsSeeEarlierWrites: whatever the interleaving, a caller gets
// a read that began after it asked (a write it finished before asking is
// seen), and concurrent callers share reads.
func TestLatestReadsSeeEarlierWrites(t *testing.T) {
	var (
		l     latestReads
		clock atomic.Int64 // orders asks and the reads' beginnings
		reads atomic.Int64
	)
	read := func(context.Context) (backend.Doc, error) {
		began := clock.Add(1)
		reads.Add(1)
		time.Sleep(200 * time.Microsecond) // a read takes a while: others arrive meanwhile
		return backend.Doc{Kind: "job", ID: "j", Version: strconv.FormatInt(began, 10),
			Labels: map[string]string{"k": "v"}}, nil
	}
	const callers = 400
	var wg sync.WaitGroup
	errc := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			asked := clock.Add(1)
			d, err := l.get(t.Context(), "job", "j", time.Minute, read)
			if err != nil {
				errc <- err
				return
			}
			d.Labels["k"] = "changed by a caller" // a caller's copy is its own
			if began, _ := strconv.ParseInt(d.Version, 10, 64); began <= asked {
				errc <- errors.New("a read that began at " + d.Version + " answered a caller that asked at " + strconv.FormatInt(asked, 10))
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if n := reads.Load(); n >= callers {
		t.Errorf("%d reads for %d concurrent callers: none shared", n, callers)
	}
	t.Logf("%d reads for %d concurrent callers", reads.Load(), callers)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.slots) != 0 {
		t.Errorf("%d documents left with a read in flight", len(l.slots))
	}
}

// TestLatestReadsShareTheNextRead: callers that come while a read is in
// flight share one read after it, which runs even if the caller whose
// context it started on gives up; the in-flight read's caller alone sees
// its own failure.
func TestLatestReadsShareTheNextRead(t *testing.T) {
	var (
		l       latestReads
		reads   atomic.Int64
		release = make(chan struct{})
	)
	read := func(ctx context.Context) (backend.Doc, error) {
		n := reads.Add(1)
		if n == 1 {
			select { // the first read: in flight until released, or its caller gives up
			case <-release:
			case <-ctx.Done():
				return backend.Doc{}, context.Cause(ctx)
			}
		}
		return backend.Doc{Version: strconv.FormatInt(n, 10)}, nil
	}
	leaderCtx, cancelLeader := context.WithCancel(t.Context())
	leader := make(chan error, 1)
	go func() {
		_, err := l.get(leaderCtx, "job", "j", time.Minute, read)
		leader <- err
	}()
	waitUntil(t, "the first read in flight", func() bool { return reads.Load() == 1 })

	const joiners = 50
	quitterCtx, quit := context.WithCancel(t.Context()) // the first joiner: the next read starts on its context
	quitter := make(chan error, 1)
	go func() {
		_, err := l.get(quitterCtx, "job", "j", time.Minute, read)
		quitter <- err
	}()
	waitUntil(t, "the first joiner", func() bool { return l.joinedNext("job", "j") == 1 })
	got := make(chan backend.Doc, joiners)
	errc := make(chan error, joiners)
	for range joiners - 1 {
		go func() {
			d, err := l.get(t.Context(), "job", "j", time.Minute, read)
			if err != nil {
				errc <- err
				return
			}
			got <- d
		}()
	}
	waitUntil(t, "every joiner", func() bool { return l.joinedNext("job", "j") == joiners })
	quit()
	if err := <-quitter; !errors.Is(err, context.Canceled) {
		t.Fatalf("a joiner that gave up: %v, want context.Canceled", err)
	}
	cancelLeader() // the read in flight fails for its caller only
	if err := <-leader; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller of the read in flight: %v, want context.Canceled", err)
	}
	for range joiners - 1 {
		select {
		case err := <-errc:
			t.Fatalf("a joiner: %v", err)
		case d := <-got:
			if d.Version != "2" {
				t.Fatalf("a joiner got read %s, want the second", d.Version)
			}
		}
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2", n)
	}
	close(release)
}
