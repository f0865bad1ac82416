package kube

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/event"
)

func TestEventReasonAndType(t *testing.T) {
	for _, c := range []struct{ action, reason, typ string }{
		{"running", "Running", corev1.EventTypeNormal},
		{"abnormal", "Abnormal", corev1.EventTypeWarning},
		{"failed", "Failed", corev1.EventTypeWarning},
		{"delete-retrying", "DeleteRetrying", corev1.EventTypeWarning},
		{"autoscale-refused", "AutoscaleRefused", corev1.EventTypeWarning},
		{"autoscale", "Autoscale", corev1.EventTypeNormal},
		{"groups", "Groups", corev1.EventTypeNormal},
		{"observed_failed 2", "ObservedFailed2", corev1.EventTypeNormal},
		{"--", "SystemEvent", corev1.EventTypeNormal},
	} {
		if r, typ := eventReason(c.action), eventType(c.action); r != c.reason || typ != c.typ {
			t.Errorf("%q: reason %q, type %s; want %q, %s", c.action, r, typ, c.reason, c.typ)
		}
	}
}

// TestNewSystemEvents: entries are matched by content, so a log that
// dropped its oldest entries (the bound) yields only the appended ones,
// an entry equal to one before is new only if it is there more often, and
// an entry a repeat was folded into is new (each occurrence an Event).
func TestNewSystemEvents(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	ev := func(i int, source string) event.Event {
		return event.Event{Time: t0.Add(time.Duration(i) * time.Second), Source: source, Action: "a", Message: "m"}
	}
	data := func(log ...event.Event) []byte {
		b, err := json.Marshal(cluster.Cluster{ID: "c", Events: log})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	full := make([]event.Event, event.MaxEntries)
	for i := range full {
		full[i] = ev(i, "system")
	}
	// The same instant in another zone is the same entry.
	shifted := ev(1, "system")
	shifted.Time = shifted.Time.In(time.FixedZone("CST", 8*3600))
	folded := event.Append([]event.Event{ev(1, "system")}, ev(2, "system"))[0]
	foldedNow := event.Append([]event.Event{ev(1, "system")}, ev(1, "system"))[0]
	foldedAgain := event.Append([]event.Event{folded}, ev(3, "system"))[0]
	for _, c := range []struct {
		name          string
		before, after []byte
		want          []event.Event
	}{
		{"create", nil, data(ev(0, "user"), ev(1, "system")), []event.Event{ev(1, "system")}},
		{"unchanged", data(ev(0, "user"), ev(1, "system")), data(ev(0, "user"), shifted), nil},
		{"appended", data(ev(1, "system")), data(ev(1, "system"), ev(2, "user"), ev(3, "system")), []event.Event{ev(3, "system")}},
		{"bounded", data(full...), data(append(full[2:], ev(200, "system"), ev(201, "system"))...),
			[]event.Event{ev(200, "system"), ev(201, "system")}},
		{"repeated", data(ev(1, "system")), data(ev(1, "system"), ev(1, "system")), []event.Event{ev(1, "system")}},
		// A repeat folded into the last entry changes it: new, at once or later.
		{"folded", data(ev(1, "system")), data(folded), []event.Event{folded}},
		{"folded at the same instant", data(ev(1, "system")), data(foldedNow), []event.Event{foldedNow}},
		{"folded again", data(ev(0, "user"), folded), data(ev(0, "user"), foldedAgain), []event.Event{foldedAgain}},
		{"folded, unchanged", data(folded), data(folded), nil},
		{"no log", data(), []byte(`{"id":"c"}`), nil},
	} {
		got, err := newSystemEvents(c.before, c.after)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}
