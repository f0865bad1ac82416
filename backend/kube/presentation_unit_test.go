package kube

import (
	"testing"

	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/quota"
)

func TestCores(t *testing.T) {
	for _, tc := range []struct {
		milli int64
		want  string
	}{
		{0, "0"}, {1000, "1"}, {64000, "64"}, {12500, "12.5"}, {250, "0.25"}, {1, "0.001"}, {4010, "4.01"},
		{-1500, "-1.5"}, {1<<63 - 1, "9223372036854775.807"}, {-1 << 63, "-9223372036854775.807"},
	} {
		if got := cores(tc.milli); got != tc.want {
			t.Errorf("cores(%d) = %q, want %q", tc.milli, got, tc.want)
		}
	}
}

func TestBytesOf(t *testing.T) {
	for _, tc := range []struct {
		a, b int64
		want string
	}{
		{0, 0, "0/0"},
		{0, 256 * quota.GiB, "0Gi/256Gi"},
		{48 * quota.GiB, 256 * quota.GiB, "48Gi/256Gi"},
		{quota.GiB / 2, 8 * quota.GiB, "0.5Gi/8Gi"},
		{3 * quota.GiB / 2, 8 * quota.GiB, "1.5Gi/8Gi"},
		{512 << 20, 768 << 20, "512Mi/768Mi"},
		{100 << 20, 2 * quota.GiB, "0.1Gi/2Gi"},
		{1024 * quota.GiB, 2048 * quota.GiB, "1Ti/2Ti"},
		{1000, 1000, "1000/1000"},
		{1 << 62, 1<<63 - 1, "4Ei/8Ei"},
	} {
		if got := bytesOf(tc.a, tc.b); got != tc.want {
			t.Errorf("bytesOf(%d, %d) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestRanFor(t *testing.T) {
	const start = "2026-03-14T09:26:53.589793238Z"
	for _, tc := range []struct {
		name, started, finished, want string
	}{
		{"running", start, "", ""},
		{"never started", "", "2026-03-14T09:27:00Z", ""},
		{"seconds", start, "2026-03-14T09:27:38.589793238Z", "45s"},
		{"minutes", start, "2026-03-14T09:30:05.9Z", "3m12s"},
		{"days", start, "2026-03-16T14:27:00Z", "2d5h"},
		{"finished before it started", start, "2026-03-14T09:20:00Z", "0s"},
		{"not a time", "yesterday", start, ""},
	} {
		if got := ranFor(tc.started, tc.finished); got != tc.want {
			t.Errorf("%s: ranFor(%q, %q) = %q, want %q", tc.name, tc.started, tc.finished, got, tc.want)
		}
	}
}

// TestPresent: what the store derives on each kind it derives anything for.
func TestPresent(t *testing.T) {
	cc := &v1alpha1.ComputeCluster{Spec: v1alpha1.ComputeClusterSpec{Temporary: true}}
	standing := &v1alpha1.ComputeCluster{}
	standing.SetLabels(map[string]string{"other": "kept"})
	rg := &v1alpha1.ResourceGroup{
		Spec: v1alpha1.ResourceGroupSpec{Capacity: v1alpha1.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB, GPU: 8}},
		Status: v1alpha1.ResourceGroupStatus{Reserved: v1alpha1.Resources{MilliCPU: 12500, Memory: 48 * quota.GiB, GPU: 2},
			Pending: map[string]v1alpha1.Hold{
				"cls-a": v1alpha1.Hold(quota.Hold{Resources: quota.Resources{MilliCPU: 8000, Memory: 32 * quota.GiB, GPU: 2}}.Encode()),
				"od-b":  v1alpha1.Hold(quota.Hold{Resources: quota.Resources{MilliCPU: 4500, Memory: 16 * quota.GiB}}.Encode()),
				"od-c":  v1alpha1.Hold(quota.Hold{}.Encode()), // a release
			}},
	}
	run := &v1alpha1.Run{Status: v1alpha1.RunStatus{StartedAt: "2026-03-14T09:00:00Z", FinishedAt: "2026-03-14T10:30:00Z"}}
	present(cc)
	present(standing)
	present(rg)
	present(run)
	if cc.Labels[v1alpha1.LabelOnDemand] != "true" || standing.Labels[v1alpha1.LabelOnDemand] != "false" || standing.Labels["other"] != "kept" {
		t.Errorf("labels: on-demand %v, standing %v", cc.Labels, standing.Labels)
	}
	want := v1alpha1.ResourceGroupSummary{CPU: "12.5/64", Memory: "48Gi/256Gi", GPU: "2/8", Pending: 3}
	if rg.Status.Summary != want || rg.Status.Reserved != (v1alpha1.Resources{MilliCPU: 12500, Memory: 48 * quota.GiB, GPU: 2}) {
		t.Errorf("resource group: reserved %+v summary %+v, want %+v", rg.Status.Reserved, rg.Status.Summary, want)
	}
	if run.Status.Summary.Duration != "90m" {
		t.Errorf("run duration %q, want 90m", run.Status.Summary.Duration)
	}
}
