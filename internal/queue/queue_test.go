package queue

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func cpu(n int64) quota.Resources { return quota.Cores(n) }

func ids(items []Item) string {
	s := make([]string, len(items))
	for i, it := range items {
		s[i] = it.RunID
	}
	return strings.Join(s, ",")
}

func mustPush(t testing.TB, q *Queue, items ...Item) {
	t.Helper()
	for _, it := range items {
		if err := q.Push(it); err != nil {
			t.Fatalf("Push(%s): %v", it.RunID, err)
		}
	}
}

func TestQueueOrder(t *testing.T) {
	tests := []struct {
		name  string
		items []Item
		want  string
	}{
		{"empty", nil, ""},
		{"priority first", []Item{
			{RunID: "low", Priority: 1, Seq: 1},
			{RunID: "high", Priority: 9, Seq: 2},
			{RunID: "mid", Priority: 5, Seq: 3},
		}, "high,mid,low"},
		{"FIFO within a priority", []Item{
			{RunID: "b", Priority: 5, Seq: 2},
			{RunID: "c", Priority: 5, Seq: 3},
			{RunID: "a", Priority: 5, Seq: 1},
		}, "a,b,c"},
		{"mixed", []Item{
			{RunID: "p5s4", Priority: 5, Seq: 4},
			{RunID: "p7s9", Priority: 7, Seq: 9},
			{RunID: "p5s1", Priority: 5, Seq: 1},
			{RunID: "p7s2", Priority: 7, Seq: 2},
			{RunID: "p1s0", Priority: 1, Seq: 0},
		}, "p7s2,p7s9,p5s1,p5s4,p1s0"},
		{"equal Seq broken by RunID", []Item{
			{RunID: "y", Priority: 5, Seq: 1},
			{RunID: "x", Priority: 5, Seq: 1},
		}, "x,y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewQueue(QueueOptions{})
			mustPush(t, q, tt.items...)
			if got := ids(q.Items()); got != tt.want {
				t.Errorf("Items = %s, want %s", got, tt.want)
			}
			for i, id := range strings.Split(tt.want, ",") {
				if id == "" {
					continue
				}
				if p, ok := q.Position(id); !ok || p != i {
					t.Errorf("Position(%s) = %d,%v, want %d,true", id, p, ok, i)
				}
			}
			// With room for everything, Admit returns the same order.
			if got := ids(q.Admit(t0, cpu(1000))); got != tt.want {
				t.Errorf("Admit = %s, want %s", got, tt.want)
			}
			if q.Len() != 0 {
				t.Errorf("Len after admitting all = %d", q.Len())
			}
		})
	}
}

