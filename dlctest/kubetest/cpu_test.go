package kubetest_test

import (
	"fmt"
	goruntime "runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aidlc/dlc/dlctest/kubetest"
)

// TestCPUNow: the control plane this process started runs as its
// children, so that CPUNow reads their CPU time and this process's, and
// what it reads only grows.
func TestCPUNow(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("CPUNow reads /proc")
	}
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	before := kubetest.CPUNow()
	if !before.Known() || before.Self <= 0 || before.Etcd <= 0 {
		t.Fatalf("CPUNow after the control plane started = %+v, want each part above zero", before)
	}
	for i := range 50 {
		if err := cp.Client().Create(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cpu-%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	used := kubetest.CPUNow().Sub(before)
	if used.Self < 0 || used.APIServer < 0 || used.Etcd < 0 {
		t.Fatalf("CPU used over 50 creates = %+v, want none negative", used)
	}
	t.Logf("50 ConfigMap creates: %+v", used)
}
