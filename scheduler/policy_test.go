package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/aidlc/dlc/quota"
)

func members(n int, eligible func(i int) (running, abnormal bool)) []Candidate {
	ms := make([]Candidate, n)
	for i := range ms {
		r, a := eligible(i)
		ms[i] = Candidate{ClusterID: fmt.Sprintf("c%d", i), Running: r, Abnormal: a}
	}
	return ms
}

func TestRandomSameSeedSameSequence(t *testing.T) {
	ms := members(50, func(i int) (bool, bool) { return i%3 != 0, i%7 == 0 })
	a, b, c := NewRandom(42), NewRandom(42), NewRandom(43)
	differs := false
	for i := range 200 {
		x, okx := a.Pick(ms)
		y, oky := b.Pick(ms)
		z, _ := c.Pick(ms)
		if !okx || !oky || x != y {
			t.Fatalf("pick %d: seed 42 gave %q,%v and %q,%v", i, x, okx, y, oky)
		}
		differs = differs || x != z
	}
	if !differs {
		t.Error("seeds 42 and 43 gave the same 200 picks")
	}
}

func TestRandomSkipsIneligible(t *testing.T) {
	tests := []struct {
		name    string
		members []Candidate
		want    map[string]bool // the clusters it may pick; empty = none
		why     Reason
	}{
		{"no members", nil, nil, NoMemberRunning},
		{"none running", []Candidate{{ClusterID: "a"}, {ClusterID: "b"}}, nil, NoMemberRunning},
		{"all abnormal", []Candidate{{ClusterID: "a", Running: true, Abnormal: true}, {ClusterID: "b", Abnormal: true}}, nil, AllMembersAbnormal},
		{"running ones abnormal, others stopped", []Candidate{{ClusterID: "a", Running: true, Abnormal: true}, {ClusterID: "b"}}, nil, NoMemberRunning},
		{"one eligible", []Candidate{{ClusterID: "a"}, {ClusterID: "b", Running: true, Abnormal: true}, {ClusterID: "c", Running: true}}, map[string]bool{"c": true}, ""},
		{"two eligible", []Candidate{{ClusterID: "a", Running: true}, {ClusterID: "b", Abnormal: true}, {ClusterID: "c", Running: true}}, map[string]bool{"a": true, "c": true}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewRandom(1)
			seen := map[string]bool{}
			for range 100 {
				id, ok := p.Pick(tt.members)
				if ok != (len(tt.want) > 0) {
					t.Fatalf("Pick ok = %v, want %v", ok, len(tt.want) > 0)
				}
				if !ok {
					if id != "" {
						t.Fatalf("Pick returned %q with ok=false", id)
					}
					break
				}
				if !tt.want[id] {
					t.Fatalf("Pick returned %q, want one of %v", id, tt.want)
				}
				seen[id] = true
			}
			if len(seen) != len(tt.want) {
				t.Errorf("over 100 picks saw %v, want all of %v", seen, tt.want)
			}
			if tt.why != "" {
				if got := WhyNone(tt.members); got != tt.why {
					t.Errorf("WhyNone = %q, want %q", got, tt.why)
				}
			}
		})
	}
}

func TestRandomRoughlyUniform(t *testing.T) {
	// 10 eligible members among 20; with a fixed seed the counts are fixed,
	// and each should be within 10% of the mean over 100,000 picks (the
	// standard deviation is about 95, i.e. under 1% of the mean).
	ms := members(20, func(i int) (bool, bool) { return i%2 == 0, false })
	p := NewRandom(7)
	const picks = 100_000
	counts := map[string]int{}
	for range picks {
		id, ok := p.Pick(ms)
		if !ok {
			t.Fatal("Pick found none")
		}
		counts[id]++
	}
	if len(counts) != 10 {
		t.Fatalf("picked %d distinct members, want 10: %v", len(counts), counts)
	}
	mean := picks / 10
	for id, n := range counts {
		if n < mean*9/10 || n > mean*11/10 {
			t.Errorf("%s picked %d times, want %d ± 10%%", id, n, mean)
		}
	}
}

func TestRandomConcurrent(t *testing.T) {
	ms := members(10, func(i int) (bool, bool) { return true, false })
	p := NewRandom(3)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if _, ok := p.Pick(ms); !ok {
					t.Error("Pick found none")
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestRandomPickDoesNotAllocate(t *testing.T) {
	ms := members(100, func(i int) (bool, bool) { return i%2 == 0, false })
	p := NewRandom(1)
	if n := testing.AllocsPerRun(100, func() { p.Pick(ms) }); n != 0 {
		t.Errorf("Pick allocates %v times", n)
	}
}

func BenchmarkRandomPick1000(b *testing.B) {
	ms := members(1000, func(i int) (bool, bool) { return i%2 == 0, false })
	p := NewRandom(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := p.Pick(ms); !ok {
			b.Fatal("Pick found none")
		}
	}
}

// run ids for the tie tests: enough that every tied member wins some.
func runIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("run-%04d", i)
	}
	return ids
}