func TestQueueAdmit(t *testing.T) {
	minute := time.Minute
	tests := []struct {
		name    string
		maxWait time.Duration
		items   []Item
		now     time.Time
		free    quota.Resources
		want    string // admitted, in order
		left    string // still queued, in order
	}{
		{
			name: "nothing fits",
			items: []Item{
				{RunID: "a", Priority: 5, Seq: 1, Demand: cpu(8)},
			},
			free: cpu(4), want: "", left: "a",
		},
		{
			name: "admits in order while it fits",
			items: []Item{
				{RunID: "a", Priority: 5, Seq: 1, Demand: cpu(2)},
				{RunID: "b", Priority: 5, Seq: 2, Demand: cpu(2)},
				{RunID: "c", Priority: 5, Seq: 3, Demand: cpu(2)},
			},
			free: cpu(5), want: "a,b", left: "c",
		},
		{
			name: "BestEffortFIFO: big head skipped, smaller ones behind admitted",
			items: []Item{
				{RunID: "big", Priority: 9, Seq: 1, Demand: cpu(16)},
				{RunID: "s1", Priority: 5, Seq: 2, Demand: cpu(2)},
				{RunID: "huge", Priority: 5, Seq: 3, Demand: cpu(8)},
				{RunID: "s2", Priority: 1, Seq: 4, Demand: cpu(2)},
				{RunID: "s3", Priority: 1, Seq: 5, Demand: cpu(2)},
			},
			free: cpu(6), want: "s1,s2,s3", left: "big,huge",
		},
		{
			name: "every component must fit",
			items: []Item{
				{RunID: "gpu", Priority: 5, Seq: 1, Demand: quota.Resources{MilliCPU: 1000, GPU: 1}},
				{RunID: "mem", Priority: 5, Seq: 2, Demand: quota.Resources{MilliCPU: 1000, Memory: 64 * quota.GiB}},
				{RunID: "ok", Priority: 5, Seq: 3, Demand: quota.Resources{MilliCPU: 1000, Memory: quota.GiB}},
			},
			free: quota.Resources{MilliCPU: 4000, Memory: 8 * quota.GiB}, want: "ok", left: "gpu,mem",
		},
		{
			name: "zero demand always fits",
			items: []Item{
				{RunID: "z", Priority: 1, Seq: 1},
			},
			free: quota.Resources{MilliCPU: -1}, want: "", left: "z",
		},
		{
			name: "zero demand fits zero free",
			items: []Item{
				{RunID: "big", Priority: 5, Seq: 1, Demand: cpu(1)},
				{RunID: "z", Priority: 1, Seq: 1},
			},
			free: quota.Resources{}, want: "z", left: "big",
		},
		{
			name: "no bound: old big item does not block",
			items: []Item{
				{RunID: "big", Priority: 5, Seq: 1, Enqueued: t0, Demand: cpu(16)},
				{RunID: "small", Priority: 5, Seq: 2, Enqueued: t0, Demand: cpu(2)},
			},
			now: t0.Add(24 * time.Hour), free: cpu(4), want: "small", left: "big",
		},
		{
			name:    "within the bound: big item does not block",
			maxWait: 10 * minute,
			items: []Item{
				{RunID: "big", Priority: 5, Seq: 1, Enqueued: t0, Demand: cpu(16)},
				{RunID: "small", Priority: 5, Seq: 2, Enqueued: t0, Demand: cpu(2)},
			},
			now: t0.Add(10 * minute), free: cpu(4), want: "small", left: "big",
		},
		{
			name:    "past the bound: big item blocks everything behind it",
			maxWait: 10 * minute,
			items: []Item{
				{RunID: "first", Priority: 9, Seq: 5, Enqueued: t0.Add(9 * minute), Demand: cpu(1)},
				{RunID: "skipped", Priority: 9, Seq: 6, Enqueued: t0.Add(9 * minute), Demand: cpu(99)},
				{RunID: "big", Priority: 5, Seq: 1, Enqueued: t0, Demand: cpu(16)},
				{RunID: "small", Priority: 5, Seq: 2, Enqueued: t0, Demand: cpu(2)},
				{RunID: "low", Priority: 1, Seq: 3, Enqueued: t0, Demand: cpu(1)},
			},
			now: t0.Add(10*minute + time.Nanosecond), free: cpu(4), want: "first", left: "skipped,big,small,low",
		},
		{
			name:    "past the bound and fits: admitted first, then the rest",
			maxWait: 10 * minute,
			items: []Item{
				{RunID: "big", Priority: 5, Seq: 1, Enqueued: t0, Demand: cpu(16)},
				{RunID: "small", Priority: 5, Seq: 2, Enqueued: t0, Demand: cpu(2)},
				{RunID: "tiny", Priority: 5, Seq: 3, Enqueued: t0, Demand: cpu(1)},
			},
			now: t0.Add(time.Hour), free: cpu(18), want: "big,small", left: "tiny",
		},
		{
			name:    "a starving item behind a skipped one still blocks",
			maxWait: minute,
			items: []Item{
				{RunID: "new-big", Priority: 9, Seq: 9, Enqueued: t0.Add(time.Hour), Demand: cpu(64)},
				{RunID: "new-small", Priority: 9, Seq: 10, Enqueued: t0.Add(time.Hour), Demand: cpu(1)},
				{RunID: "old-big", Priority: 2, Seq: 1, Enqueued: t0, Demand: cpu(8)},
				{RunID: "old-small", Priority: 2, Seq: 2, Enqueued: t0, Demand: cpu(1)},
			},
			now: t0.Add(time.Hour), free: cpu(4), want: "new-small", left: "new-big,old-big,old-small",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewQueue(QueueOptions{MaxWait: tt.maxWait})
			mustPush(t, q, tt.items...)
			got := q.Admit(tt.now, tt.free)
			if ids(got) != tt.want {
				t.Errorf("Admit = %q, want %q", ids(got), tt.want)
			}
			if l := ids(q.Items()); l != tt.left {
				t.Errorf("left queued %q, want %q", l, tt.left)
			}
			if tt.want == "" && got != nil {
				t.Errorf("Admit admitting nothing returned %#v, want nil", got)
			}
		})
	}
}

