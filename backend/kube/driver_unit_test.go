package kube

import (
	"testing"
	"time"

	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A job's driver is gone when no running pod has its node's IP, or when
// the pod that has it restarted its Ray container after Ray accepted the
// job (both times off the node's clock).
func TestDriverGone(t *testing.T) {
	accepted := time.Date(2026, 12, 6, 1, 0, 10, 500e6, time.UTC) // 10.5 s
	pod := func(ip string, started time.Time, more ...string) corev1.Pod {
		p := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			ContainerStatuses: []corev1.ContainerStatus{{Name: HeadContainer,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started.Truncate(time.Second))}}}}}}
		for _, m := range more {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: m})
		}
		return p
	}
	worker := func(p corev1.Pod) corev1.Pod { p.Status.ContainerStatuses[0].Name = WorkerContainer; return p }
	gone := func(p corev1.Pod) corev1.Pod { p.DeletionTimestamp = &metav1.Time{Time: accepted}; return p }
	before := accepted.Add(-time.Minute)
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		ip   string
		want bool
	}{
		{"its pod runs", []corev1.Pod{pod("10.0.0.1", before)}, "10.0.0.1", false},
		{"a worker's pod runs it", []corev1.Pod{pod("10.0.0.1", before), pod("10.0.0.2", before)}, "10.0.0.2", false},
		{"its IP is the pod's second (dual stack)", []corev1.Pod{pod("10.0.0.1", before, "10.0.0.1", "fd00::1")}, "fd00::1", false},
		{"no pod has its IP: the head was replaced", []corev1.Pod{pod("10.0.0.9", accepted.Add(time.Minute))}, "10.0.0.1", true},
		{"its pod is being deleted", []corev1.Pod{gone(pod("10.0.0.1", before))}, "10.0.0.1", true},
		{"its pod's Ray restarted after the job", []corev1.Pod{pod("10.0.0.1", accepted.Add(2*time.Second))}, "10.0.0.1", true},
		{"its pod's Ray started in the second of the job, before it", []corev1.Pod{pod("10.0.0.1", accepted.Add(-100*time.Millisecond))}, "10.0.0.1", false},
		{"no pods", nil, "10.0.0.1", true},
		{"a worker that started after the job (its driver waited for it)", []corev1.Pod{worker(pod("10.0.0.2", accepted.Add(time.Minute)))}, "10.0.0.2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := &JobInfo{RayJobInfo: utiltypes.RayJobInfo{JobStatus: "RUNNING", StartTime: uint64(accepted.UnixMilli())},
				DriverAgentHTTPAddress: "http://" + hostPort(tc.ip)}
			if got := driverGone(tc.pods, info); got != tc.want {
				t.Fatalf("driverGone = %v, want %v", got, tc.want)
			}
		})
	}
}

func hostPort(ip string) string {
	if len(ip) > 0 && ip[0] == 'f' {
		return "[" + ip + "]:52365"
	}
	return ip + ":52365"
}

// What a plan shows of a package URL: where it is, never its signature.
func TestWithoutSignature(t *testing.T) {
	for in, want := range map[string]string{
		"https://jobs-1250000000.cos.ap-guangzhou.myqcloud.com/a/job.zip?q-sign-algorithm=sha1&q-signature=SECRET": "https://jobs-1250000000.cos.ap-guangzhou.myqcloud.com/a/job.zip?" + PlanSignature,
		"https://user:pw@h.example/job.zip?x=1#f": "https://h.example/job.zip?" + PlanSignature,
		"s3://jobs-1250000000/a/job.zip":          "s3://jobs-1250000000/a/job.zip",
		"file:///tmp/job.zip":                     "file:///tmp/job.zip",
	} {
		if got := withoutSignature(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
