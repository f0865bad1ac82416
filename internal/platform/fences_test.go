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
	began := time.Now()
	wall := began.Round(0) // without a monotonic reading: Sub uses the wall clock
	for _, c := range []struct {
		name        string
		began, done time.Time
		want        bool
	}{
		{"at once", began, began, true},
		{"within", began, began.Add(joinWindow / 2), true},
		{"at the window", began, began.Add(joinWindow), true},
		{"beyond", began, began.Add(joinWindow + time.Millisecond), false},
		{"wall clock beyond (slept)", wall, wall.Add(2 * joinWindow), false},
		{"wall clock set back", wall, wall.Add(-time.Second), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := withinJoinWindow(c.began, c.done); got != c.want {
				t.Errorf("withinJoinWindow(+%v) = %v, want %v", c.done.Sub(c.began), got, c.want)
			}
		})
	}
}
