// Package event is the operation and event log every object of the
// platform keeps (a cluster's, a job config's, a run's, a cluster
// group's; C13): the user operations and the system's events, newest
// last, at most MaxEntries of them.
//
// # Folded entries
//
// What the system keeps doing is one entry, not one per time: a system
// entry (Source "system") appended right after an equal one (the same
// Source, Actor, Action and Message) is folded into it. The log's last
// entry then counts both (Count), its Time is the latest of them and its
// First the earliest. So a job config whose schedule skips every tick of
// a day for the same reason keeps one tick-skipped entry that says how
// many ticks, from when to when, and its log stays the same size. A
// fold only joins entries that follow each other: the log read with each
// entry repeated Count times is still every entry in the order they
// happened; only the times between First and Time are not kept. An entry
// that differs in its source, actor, action or message (a message that
// names a time or a count differs each time) is a new entry: what a
// system entry says should not change while the same thing repeats.
//
// A user's operations (Source "user") are never folded: each is kept,
// with its own time, even when a user does the same thing twice.
package event

import "time"

// Event is one entry of an object's operation and event log.
type Event struct {
	// Time is when it happened; of a folded entry (Count above 1), the
	// latest time.
	Time    time.Time `json:"time"`
	Source  string    `json:"source"` // "user" or "system"
	Actor   string    `json:"actor,omitempty"`
	Action  string    `json:"action"`
	Message string    `json:"message,omitempty"`
	// Count is how many times this entry happened, when more than once
	// (Append folds a repeated system entry into the one before it);
	// 0 or 1: once.
	Count int `json:"count,omitempty"`
	// First is when a folded entry first happened (Time is when it last
	// did); zero when it happened only once, or all its Count times at
	// Time.
	First time.Time `json:"first,omitzero"`
}

// Times is how many times e happened: its Count, or 1 when it has none.
func (e Event) Times() int { return max(e.Count, 1) }

// Since is when e first happened: First, or Time when it has none.
func (e Event) Since() time.Time {
	if e.First.IsZero() {
		return e.Time
	}
	return e.First
}

// folds reports whether Append folds e into last, a log's last entry:
// both are system entries with the same Source, Actor, Action and
// Message.
func folds(last, e Event) bool {
	return e.Source == "system" && last.Source == e.Source && last.Actor == e.Actor &&
		last.Action == e.Action && last.Message == e.Message
}

// MaxEntries is how many entries an object's log keeps: the oldest go
// first.
const MaxEntries = 100

// Append adds e to log, dropping the oldest entries past MaxEntries. A
// system entry with the same Source, Actor, Action and Message as log's
// last entry is folded into it instead: the last entry's Count adds up
// both (e's Count, when e has one, is how many times e happened), its
// Time is the later of the two and its First the earlier first time. An
// e of Count 1 or below is stored without one.
//
// Append changes no entry of the slice it is given: a fold returns a new
// slice with a changed copy of the last entry (the slice may be shared
// with a cached object, which readers see), so that a fold costs a copy
// of the log, at most MaxEntries entries, as an append to a full log
// does.
func Append(log []Event, e Event) []Event {
	if e.Count <= 1 {
		e.Count = 0
	}
	if n := len(log); n > 0 && folds(log[n-1], e) {
		out := make([]Event, min(n, MaxEntries))
		copy(out, log[n-len(out):])
		out[len(out)-1] = fold(log[n-1], e)
		return out
	}
	log = append(log, e)
	if len(log) > MaxEntries {
		log = append([]Event(nil), log[len(log)-MaxEntries:]...)
	}
	return log
}

// fold is last with e folded into it.
func fold(last, e Event) Event {
	first := last.Since()
	if s := e.Since(); s.Before(first) {
		first = s
	}
	if e.Time.After(last.Time) {
		last.Time = e.Time
	}
	last.Count = last.Times() + e.Times()
	if first.Equal(last.Time) {
		first = time.Time{} // all at Time
	}
	last.First = first
	return last
}
