package platform

import (
	"testing"
	"time"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/usage"
)

// TestCloseAt: when an open interval ends, by what a step sees.
func TestCloseAt(t *testing.T) {
	r := meterReconciler{&Engine{o: options{meterEvery: time.Hour}}}
	s := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	running := &usage.Record{Start: s, End: s.Add(50 * time.Minute), Open: true, Nodes: []usage.Node{{Count: 2}}}
	idle := &usage.Record{Start: s, End: s, Open: true}
	at := func(d time.Duration) time.Time { return s.Add(d) }
	for _, tc := range []struct {
		name      string
		cur       *usage.Record
		obs       cluster.Observation
		gone      bool
		seen      time.Time
		sameNodes bool
		want      time.Time
	}{
		{"Ray dates a change of its nodes", running, cluster.Observation{Since: at(30 * time.Minute)}, false, at(40 * time.Minute), false, at(30 * time.Minute)},
		{"Ray's time even past this client's clock (skew)", running, cluster.Observation{Since: at(70 * time.Minute)}, false, at(60 * time.Minute), false, at(70 * time.Minute)},
		{"a Since from before the interval (a restarted informer): when it was seen", running, cluster.Observation{Since: s}, false, at(55 * time.Minute), false, at(55 * time.Minute)},
		{"a change seen soon, with no Since", running, cluster.Observation{}, false, at(55 * time.Minute), false, at(55 * time.Minute)},
		{"whom it bills changed: when seen, not Ray's last change", running, cluster.Observation{Since: at(10 * time.Minute)}, false, at(40 * time.Minute), true, at(40 * time.Minute)},
		{"gone: when seen", running, cluster.Observation{Since: at(10 * time.Minute)}, true, at(80 * time.Minute), false, at(80 * time.Minute)},
		{"nobody looked for hours: where it was last known to run", running, cluster.Observation{}, true, at(5 * time.Hour), false, running.End},
		{"an idle meter restarted after a long hibernation: when seen", idle, cluster.Observation{}, false, at(10 * time.Hour), false, at(10 * time.Hour)},
		{"an idle meter restarted: Ray's time", idle, cluster.Observation{Since: at(9 * time.Hour)}, false, at(10 * time.Hour), false, at(9 * time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.closeAt(tc.cur, tc.obs, tc.gone, tc.seen, tc.sameNodes); !got.Equal(tc.want) {
				t.Errorf("closes at %s, want %s", got.Format(time.TimeOnly), tc.want.Format(time.TimeOnly))
			}
		})
	}
}