// The policies of G3 that serve the uses of G4 (least-loaded: one entry
// for many clusters; ordered failover: primary and standby; most free
// quota: off-peak sharing across resource groups): what each picks, and
// that the reason it gives names what decided.
func TestPoliciesPickG3G4(t *testing.T) {
	gpu := func(n int64) quota.Resources { return quota.Resources{GPU: n, MilliCPU: 8000, Memory: 32 * quota.GiB} }
	tests := []struct {
		name    string
		policy  Placer
		members []Candidate
		// want is the member picked for every run id; empty: none.
		want string
		// among, when want is empty and some member is picked, is the set a
		// tie is broken within (every one of them picked by some run id).
		among  []string
		reason string // a part of the reason
	}{
		{"least-loaded: fewest active runs", LeastLoaded{}, []Candidate{
			{ClusterID: "a", Running: true, ActiveRuns: 3},
			{ClusterID: "b", Running: true, ActiveRuns: 1},
			{ClusterID: "c", Running: true, ActiveRuns: 2},
		}, "b", nil, "least-loaded: 1 active run, fewest of 3 running members"},
		{"least-loaded: an idle abnormal or stopped member is skipped", LeastLoaded{}, []Candidate{
			{ClusterID: "a", Running: true, Abnormal: true},
			{ClusterID: "b"},
			{ClusterID: "c", Running: true, ActiveRuns: 7},
		}, "c", nil, "7 active runs, fewest of 1 running member"},
		{"least-loaded: a tie is broken by the run id", LeastLoaded{}, []Candidate{
			{ClusterID: "a", Running: true, ActiveRuns: 2},
			{ClusterID: "b", Running: true, ActiveRuns: 2},
			{ClusterID: "c", Running: true, ActiveRuns: 2},
			{ClusterID: "d", Running: true, ActiveRuns: 5},
		}, "", []string{"a", "b", "c"}, "(3 tied: the run id chose)"},
		{"least-loaded: none running", LeastLoaded{}, []Candidate{{ClusterID: "a", Abnormal: true}}, "", nil, ""},

		{"ordered failover: the primary while it runs", OrderedFailover{}, []Candidate{
			{ClusterID: "a", Running: true, Order: 2},
			{ClusterID: "b", Running: true, Order: 1},
			{ClusterID: "c", Running: true},
		}, "b", nil, "ordered-failover: #1 in order, the first"},
		{"ordered failover: the standby when the primary is abnormal", OrderedFailover{}, []Candidate{
			{ClusterID: "a", Running: true, Order: 2},
			{ClusterID: "b", Running: true, Abnormal: true, Order: 1},
			{ClusterID: "c", Running: true},
		}, "a", nil, "#2 in order, the first running (b abnormal)"},
		{"ordered failover: past the order, by id", OrderedFailover{}, []Candidate{
			{ClusterID: "d", Running: true},
			{ClusterID: "a", Order: 2},
			{ClusterID: "b", Running: true, Abnormal: true, Order: 1},
			{ClusterID: "c", Running: true},
		}, "c", nil, "no member in the order is running; first running member by id (b abnormal, a not running)"},
		{"ordered failover: no order, by id", OrderedFailover{}, []Candidate{
			{ClusterID: "b", Running: true},
			{ClusterID: "a", Running: true},
		}, "a", nil, "no member is in the order"},
		{"ordered failover: names at most three passed", OrderedFailover{}, []Candidate{
			{ClusterID: "a", Order: 1}, {ClusterID: "b", Order: 2}, {ClusterID: "c", Order: 3},
			{ClusterID: "d", Order: 4}, {ClusterID: "e", Order: 5}, {ClusterID: "f", Running: true, Order: 6},
		}, "f", nil, "(a not running, b not running, c not running, 2 more)"},
		{"ordered failover: all abnormal", OrderedFailover{}, []Candidate{{ClusterID: "a", Running: true, Abnormal: true, Order: 1}}, "", nil, ""},

		{"most free quota: GPUs first", MostFreeQuota{}, []Candidate{
			{ClusterID: "a", Running: true, ResourceGroup: "rg-a", Allocatable: quota.Resources{GPU: 1, MilliCPU: 64000, Memory: 512 * quota.GiB}},
			{ClusterID: "b", Running: true, ResourceGroup: "rg-b", Allocatable: gpu(2)},
		}, "b", nil, "most-free-quota: resource group rg-b can allocate gpu=2 cpu=8 memory=32Gi, most of 2 running members"},
		{"most free quota: then CPU, then memory", MostFreeQuota{}, []Candidate{
			{ClusterID: "a", Running: true, Allocatable: quota.Resources{MilliCPU: 4000, Memory: 512 * quota.GiB}},
			{ClusterID: "b", Running: true, Allocatable: quota.Resources{MilliCPU: 4500, Memory: 8 * quota.GiB}},
			{ClusterID: "c", Running: true, Allocatable: quota.Resources{MilliCPU: 4500, Memory: 9 * quota.GiB}},
		}, "c", nil, "cpu=4500m memory=9Gi"},
		{"most free quota: an abnormal member's group is not counted", MostFreeQuota{}, []Candidate{
			{ClusterID: "a", Running: true, Abnormal: true, Allocatable: gpu(8)},
			{ClusterID: "b", Running: true, Allocatable: gpu(1)},
		}, "b", nil, "gpu=1"},
		{"most free quota: members of one resource group tie", MostFreeQuota{}, []Candidate{
			{ClusterID: "a", Running: true, ResourceGroup: "rg-1", Allocatable: gpu(4)},
			{ClusterID: "b", Running: true, ResourceGroup: "rg-1", Allocatable: gpu(4)},
			{ClusterID: "c", Running: true, ResourceGroup: "rg-2", Allocatable: gpu(3)},
		}, "", []string{"a", "b"}, "(2 tied: the run id chose)"},
		{"most free quota: none", MostFreeQuota{}, nil, "", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[string]bool{}
			for _, run := range runIDs(64) {
				ch, ok := tt.policy.Place(run, tt.members)
				if ok != (tt.want != "" || len(tt.among) > 0) {
					t.Fatalf("Place(%s) ok = %v", run, ok)
				}
				if !ok {
					if ch != (Choice{}) {
						t.Fatalf("Place(%s) = %+v with ok=false", run, ch)
					}
					return
				}
				if tt.want != "" && ch.ClusterID != tt.want {
					t.Fatalf("Place(%s) = %s (%s), want %s", run, ch.ClusterID, ch.Reason, tt.want)
				}
				if !strings.Contains(ch.Reason, tt.reason) || len(ch.Reason) > MaxReasonLen {
					t.Fatalf("Place(%s) reason %q, want it to hold %q (at most %d bytes)", run, ch.Reason, tt.reason, MaxReasonLen)
				}
				if id, _ := tt.policy.Pick(tt.members); tt.want != "" && id != tt.want {
					t.Fatalf("Pick = %s, want %s", id, tt.want)
				}
				seen[ch.ClusterID] = true
			}
			if len(tt.among) > 0 {
				got := slices.Sorted(maps.Keys(seen))
				if !slices.Equal(got, tt.among) {
					t.Errorf("over 64 runs the tie went to %v, want each of %v", got, tt.among)
				}
			}
		})
	}
}

