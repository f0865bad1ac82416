package soak_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube/internal/loadtest"
	"github.com/aidlc/dlc/job"
)

// The harness's own arithmetic, which runs without a control plane (and
// so in CI, where TestSoak skips).
func TestHarnessHelpers(t *testing.T) {
	var rows []row
	for m := 1; m <= 12; m++ {
		r := row{elapsed: time.Duration(m) * time.Minute, heaps: []uint64{100 << 20, uint64(100+10*m) << 20},
			stored: map[string][2]int{"run": {500, 1 << 20}}, writesPerS: 20}
		rows = append(rows, r)
	}
	vs := flat(rows, 3*time.Minute, 0.10, seriesOf(rows, 2))
	got := map[string]bool{}
	for _, v := range vs {
		got[v.name] = v.grows
	}
	if got["replica-0 heap (MiB)"] || !got["replica-1 heap (MiB)"] || got["run stored"] || got["API writes/s"] {
		t.Errorf("verdicts: %v", got)
	}
	if vs := flat(rows, 10*time.Minute, 0.10, seriesOf(rows, 2)); vs != nil {
		t.Errorf("two rows judged: %v", vs)
	}

	tab := loadtest.Table([]string{"a", "bb"}, [][]string{{"ccc", "d"}})
	if want := "| a   | bb  |\n| --- | --- |\n| ccc | d   |\n"; tab != want {
		t.Errorf("table:\n%s\nwant\n%s", tab, want)
	}
	if got, want := anonymise("start cls-abc123 in rg-3: Put \"https://127.0.0.1:4431/x\""), "start cls-… in rg-…: Put \"https://…/x\""; got != want {
		t.Errorf("anonymise: %q, want %q", got, want)
	}

	// A tick with two runs is caught, a tick's run seen again is not.
	tr := newTracker(time.Now)
	tick := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, id := range []string{"run-a", "run-a", "run-b"} {
		tr.on(backend.Change{Doc: backend.Doc{Kind: "run", ID: id, Labels: map[string]string{},
			Data: mustJSON(t, job.Run{ID: id, JobID: "job-1", State: job.Queued, Tick: tick})}})
	}
	if c := tr.ticksNow(time.Minute); len(c.twice) != 1 {
		t.Errorf("ticks with two runs: %v", c.twice)
	}
	if tot := tr.totals(); tot.made != 2 {
		t.Errorf("runs made: %d", tot.made)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
