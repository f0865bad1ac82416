package kube_test

import (
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/dlctest/kubetest"
)

// hybrid is the store on the API server with the simulated Ray.
type hybrid struct {
	*kube.Store
	*memory.Ray
}

// The conformance suite with the platform's state on a real API server
// (our CRDs, kube.Store) and Ray simulated.
func TestConformanceStoreOnAPIServer(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	d := memory.Delays{Create: time.Millisecond, Start: 3 * time.Millisecond, Hibernate: 2 * time.Millisecond,
		Delete: 2 * time.Millisecond, Submit: time.Millisecond, Run: 5 * time.Millisecond}
	dlctest.RunConformance(t, dlctest.Harness{
		RepairGrace: 3 * time.Second,  // an API server under -race takes longer than memory between two writes
		Timeout:     60 * time.Second, // and a loaded machine longer still to settle
		NewBackend: func(t *testing.T) dlc.Backend {
			ns := cp.NewNamespace(t)
			st, err := kube.NewStore(t.Context(), cp.Config(), ns, kube.StoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(st.Close)
			return hybrid{st, memory.NewRay(memory.RayOptions{Delays: &d})}
		},
	})
}
