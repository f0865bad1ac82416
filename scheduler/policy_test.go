package scheduler

import (
	"fmt"
	"sync"
	"testing"
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
