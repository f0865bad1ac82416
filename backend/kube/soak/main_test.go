package soak_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/aidlc/dlc/dlctest/kubetest"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // KubeRay's reconcilers log through controller-runtime's global logger
	os.Exit(kubetest.RunMain(m))
}
