// Package event is the operation and event log every object of the
// platform keeps (a cluster's, a job config's, a run's, a cluster
// group's; C13): the user operations and the system's events, newest
// last, at most MaxEntries of them.
package event

import "time"

// Event is one entry of an object's operation and event log.
type Event struct {
	Time    time.Time `json:"time"`
	Source  string    `json:"source"` // "user" or "system"
	Actor   string    `json:"actor,omitempty"`
	Action  string    `json:"action"`
	Message string    `json:"message,omitempty"`
}

// MaxEntries is how many entries an object's log keeps: the oldest go
// first.
const MaxEntries = 100

// Append adds e to log, dropping the oldest entries past MaxEntries.
func Append(log []Event, e Event) []Event {
	log = append(log, e)
	if len(log) > MaxEntries {
		log = append([]Event(nil), log[len(log)-MaxEntries:]...)
	}
	return log
}
