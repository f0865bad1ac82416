package kube_test

import (
	"fmt"
	"runtime"
	"testing"
	"weak"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/dlctest/kubetest"
)

// TestClosedBackendFreed: once Close returns, nothing of the backend runs
// any more, so what its informers cached (hundreds of MiB at 10,000
// clusters) can be freed: the store and the provisioner are unreachable
// at the next garbage collection. Close used to cancel the informers and
// return while they still ran, holding the store through their handlers.
func TestClosedBackendFreed(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	seed, err := kube.NewStore(t.Context(), cp.Config(), ns, kube.StoreOptions{NoEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := seed.Create(t.Context(), backend.Doc{Kind: "hold", ID: fmt.Sprintf("rg.cls-%d", i), Data: []byte(`{"resourceGroup":"rg"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	seed.Close()
	for attempt := range 5 {
		be, err := kube.New(t.Context(), cp.Config(), kube.Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		if docs, err := be.Store.List(t.Context(), "hold", nil); err != nil || len(docs) != 50 {
			t.Fatalf("the backend's cache: %d holds, %v", len(docs), err)
		}
		store, prov := weak.Make(be.Store), weak.Make(be.Provisioner)
		be.Close()
		be = nil
		runtime.GC()
		if store.Value() != nil || prov.Value() != nil {
			t.Fatalf("attempt %d: closed, and still reachable: store %v, provisioner %v", attempt, store.Value() != nil, prov.Value() != nil)
		}
	}
}
