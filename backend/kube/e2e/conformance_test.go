package e2e_test

import (
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/dlctest"
)

// The conformance suite on the Kubernetes backend: the platform's state in
// the API server, Ray through KubeRay's reconcilers, the kubelet stand-in
// and the Ray head stand-ins. The Faults test fails each Ray call that
// writes (and so must be idempotent when its reply is lost); every store
// write and every read is failed in turn by the store's own conformance
// run (backend/kube TestConformanceStoreOnAPIServer).
func TestConformance(t *testing.T) {
	w := getWorld(t)
	dlctest.RunConformance(t, dlctest.Harness{
		Timeout:     60 * time.Second,
		RepairGrace: 3 * time.Second,
		Options:     []dlc.Option{dlc.WithStepTimeout(30 * time.Second)},
		FaultOps:    []string{"ApplyCluster", "DeleteCluster", "SubmitRun", "StopRun"},
		NewBackend: func(t *testing.T) dlc.Backend {
			return w.backend(t, kube.Options{})
		},
		Autoscaler: func(t *testing.T, be dlc.Backend) func(string, string, int) {
			as, ns := w.cp.StartAutoscaler(t), be.(*kube.Backend).Namespace()
			return func(id, group string, workers int) { as.Demand(ns, id, group, workers) }
		},
	})
}
