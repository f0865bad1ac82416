package platform

import (
	"slices"
	"testing"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/job"
)

// The list order of a job's runs follows creates, deletes, state changes
// (no move) and an edit from outside of a run's job or submission time.
func TestRunOrder(t *testing.T) {
	o := newRunOrder()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(id, jobID string, at time.Duration, state job.RunState) {
		o.observe(backend.Doc{Kind: kindRun, ID: id}, &job.Run{ID: id, JobID: jobID, SubmittedAt: t0.Add(at), State: state})
	}
	ids := func(jobID string, from *pageKey) []string {
		var out []string
		for _, k := range o.keys(jobID, from, 1<<20) {
			out = append(out, k.ID)
		}
		return out
	}
	put("c", "j", 2, job.Queued)
	put("a", "j", 1, job.Queued)
	put("b", "j", 1, job.Queued) // the same instant as a: by id
	put("x", "k", 0, job.Queued)
	if got := ids("j", nil); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("order %v", got)
	}
	if got := o.keys("j", nil, 2); len(got) != 2 || got[1].ID != "b" {
		t.Fatalf("a chunk of two: %v", got)
	}
	put("a", "j", 1, job.Running) // a state change: no move
	if got := ids("j", &pageKey{t0.Add(1), "a"}); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("after a: %v", got)
	}
	put("c", "j", 0, job.Running) // edited from outside: submitted earlier
	put("b", "k", 1, job.Queued)  // and moved to another job
	if got := ids("j", nil); !slices.Equal(got, []string{"c", "a"}) {
		t.Errorf("after the edits: %v", got)
	}
	if got := ids("k", nil); !slices.Equal(got, []string{"x", "b"}) {
		t.Errorf("job k: %v", got)
	}
	o.observe(backend.Doc{Kind: kindRun, ID: "c"}, nil) // deleted
	o.observe(backend.Doc{Kind: kindRun, ID: "a"}, nil)
	if got := ids("j", nil); len(got) != 0 || len(o.byJob) != 1 || len(o.keyOf) != 2 {
		t.Errorf("after the deletes: %v, %d jobs, %d runs", got, len(o.byJob), len(o.keyOf))
	}
}
