package v1alpha1_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	v1 "github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/storage"
)

// roundTrip decodes the JSON of in into mid and mid's JSON back into out.
func roundTrip(t *testing.T, in, mid, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, mid); err != nil {
		t.Fatal(err)
	}
	b, err = json.Marshal(mid)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

// TestDomainJSON checks the doc's promise: a spec has the JSON shape of the
// domain value it holds, so the store converts by JSON without loss.
func TestDomainJSON(t *testing.T) {
	env := cluster.Environment{
		Image: "ray:2.9",
		Head:  cluster.HeadGroup{NodeGroup: cluster.NodeGroup{Name: "head", NodeSpec: "CU4", Resources: map[string]float64{"x": 0.5}}, HighAvailability: true},
		Workers: []cluster.WorkerGroup{{NodeGroup: cluster.NodeGroup{Name: "w", NodeSpec: "GU1", Env: map[string]string{"A": "b"}},
			Instances: cluster.Instances{Min: 0, Max: new(2)}}},
	}
	mounts := []storage.Mount{{Type: "cos", Instance: "b-1250000000", MountPath: "/data", ReadOnly: true}}
	for _, tc := range []struct {
		name    string
		in, mid any
		out     func() any
	}{
		{"cluster.Spec", &cluster.Spec{Name: "集群", Groups: []string{"g-1"}, Priority: new(3), Tags: map[string]string{"k": "v"},
			ResourcePackage: "p", ResourceGroup: "rg", Environment: env, Mounts: mounts, Advanced: map[string]string{"num-cpus": "2"},
			IdleTimeoutSeconds: 1800},
			&v1.ComputeClusterSpec{}, func() any { return &cluster.Spec{} }},
		{"cluster.Template", &cluster.Template{Name: "t", Description: "d", Environment: env},
			&v1.ClusterTemplateSpec{}, func() any { return &cluster.Template{} }},
		{"job.Config", &job.Config{Name: "j", OnDemand: &job.OnDemand{ResourcePackage: "p", ResourceGroup: "rg", Priority: new(9), Environment: env},
			Package: storage.Package{COS: "cos://b-1250000000/a.zip"}, Entrypoint: "python main.py", Mounts: mounts,
			Runtime:               job.RuntimeEnv{Pip: []string{"torch"}, EnvVars: map[string]string{"A": "b"}},
			Schedule:              &job.Schedule{Cron: "0 2 * * *", TimeZone: "Asia/Shanghai", ConcurrencyPolicy: job.ForbidConcurrent, StartingDeadlineSeconds: new(600)},
			ActiveDeadlineSeconds: 3600, BackoffLimit: 2},
			&v1.JobConfigBody{}, func() any { return &job.Config{} }},
		{"event.Event", &event.Event{Time: time.Date(2026, 3, 14, 9, 1, 0, 5, time.UTC), Source: "system", Action: "tick-skipped",
			Message: "m", Count: 3, First: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)},
			&v1.Event{}, func() any { return &event.Event{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.out()
			roundTrip(t, tc.in, tc.mid, out)
			if !reflect.DeepEqual(tc.in, out) {
				t.Errorf("round trip through %T changed it:\n got %+v\nwant %+v", tc.mid, out, tc.in)
			}
		})
	}
}
