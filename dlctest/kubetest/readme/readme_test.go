// Package readme_test is docs/testing.md's control-plane snippet, as a test
// package of its own (it has its TestMain): TestReadmeSnippets, in the
// repository's root, checks the region against docs/testing.md.
package readme_test

import (
	"os"
	"testing"

	"github.com/aidlc/dlc/dlctest/kubetest"
)

// snippet controlplane
func TestMain(m *testing.M) { os.Exit(kubetest.RunMain(m)) }

func TestRayCluster(t *testing.T) {
	cp := kubetest.StartControlPlane(t) // the package's shared control plane
	ns := cp.NewNamespace(t)            // a namespace of this test's own
	t.Log(ns, cp.Client())              // ... create objects in ns with cp.Client() ...
}

// end snippet controlplane
