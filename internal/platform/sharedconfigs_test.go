package platform

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/job"
)

// TestRunsShareTheirJobConfigsConfig: a run the cache decodes whose config
// is its job config's current one shares that one's strings, maps and
// slices (and still reads the same); a run of another revision, or of a
// config the cache has not (or no longer) seen, keeps its own.
func TestRunsShareTheirJobConfigsConfig(t *testing.T) {
	sc := newSharedConfigs()
	derive := derivers(sc)
	doc := func(kind, id string, v any) backend.Doc {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return backend.Doc{Kind: kind, ID: id, Version: "1", Data: data}
	}
	decoded := func(d backend.Doc) any {
		_, obj, err := derive[d.Kind](d)
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	cfg := job.Config{Name: "train", Group: "g", Entrypoint: "python train.py --epochs 3",
		Tags: map[string]string{"team": "a"}, Advanced: map[string]string{"k": "v"}}
	old := cfg
	old.Entrypoint = "python train.py --epochs 1"
	rec := decoded(doc(kindJob, "job-1", &job.Record{ID: "job-1", Config: cfg, Revision: 2})).(*job.Record)
	shares := func(r *job.Run) bool {
		return unsafe.StringData(r.Config.Entrypoint) == unsafe.StringData(rec.Config.Entrypoint) &&
			reflect.ValueOf(r.Config.Tags).UnsafePointer() == reflect.ValueOf(rec.Config.Tags).UnsafePointer()
	}
	for _, tc := range []struct {
		name   string
		run    job.Run
		shares bool
	}{
		{"of the current revision", job.Run{ID: "run-1", JobID: "job-1", Revision: 2, Config: cfg}, true},
		{"of an older revision", job.Run{ID: "run-2", JobID: "job-1", Revision: 1, Config: old}, false},
		{"of a config not seen", job.Run{ID: "run-3", JobID: "job-2", Revision: 1, Config: cfg}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := decoded(doc(kindRun, tc.run.ID, &tc.run)).(*job.Run)
			if got := shares(r); got != tc.shares {
				t.Errorf("shares the job config's config: %v, want %v", got, tc.shares)
			}
			if !reflect.DeepEqual(r.Config, tc.run.Config) {
				t.Errorf("the run's config reads %+v, want %+v", r.Config, tc.run.Config)
			}
		})
	}
	sc.forget("job-1")
	if r := decoded(doc(kindRun, "run-4", &job.Run{ID: "run-4", JobID: "job-1", Revision: 2, Config: cfg})).(*job.Run); shares(r) {
		t.Error("a run of a deleted job config shares its config")
	}
}
