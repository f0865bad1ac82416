package event_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc/event"
)

var t0 = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

// at is t0 plus i minutes.
func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }

func sys(i int, action, msg string) event.Event {
	return event.Event{Time: at(i), Source: "system", Action: action, Message: msg}
}

func TestAppendFolds(t *testing.T) {
	skipped := func(i int) event.Event {
		return sys(i, "tick-skipped", "a run of the job has not ended (concurrency policy Forbid)")
	}
	user := func(i int, actor, action string) event.Event {
		return event.Event{Time: at(i), Source: "user", Actor: actor, Action: action}
	}
	folded := func(e event.Event, count int, first time.Time) event.Event {
		e.Count, e.First = count, first
		return e
	}
	withActor := skipped(2)
	withActor.Actor = "scheduler"
	asUser := skipped(2)
	asUser.Source = "user"
	batch := func(i, count int) event.Event {
		return folded(sys(i, "tick-missed", "a later tick was due"), count, time.Time{})
	}
	for _, tc := range []struct {
		name string
		log  []event.Event
		e    event.Event
		want []event.Event
	}{
		{"into an empty log", nil, skipped(1), []event.Event{skipped(1)}},
		{"equal: folded", []event.Event{skipped(1)}, skipped(2), []event.Event{folded(skipped(2), 2, at(1))}},
		{"equal to a folded one: its count goes up, its first stays",
			[]event.Event{user(0, "alice", "create"), folded(skipped(2), 2, at(1))}, skipped(3),
			[]event.Event{user(0, "alice", "create"), folded(skipped(3), 3, at(1))}},
		{"equal, at the same time: counted, no first", []event.Event{skipped(1)}, skipped(1), []event.Event{folded(skipped(1), 2, time.Time{})}},
		{"equal, from a clock behind: the times stay in order", []event.Event{skipped(5)}, skipped(4),
			[]event.Event{folded(skipped(5), 2, at(4))}},
		{"a count given: added", []event.Event{batch(1, 3)}, batch(2, 2), []event.Event{folded(batch(2, 0), 5, at(1))}},
		{"a count of 1 given: stored without", []event.Event{skipped(1)}, folded(sys(2, "a", "m"), 1, time.Time{}),
			[]event.Event{skipped(1), sys(2, "a", "m")}},
		{"another message: new", []event.Event{skipped(1)}, sys(2, "tick-skipped", "other"),
			[]event.Event{skipped(1), sys(2, "tick-skipped", "other")}},
		{"another action: new", []event.Event{skipped(1)}, sys(2, "tick-missed", skipped(0).Message),
			[]event.Event{skipped(1), sys(2, "tick-missed", skipped(0).Message)}},
		{"another actor: new", []event.Event{skipped(1)}, withActor, []event.Event{skipped(1), withActor}},
		{"another source: new", []event.Event{skipped(1)}, asUser, []event.Event{skipped(1), asUser}},
		{"equal to an entry before the last: new (only the last folds)", []event.Event{skipped(1), sys(2, "running", "3 pods")}, skipped(3),
			[]event.Event{skipped(1), sys(2, "running", "3 pods"), skipped(3)}},
		{"a user's operations: each kept", []event.Event{user(1, "alice", "start")}, user(2, "alice", "start"),
			[]event.Event{user(1, "alice", "start"), user(2, "alice", "start")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.log)
			got := event.Append(tc.log, tc.e)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Append(%+v, %+v)\n got %+v\nwant %+v", in, tc.e, got, tc.want)
			}
			if !reflect.DeepEqual(tc.log, in) {
				t.Errorf("Append changed the slice it was given: %+v, was %+v", tc.log, in)
			}
		})
	}
}

// TestAppendBound: a log keeps its last MaxEntries entries, whether the
// entry appended is new or folded, and a repeated entry leaves it as
// long as it was.
func TestAppendBound(t *testing.T) {
	var log []event.Event
	for i := range event.MaxEntries + 10 {
		log = event.Append(log, sys(i, "a", fmt.Sprint(i)))
	}
	if len(log) != event.MaxEntries || log[0].Message != "10" || log[len(log)-1].Message != fmt.Sprint(event.MaxEntries+9) {
		t.Fatalf("%d entries, %s to %s", len(log), log[0].Message, log[len(log)-1].Message)
	}
	last := log[len(log)-1]
	for i := range 1000 {
		log = event.Append(log, sys(200+i, last.Action, last.Message))
	}
	if got := log[len(log)-1]; len(log) != event.MaxEntries || got.Count != 1001 || !got.First.Equal(last.Time) || !got.Time.Equal(at(1199)) {
		t.Fatalf("%d entries, the last %+v", len(log), got)
	}
	// A log longer than the bound (stored by someone else) is cut to it by
	// a fold too.
	long := slices.Repeat([]event.Event{sys(0, "a", "m")}, event.MaxEntries+5)
	if got := event.Append(long, sys(1, "a", "m")); len(got) != event.MaxEntries || got[len(got)-1].Count != 2 {
		t.Fatalf("a fold into a log of %d: %d entries, the last %+v", len(long), len(got), got[len(got)-1])
	}
}

// TestAppendSharesNothingChanged: a caller holding the slice Append was
// given (a cached object's log) sees none of its entries change when the
// appended one is folded, even where the slice has room to grow.
func TestAppendSharesNothingChanged(t *testing.T) {
	held := make([]event.Event, 2, 8)
	held[0], held[1] = sys(0, "created", ""), sys(1, "tick-skipped", "m")
	got := event.Append(held, sys(2, "tick-skipped", "m"))
	if held[1].Count != 0 || !held[1].Time.Equal(at(1)) {
		t.Fatalf("the held log's last entry changed: %+v", held[1])
	}
	if got[1].Count != 2 {
		t.Fatalf("not folded: %+v", got)
	}
	if full := held[:cap(held)]; full[2] != (event.Event{}) {
		t.Fatalf("a fold wrote past the held log's end: %+v", full[2])
	}
}

// TestEventJSON: an entry that happened once is stored as before, without
// count or first; a folded one with them.
func TestEventJSON(t *testing.T) {
	once, err := json.Marshal(sys(0, "a", "m"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(once); strings.Contains(s, "count") || strings.Contains(s, "first") {
		t.Errorf("an entry that happened once: %s", s)
	}
	log := event.Append(event.Append(nil, sys(0, "a", "m")), sys(1, "a", "m"))
	b, err := json.Marshal(log[0])
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"time":"2026-03-14T09:01:00Z","source":"system","action":"a","message":"m","count":2,"first":"2026-03-14T09:00:00Z"}`
	if string(b) != want {
		t.Errorf("a folded entry: %s, want %s", b, want)
	}
	var back event.Event
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, log[0]) {
		t.Errorf("read back: %+v, %v; want %+v", back, err, log[0])
	}
}

func TestTimesSince(t *testing.T) {
	once := sys(3, "a", "m")
	if once.Times() != 1 || !once.Since().Equal(at(3)) {
		t.Errorf("once: %d times since %s", once.Times(), once.Since())
	}
	folded := event.Append([]event.Event{sys(1, "a", "m")}, once)[0]
	if folded.Times() != 2 || !folded.Since().Equal(at(1)) {
		t.Errorf("folded: %d times since %s", folded.Times(), folded.Since())
	}
}
