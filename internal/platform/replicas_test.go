package platform

import (
	"testing"
	"time"
)

// gone tells a dead operation's mark by its maker: only a member this
// client counts as sharing the work, and has not seen within the TTL,
// is gone, and only for a mark older than the TTL.
func TestGone(t *testing.T) {
	const ttl = 15 * time.Second
	rep := newReplicas(ttl, 0)
	rep.seen["r-live"] = memberSeen{version: "1"}
	rep.seen["r-new"] = memberSeen{version: "1", from: 3} // on probation: not counted yet, but alive
	rep.seen["r-out"] = memberSeen{version: "1"}
	rep.excluded["r-out"] = exclusion{until: 4} // left out for leaving its share undone, but alive
	w := &workSharing{rep: rep}
	cases := []struct {
		name string
		w    *workSharing
		id   string
		age  time.Duration
		want bool
	}{
		{"sharing off: cannot tell", &workSharing{}, "r-x", time.Hour, false},
		{"a mark from before the field", w, "", time.Hour, false},
		{"this client's own", w, rep.self, time.Hour, false},
		{"a member seen within the TTL", w, "r-live", time.Hour, false},
		{"a member on probation", w, "r-new", time.Hour, false},
		{"a member left out", w, "r-out", time.Hour, false},
		{"an unseen member, the mark younger than the TTL", w, "r-x", ttl - time.Nanosecond, false},
		{"an unseen member, the mark as old as the TTL", w, "r-x", ttl, true},
		{"an unseen member, the mark from a clock ahead", w, "r-x", -time.Minute, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.w.gone(c.id, c.age); got != c.want {
				t.Fatalf("gone(%q, %s) = %v, want %v", c.id, c.age, got, c.want)
			}
		})
	}
}