// G3: the policies other than random decide from what the members are and
// hold and from the run id only: the same for any order of the members,
// any number of calls and any caller (two replicas on one store).
func TestPoliciesDeterministicG3(t *testing.T) {
	ms := members(12, func(i int) (bool, bool) { return i%5 != 0, i%7 == 3 })
	for i := range ms {
		ms[i].ActiveRuns = i % 3
		ms[i].Allocatable = quota.Resources{GPU: int64(i % 2), MilliCPU: 4000}
		if i%4 == 0 {
			ms[i].Order = 12 - i
		}
	}
	for _, p := range []Placer{LeastLoaded{}, OrderedFailover{}, MostFreeQuota{}} {
		t.Run(fmt.Sprintf("%T", p), func(t *testing.T) {
			for _, run := range runIDs(100) {
				want, ok := p.Place(run, ms)
				if !ok {
					t.Fatal("none picked")
				}
				shuffled := slices.Clone(ms)
				slices.Reverse(shuffled)
				shuffled[0], shuffled[5] = shuffled[5], shuffled[0]
				for _, in := range [][]Candidate{ms, shuffled} {
					if got, _ := p.Place(run, in); got != want {
						t.Fatalf("run %s: %+v, then %+v", run, want, got)
					}
				}
			}
		})
	}
}

