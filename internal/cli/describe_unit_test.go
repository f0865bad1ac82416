package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc/event"
)

// TestDescribeEventsFolded: a folded entry shows how many times it
// happened, and over how long, as kubectl describe shows a repeated
// Event.
func TestDescribeEventsFolded(t *testing.T) {
	now := time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)
	skipped := event.Event{Time: now.Add(-38 * time.Minute), Source: "system", Action: "tick-skipped",
		Message: "a run of the job has not ended (concurrency policy Forbid)"}
	log := []event.Event{{Time: now.Add(-time.Hour), Source: "user", Actor: "alice", Action: "create", Message: "j"}, skipped}
	for i := 37; i >= 2; i-- {
		skipped.Time = now.Add(-time.Duration(i) * time.Minute)
		log = event.Append(log, skipped)
	}
	batch := event.Event{Time: now.Add(-time.Minute), Source: "system", Action: "tick-missed", Message: "a later tick was due", Count: 3}
	log = event.Append(log, batch)
	var b bytes.Buffer
	(&describer{w: &b, now: now}).events(log)
	got := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{
		"60m user alice create j",
		"2m (x37 over 38m) system <none> tick-skipped a run of the job has not ended (concurrency policy Forbid)",
		"60s (x3) system <none> tick-missed a later tick was due",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}
