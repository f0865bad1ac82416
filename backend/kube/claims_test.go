package kube_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// countingTransport counts the API calls that match.
type countingTransport struct {
	rt    http.RoundTripper
	n     *atomic.Int64
	match func(*http.Request) bool
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.match(r) {
		c.n.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// onStoreEntries matches the calls on StoreEntries but watches.
func onStoreEntries(r *http.Request) bool {
	return strings.Contains(r.URL.Path, "/storeentries") && r.URL.Query().Get("watch") != "true"
}

// A StoreEntry someone made under the name of a cluster name's claim (a
// public function of the name), without the store's label: Create is a
// conflict that names it, after a bounded number of API calls, not a loop
// until the context ends. (Only an administrator can: no other role
// writes StoreEntries, and admission refuses every writer but the
// backend in the enforced namespaces.)
func TestForeignClaimEntry(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	var calls atomic.Int64
	cfg := cp.Config()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &calls, onStoreEntries} })
	st, err := kube.NewStore(t.Context(), cfg, ns, kube.StoreOptions{NoEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	c, err := dlc.New(dlc.WithBackend(hybrid{st, memory.NewRay(memory.RayOptions{})}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := dlc.WithUser(t.Context(), "alice")
	if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	g, err := c.Groups().Create(ctx, "组")
	if err != nil {
		t.Fatal(err)
	}

	const name = "占用的名字"
	sum := sha256.Sum256([]byte("name\x00cluster:" + name))
	cmName := "x-" + hex.EncodeToString(sum[:20])
	squat := &v1alpha1.StoreEntry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cmName}, Data: `{"x":"y"}`}
	if err := cp.Client().Create(t.Context(), squat); err != nil {
		t.Fatal(err)
	}

	spec, err := dlc.NewCluster(name).Groups(g.ID).Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	before := calls.Load()
	start := time.Now()
	_, err = c.Clusters().Create(cctx, spec)
	var ce *errs.ConflictError
	if !errors.Is(err, errs.ErrConflict) || !errors.As(err, &ce) || !strings.Contains(err.Error(), cmName) {
		t.Fatalf("Create: %v, want a conflict naming StoreEntry %s", err, cmName)
	}
	n := calls.Load() - before
	t.Logf("refused in %v after %d StoreEntry calls: %v", time.Since(start), n, err)
	// At most three attempts, each a create, the store's look at what
	// answered AlreadyExists, and the client's read of the claim past the
	// cache: nine calls (before, it looped until its context ended).
	if n > 9 {
		t.Fatalf("%d StoreEntry calls: want at most 9", n)
	}
	// The cluster was stored while its name was being claimed: it is
	// undone (deleted, saying why), and nothing of it stays.
	waitUntil(t, "the refused create's cluster gone", func() bool {
		l, err := c.Clusters().List(ctx)
		return err == nil && len(l) == 0
	})
}