// G4, one entry for many clusters: placing runs one after another with
// least-loaded, each counted on its member, keeps the members within one
// run of each other, whatever the run ids.
func TestLeastLoadedSpreadsG4(t *testing.T) {
	ms := members(4, func(int) (bool, bool) { return true, false })
	for _, run := range runIDs(100) {
		ch, ok := LeastLoaded{}.Place(run, ms)
		if !ok {
			t.Fatal("none picked")
		}
		for i := range ms {
			if ms[i].ClusterID == ch.ClusterID {
				ms[i].ActiveRuns++
			}
		}
		lo, hi := ms[0].ActiveRuns, ms[0].ActiveRuns
		for _, m := range ms {
			lo, hi = min(lo, m.ActiveRuns), max(hi, m.ActiveRuns)
		}
		if hi-lo > 1 {
			t.Fatalf("after %s: %+v", run, ms)
		}
	}
	for _, m := range ms {
		if m.ActiveRuns != 25 {
			t.Errorf("%s holds %d runs, want 25", m.ClusterID, m.ActiveRuns)
		}
	}
}

func TestCompareAllocatable(t *testing.T) {
	tests := []struct {
		name string
		a, b quota.Resources
		want int
	}{
		{"equal", quota.Resources{GPU: 1, MilliCPU: 2, Memory: 3}, quota.Resources{GPU: 1, MilliCPU: 2, Memory: 3}, 0},
		{"a GPU beats any CPU", quota.Resources{GPU: 1}, quota.Resources{MilliCPU: 1 << 40, Memory: 1 << 50}, 1},
		{"CPU before memory", quota.Resources{MilliCPU: 2}, quota.Resources{MilliCPU: 1, Memory: 1 << 50}, 1},
		{"memory last", quota.Resources{Memory: 1}, quota.Resources{Memory: 2}, -1},
		{"over-committed is less than nothing", quota.Resources{GPU: -1}, quota.Resources{}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CompareAllocatable(tt.a, tt.b); got != tt.want {
				t.Errorf("CompareAllocatable = %d, want %d", got, tt.want)
			}
			if got := CompareAllocatable(tt.b, tt.a); got != -tt.want {
				t.Errorf("swapped: %d, want %d", got, -tt.want)
			}
		})
	}
}

// Place: a Placer's reason, bounded; a plain Policy's pick with a reason
// that says only that the policy chose.
func TestPlace(t *testing.T) {
	ms := []Candidate{{ClusterID: "a", Running: true}, {ClusterID: "b", Running: true, Abnormal: true}}
	if ch, ok := Place(NewRandom(1), "r", ms); !ok || ch.ClusterID != "a" || ch.Reason != "random: one of 1 running member" {
		t.Errorf("Random: %+v %v", ch, ok)
	}
	if ch, ok := Place(firstPolicy{}, "r", ms); !ok || ch.ClusterID != "a" || !strings.Contains(ch.Reason, "firstPolicy: one of 1 running member") {
		t.Errorf("a plain Policy: %+v %v", ch, ok)
	}
	long := longReason(strings.Repeat("组", 100))
	ch, ok := Place(long, "r", ms)
	if !ok || len(ch.Reason) > MaxReasonLen || !utf8.ValidString(ch.Reason) || !strings.HasSuffix(ch.Reason, "…") {
		t.Errorf("a long reason: %d bytes %q", len(ch.Reason), ch.Reason)
	}
	if _, ok := Place(LeastLoaded{}, "r", ms[1:]); ok {
		t.Error("picked an abnormal member")
	}
}

type firstPolicy struct{}

func (firstPolicy) Pick(ms []Candidate) (string, bool) {
	for _, m := range ms {
		if m.eligible() {
			return m.ClusterID, true
		}
	}
	return "", false
}

type longReason string

func (l longReason) Pick(ms []Candidate) (string, bool) { return firstPolicy{}.Pick(ms) }
func (l longReason) Place(_ string, ms []Candidate) (Choice, bool) {
	id, ok := l.Pick(ms)
	return Choice{ClusterID: id, Reason: string(l)}, ok
}

// Place allocates for its reason only: as much for 1,000 members as for
// 200 (200 running in both, so the reasons read alike), give or take the
// race detector's.
func TestPlaceAllocationsDoNotGrow(t *testing.T) {
	few := members(200, func(int) (bool, bool) { return true, false })
	many := members(1000, func(i int) (bool, bool) { return i%5 == 0, false })
	for _, p := range []Placer{LeastLoaded{}, MostFreeQuota{}, OrderedFailover{}} {
		a := testing.AllocsPerRun(100, func() { p.Place("run-1", few) })
		b := testing.AllocsPerRun(100, func() { p.Place("run-1", many) })
		if b > a+2 { // slack for the race detector's own; one per member would be 800 more
			t.Errorf("%T.Place allocates %v times for 200 members, %v for 1000", p, a, b)
		}
	}
}

func BenchmarkLeastLoadedPlace1000(b *testing.B) {
	ms := members(1000, func(i int) (bool, bool) { return i%2 == 0, false })
	for i := range ms {
		ms[i].ActiveRuns = i % 7
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := (LeastLoaded{}).Place("run-1", ms); !ok {
			b.Fatal("none picked")
		}
	}
}