func TestQueueStarvedItemAdmittedOnceItFits(t *testing.T) {
	q := NewQueue(QueueOptions{MaxWait: time.Minute})
	mustPush(t, q,
		Item{RunID: "big", Priority: 5, Seq: 1, Enqueued: t0, Demand: cpu(8)},
		Item{RunID: "s1", Priority: 5, Seq: 2, Enqueued: t0, Demand: cpu(2)},
		Item{RunID: "s2", Priority: 5, Seq: 3, Enqueued: t0, Demand: cpu(2)},
	)
	// Before the bound the small ones go past.
	if got := ids(q.Admit(t0.Add(time.Second), cpu(2))); got != "s1" {
		t.Fatalf("first Admit = %q, want s1", got)
	}
	// Past the bound, big holds back s2 while capacity accumulates.
	now := t0.Add(2 * time.Minute)
	for _, free := range []int64{2, 4, 6} {
		if got := q.Admit(now, cpu(free)); got != nil {
			t.Fatalf("Admit(free=%d) = %q, want nothing while big waits", free, ids(got))
		}
	}
	if got := ids(q.Admit(now, cpu(10))); got != "big,s2" {
		t.Fatalf("Admit(free=10) = %q, want big,s2", got)
	}
}

func TestQueueMonotonicClockIgnored(t *testing.T) {
	// Enqueued with a monotonic reading, now without one: the bound is
	// still measured on the wall clock.
	enq := time.Now()
	q := NewQueue(QueueOptions{MaxWait: time.Minute})
	mustPush(t, q,
		Item{RunID: "big", Priority: 5, Seq: 1, Enqueued: enq, Demand: cpu(8)},
		Item{RunID: "small", Priority: 5, Seq: 2, Enqueued: enq, Demand: cpu(1)},
	)
	if got := q.Admit(enq.Round(0).Add(2*time.Minute), cpu(1)); got != nil {
		t.Fatalf("Admit = %q, want nothing (big is starving)", ids(got))
	}
	if got := ids(q.Admit(enq.Round(0).Add(time.Minute), cpu(1))); got != "small" {
		t.Fatalf("Admit = %q, want small (big is within the bound)", got)
	}
}

func TestQueuePushErrors(t *testing.T) {
	q := NewQueue(QueueOptions{})
	mustPush(t, q, Item{RunID: "a", Priority: 5, Seq: 1, Demand: cpu(1)})
	tests := []struct {
		name string
		it   Item
		want error
	}{
		{"duplicate", Item{RunID: "a", Priority: 9, Seq: 2}, errs.ErrConflict},
		{"no id", Item{Priority: 5}, errs.ErrInvalid},
		{"negative demand", Item{RunID: "b", Demand: quota.Resources{GPU: -1}}, errs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := q.Push(tt.it); !errors.Is(err, tt.want) {
				t.Errorf("Push = %v, want %v", err, tt.want)
			}
			if got := q.Items(); len(got) != 1 || got[0].Priority != 5 {
				t.Errorf("queue changed: %+v", got)
			}
		})
	}
}

