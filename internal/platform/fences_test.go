package platform

import (
	"slices"
	"testing"
	"time"
)

// TestPutBackGroups: what taking a cluster out of a group deleted while it
// was put into it leaves of the cluster's groups.
func TestPutBackGroups(t *testing.T) {
	for _, c := range []struct {
		name                 string
		cur, before, written []string
		into, target         string
		want                 []string
	}{
		{"added, as written", []string{"a", "g"}, []string{"a"}, []string{"a", "g"}, "g", "", []string{"a"}},
		{"added, moved on by the delete", []string{"a", "t"}, []string{"a"}, []string{"a", "g"}, "g", "t", []string{"a"}},
		{"added, moved on, target unknown", []string{"a", "t"}, []string{"a"}, []string{"a", "g"}, "g", "", []string{"a"}},
		{"added, the target already its", []string{"a", "t"}, []string{"a", "t"}, []string{"a", "t", "g"}, "g", "t", []string{"a", "t"}},
		{"added, another group added meanwhile", []string{"a", "g", "h"}, []string{"a"}, []string{"a", "g"}, "g", "t", []string{"a", "h"}},
		{"added, moved on and another group added", []string{"a", "t", "h"}, []string{"a"}, []string{"a", "g"}, "g", "", []string{"a", "t", "h"}},
		{"added, another target than the mark's", []string{"a", "u"}, []string{"a"}, []string{"a", "g"}, "g", "t", []string{"a", "u"}},
		{"already in it before", []string{"g"}, []string{"g"}, []string{"g"}, "g", "", []string{"g"}},
		{"a delete's move into a deleted target", []string{"t"}, []string{"x"}, []string{"t"}, "t", "", []string{"x"}},
		{"a delete's move, moved on again", []string{"u", "a"}, []string{"x", "a"}, []string{"t", "a"}, "t", "u", []string{"a", "x"}},
		{"an edit's swap", []string{"g"}, []string{"a"}, []string{"g"}, "g", "", []string{"a"}},
		{"nothing would be left", []string{"g"}, nil, []string{"g"}, "g", "", []string{"g"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := putBackGroups(c.cur, c.before, c.written, c.into, c.target); !slices.Equal(got, c.want) {
				t.Errorf("putBackGroups(%v, %v, %v, %s, %s) = %v, want %v", c.cur, c.before, c.written, c.into, c.target, got, c.want)
			}
		})
	}
}

// TestWithinJoinWindow: a create's read beside its write counts only if
// the write returned within joinWindow of the read's start on both clocks
// (the wall clock catches a machine that slept, whose monotonic clock
// stopped).
func TestWithinJoinWindow(t *testing.T) {
	for _, c := range []struct {
		name       string
		mono, wall time.Duration
		want       bool
	}{
		{"at once", 0, 0, true},
		{"within", joinWindow / 2, joinWindow / 2, true},
		{"at the window", joinWindow, joinWindow, true},
		{"beyond", joinWindow + time.Millisecond, joinWindow + time.Millisecond, false},
		{"slept: the monotonic clock stood still", joinWindow / 2, 2 * joinWindow, false},
		{"wall clock set back", joinWindow / 2, -time.Second, false},
		{"wall clock set forward", joinWindow / 2, time.Hour, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := inJoinWindow(c.mono, c.wall); got != c.want {
				t.Errorf("inJoinWindow(%v, %v) = %v, want %v", c.mono, c.wall, got, c.want)
			}
		})
	}
	// withinJoinWindow measures both from time.Now() readings.
	began := time.Now()
	if !withinJoinWindow(began, began.Add(joinWindow/2)) || withinJoinWindow(began, began.Add(2*joinWindow)) {
		t.Error("withinJoinWindow does not measure from its readings")
	}
}