func TestQueueRemovePosition(t *testing.T) {
	var q Queue // the zero value works
	if _, ok := q.Position("x"); ok || q.Remove("x") || q.Len() != 0 || q.Admit(t0, cpu(1)) != nil {
		t.Fatal("empty zero Queue misbehaves")
	}
	for i := range 10 {
		mustPush(t, &q, Item{RunID: fmt.Sprintf("r%d", i), Priority: 5 + i%2, Seq: uint64(i), Demand: cpu(1)})
	}
	// Order: odd i (priority 6) first, then even.
	if got := ids(q.Items()); got != "r1,r3,r5,r7,r9,r0,r2,r4,r6,r8" {
		t.Fatalf("Items = %s", got)
	}
	steps := []struct {
		remove string
		ok     bool
		want   string
	}{
		{"r5", true, "r1,r3,r7,r9,r0,r2,r4,r6,r8"},
		{"r5", false, "r1,r3,r7,r9,r0,r2,r4,r6,r8"},
		{"r1", true, "r3,r7,r9,r0,r2,r4,r6,r8"},
		{"r8", true, "r3,r7,r9,r0,r2,r4,r6"},
		{"nope", false, "r3,r7,r9,r0,r2,r4,r6"},
	}
	for _, s := range steps {
		if ok := q.Remove(s.remove); ok != s.ok {
			t.Errorf("Remove(%s) = %v, want %v", s.remove, ok, s.ok)
		}
		if got := ids(q.Items()); got != s.want {
			t.Errorf("after Remove(%s): %s, want %s", s.remove, got, s.want)
		}
		if _, ok := q.Position(s.remove); ok {
			t.Errorf("Position(%s) found a removed run", s.remove)
		}
		for i, id := range strings.Split(s.want, ",") {
			if p, ok := q.Position(id); !ok || p != i {
				t.Errorf("Position(%s) = %d,%v, want %d", id, p, ok, i)
			}
		}
		if q.Len() != strings.Count(s.want, ",")+1 {
			t.Errorf("Len = %d", q.Len())
		}
	}
	// A removed id may be pushed again, and goes where its key says.
	mustPush(t, &q, Item{RunID: "r5", Priority: 9, Seq: 99})
	if p, _ := q.Position("r5"); p != 0 {
		t.Errorf("requeued r5 at %d, want 0", p)
	}
}

// refAdmit is the reference: sort, then one plain walk.
func refAdmit(items []Item, maxWait time.Duration, now time.Time, free quota.Resources) (admitted, left []Item) {
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b Item) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		if a.Seq != b.Seq {
			if a.Seq < b.Seq {
				return -1
			}
			return 1
		}
		return strings.Compare(a.RunID, b.RunID)
	})
	for i, it := range items {
		if it.Demand.Fits(free) {
			free = free.Sub(it.Demand)
			admitted = append(admitted, it)
			continue
		}
		if maxWait > 0 && now.Round(0).Sub(it.Enqueued.Round(0)) > maxWait {
			return admitted, append(left, items[i:]...)
		}
		left = append(left, it)
	}
	return admitted, left
}

func TestQueueAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 1))
	shapes := []quota.Resources{
		{},
		{MilliCPU: 500, Memory: quota.GiB},
		{MilliCPU: 2000, Memory: 8 * quota.GiB},
		{MilliCPU: 4000, Memory: 16 * quota.GiB, GPU: 1},
		{MilliCPU: 8000, Memory: 4 * quota.GiB},
		{MilliCPU: 1000, Memory: 64 * quota.GiB},
		{MilliCPU: 16000, Memory: 64 * quota.GiB, GPU: 4},
	}
	for round := range 100 {
		maxWait := time.Duration(0)
		if round%3 != 0 {
			maxWait = time.Duration(1+rng.IntN(60)) * time.Minute
		}
		q := NewQueue(QueueOptions{MaxWait: maxWait})
		var ref []Item
		now := t0
		seq := uint64(0)
		for step := range 200 {
			switch op := rng.IntN(10); {
			case op < 6: // push a few
				for range 1 + rng.IntN(8) {
					seq++
					it := Item{
						RunID:    fmt.Sprintf("r%d-%d", round, seq),
						Priority: 1 + rng.IntN(9),
						Seq:      seq,
						Enqueued: now.Add(-time.Duration(rng.IntN(90)) * time.Minute),
						Demand:   shapes[rng.IntN(len(shapes))].Mul(int64(1 + rng.IntN(3))),
					}
					if rng.IntN(20) == 0 { // out-of-order Seq
						it.Seq = uint64(rng.IntN(int(seq)))
					}
					mustPush(t, q, it)
					ref = append(ref, it)
				}
			case op < 7 && len(ref) > 0: // remove one
				i := rng.IntN(len(ref))
				if !q.Remove(ref[i].RunID) {
					t.Fatalf("round %d step %d: Remove(%s) = false", round, step, ref[i].RunID)
				}
				ref = slices.Delete(ref, i, i+1)
			default: // admit
				now = now.Add(time.Duration(rng.IntN(10)) * time.Minute)
				free := quota.Resources{
					MilliCPU: rng.Int64N(40_000) - 1000,
					Memory:   rng.Int64N(160*quota.GiB) - quota.GiB,
					GPU:      rng.Int64N(8) - 1,
				}
				got := q.Admit(now, free)
				want, left := refAdmit(ref, maxWait, now, free)
				if ids(got) != ids(want) {
					t.Fatalf("round %d step %d: Admit(free=%v) = %s, want %s", round, step, free, ids(got), ids(want))
				}
				var sum quota.Resources
				seen := map[string]bool{}
				for _, it := range got {
					sum = sum.Add(it.Demand)
					if seen[it.RunID] {
						t.Fatalf("Admit returned %s twice", it.RunID)
					}
					seen[it.RunID] = true
					if _, ok := q.Position(it.RunID); ok {
						t.Fatalf("admitted %s is still queued", it.RunID)
					}
				}
				if len(got) > 0 && !sum.Fits(free) {
					t.Fatalf("admitted %v, more than free %v", sum, free)
				}
				ref = left
			}
			if q.Len() != len(ref) {
				t.Fatalf("round %d step %d: Len = %d, want %d", round, step, q.Len(), len(ref))
			}
		}
		_, sorted := refAdmit(ref, 0, now, quota.Resources{MilliCPU: -1})
		for range 20 {
			prio, stopAt := 1+rng.IntN(10), uint64(rng.IntN(int(seq)+1))
			stop := func(it Item) bool { return it.Seq%7 == stopAt%7 }
			var got []Item
			found := q.Ahead(now, prio, func(it Item) bool { got = append(got, it); return stop(it) })
			want, wantFound := refAhead(sorted, maxWait, now, prio, stop)
			if ids(got) != ids(want) || found != wantFound {
				t.Fatalf("round %d: Ahead(prio %d) called %s (%v), want %s (%v)", round, prio, ids(got), found, ids(want), wantFound)
			}
		}
		if ids(q.Items()) != ids(sorted) {
			t.Fatalf("round %d: Items = %s, want %s", round, ids(q.Items()), ids(sorted))
		}
		for i, it := range sorted {
			if p, ok := q.Position(it.RunID); !ok || p != i {
				t.Fatalf("round %d: Position(%s) = %d,%v, want %d", round, it.RunID, p, ok, i)
			}
		}
	}
}

func TestQueueAdmitNothingFitsDoesNotAllocate(t *testing.T) {
	q := NewQueue(QueueOptions{MaxWait: time.Hour})
	for i := range 10_000 {
		mustPush(t, q, Item{RunID: fmt.Sprint(i), Priority: 1 + i%9, Seq: uint64(i), Enqueued: t0, Demand: cpu(int64(1 + i%8))})
	}
	if n := testing.AllocsPerRun(100, func() { q.Admit(t0, cpu(0)) }); n != 0 {
		t.Errorf("Admit with nothing fitting allocates %v times", n)
	}
}

// AdmitUpTo admits what Admit would, in its order, stopped after n; the
// rest stays queued in its order.
func TestQueueAdmitUpTo(t *testing.T) {
	for _, tc := range []struct {
		n          int
		want, left string
	}{
		{-1, "", "p9,a,b,big,c"},
		{0, "", "p9,a,b,big,c"},
		{2, "p9,a", "b,big,c"},
		{3, "p9,a,b", "big,c"},
		{4, "p9,a,b,c", "big"}, // big does not fit what is left: c goes past it
		{10, "p9,a,b,c", "big"},
	} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			q := NewQueue(QueueOptions{})
			mustPush(t, q,
				Item{RunID: "a", Priority: 5, Seq: 1, Enqueued: t0, Demand: cpu(1)},
				Item{RunID: "b", Priority: 5, Seq: 2, Enqueued: t0, Demand: cpu(1)},
				Item{RunID: "big", Priority: 5, Seq: 3, Enqueued: t0, Demand: cpu(50)},
				Item{RunID: "c", Priority: 5, Seq: 4, Enqueued: t0, Demand: cpu(1)},
				Item{RunID: "p9", Priority: 9, Seq: 5, Enqueued: t0, Demand: cpu(1)},
			)
			if got := ids(q.AdmitUpTo(t0, cpu(10), tc.n)); got != tc.want {
				t.Errorf("AdmitUpTo(%d) = %q, want %q", tc.n, got, tc.want)
			}
			if got := ids(q.Items()); got != tc.left {
				t.Errorf("left %q, want %q", got, tc.left)
			}
		})
	}
}

// refAhead is Ahead on items in admission order, the obvious way.
func refAhead(sorted []Item, maxWait time.Duration, now time.Time, prio int, stop func(Item) bool) (called []Item, found bool) {
	for _, it := range sorted {
		if it.Priority < prio {
			break
		}
		if called = append(called, it); stop(it) {
			return called, true
		}
	}
	for _, it := range sorted {
		if it.Priority < prio && maxWait > 0 && now.Sub(it.Enqueued) > maxWait {
			if called = append(called, it); stop(it) {
				return called, true
			}
		}
	}
	return called, false
}

func TestQueueAhead(t *testing.T) {
	now := t0.Add(time.Hour)
	items := []Item{
		{RunID: "p9", Priority: 9, Seq: 1, Enqueued: now},
		{RunID: "p5", Priority: 5, Seq: 2, Enqueued: now},
		{RunID: "p5-old", Priority: 5, Seq: 3, Enqueued: now.Add(-time.Hour)},
		{RunID: "p1", Priority: 1, Seq: 4, Enqueued: now},
		{RunID: "p1-old", Priority: 1, Seq: 5, Enqueued: now.Add(-time.Hour)},
	}
	never := func(Item) bool { return false }
	tests := []struct {
		name      string
		maxWait   time.Duration
		prio      int
		stop      func(Item) bool
		wantCalls string
		wantFound bool
	}{
		{"no bound: those of at least the priority", 0, 5, never, "p9,p5,p5-old", false},
		{"no bound: nothing above 9", 0, 10, never, "", false},
		{"no bound: every one at priority 1", 0, 1, never, "p9,p5,p5-old,p1,p1-old", false},
		{"bound: the starving lower ones after", 30 * time.Minute, 9, never, "p9,p5-old,p1-old", false},
		{"bound: above every priority only the starving", 30 * time.Minute, 10, never, "p5-old,p1-old", false},
		{"bound: a starving one is not called twice", 30 * time.Minute, 5, never, "p9,p5,p5-old,p1-old", false},
		{"stops at the first found", 30 * time.Minute, 1, func(it Item) bool { return it.RunID == "p5" }, "p9,p5", true},
		{"stops among the starving", 30 * time.Minute, 10, func(it Item) bool { return it.RunID == "p5-old" }, "p5-old", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue(QueueOptions{MaxWait: tc.maxWait})
			mustPush(t, q, items...)
			var got []Item
			found := q.Ahead(now, tc.prio, func(it Item) bool { got = append(got, it); return tc.stop(it) })
			if ids(got) != tc.wantCalls || found != tc.wantFound {
				t.Errorf("Ahead(%d) called %s (%v), want %s (%v)", tc.prio, ids(got), found, tc.wantCalls, tc.wantFound)
			}
		})
	}
	if NewQueue(QueueOptions{}).Ahead(now, 1, func(Item) bool { t.Fatal("called on an empty queue"); return true }) {
		t.Error("found in an empty queue")
	}
}
