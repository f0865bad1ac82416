package kube_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/quota"
)

// Reservations settled out of their resource group on the API server:
// more starts in one group than the account keeps pending, through two
// clients each on a store of its own (two replicas), then every cluster
// hibernated. The settled reservations are ConfigMaps; every client, a
// new one too, reads the same ones; the ResourceGroup never grows past a
// few KB; CheckQuota is clean at the end of each half.
func TestSettledReservationsOnAPIServer(t *testing.T) {
	const clusters = 40 // more than the 32 an account keeps before its reconciler settles
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	ctx, cancel := context.WithTimeout(dlc.WithUser(t.Context(), "holds"), 3*time.Minute)
	defer cancel()
	d := memory.Delays{Create: time.Millisecond, Start: 3 * time.Millisecond, Hibernate: 2 * time.Millisecond, Delete: 2 * time.Millisecond}
	ray := memory.NewRay(memory.RayOptions{Delays: &d}) // one Ray for both replicas
	store := func() *kube.Store {
		st, err := kube.NewStore(t.Context(), cp.Config(), ns, kube.StoreOptions{NoEvents: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	newClient := func() *dlc.Client {
		c, err := dlc.New(dlc.WithBackend(hybrid{store(), ray}), dlc.WithRetries(20, time.Millisecond, 100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	var largest atomic.Int64
	if _, err := store().Watch(ctx, func(ch backend.Change) {
		if ch.Doc.Kind == "resourcegroup" && int64(len(ch.Doc.Data)) > largest.Load() {
			largest.Store(int64(len(ch.Doc.Data)))
		}
	}); err != nil {
		t.Fatal(err)
	}
	a, b := newClient(), newClient()
	if _, err := a.ResourceGroups().Register(ctx, quota.Group{ID: "rg", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 8000 * clusters, Memory: 16 * quota.GiB * clusters}}); err != nil {
		t.Fatal(err)
	}
	g, err := a.Groups().Create(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, clusters)
	for i := range ids {
		spec, err := dlc.NewCluster(fmt.Sprintf("c%02d", i)).Groups(g.ID).Resources("pkg-1", "rg").Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("w", "cu.4c8g", 1, 1).Build()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := a.Clusters().Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = cl.ID
	}
	each := func(what string, f func(c *dlc.Client, id string) error) {
		t.Helper()
		var wg sync.WaitGroup
		errc := make(chan error, clusters)
		for i, id := range ids {
			c := a
			if i%2 == 1 {
				c = b
			}
			wg.Go(func() {
				if err := f(c, id); err != nil {
					errc <- fmt.Errorf("%s %s: %w", what, id, err)
				}
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Fatal(err)
		}
	}
	each("create", func(c *dlc.Client, id string) error {
		_, err := c.Clusters().Wait(ctx, id, cluster.InState(cluster.Created))
		return err
	})
	each("start", func(c *dlc.Client, id string) error {
		if _, err := c.Clusters().Start(ctx, id); err != nil {
			return err
		}
		_, err := c.Clusters().Wait(ctx, id, cluster.InState(cluster.Running))
		return err
	})
	want := quota.Resources{MilliCPU: 8000 * clusters, Memory: 16 * quota.GiB * clusters}
	settled := func(what string, held quota.Resources, holders int) {
		t.Helper()
		// The reconciler settles once 32 are pending: wait for the
		// documents, then compare every client's view, a new one's too.
		deadline := time.Now().Add(time.Minute)
		for {
			var cms v1alpha1.StoreEntryList
			if err := cp.Client().List(ctx, &cms, client.InNamespace(ns), client.MatchingLabels{kube.StoreKeyKind: "hold"}); err != nil {
				t.Fatal(err)
			}
			if len(cms.Items) >= 32 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d reservation StoreEntries after a minute, want 32 or more settled", what, len(cms.Items))
			}
			time.Sleep(20 * time.Millisecond) // polls a condition; no timing is assumed
		}
		for i, c := range []*dlc.Client{a, b, newClient()} {
			deadline := time.Now().Add(time.Minute)
			for {
				u, err := c.ResourceGroups().Get(ctx, "rg")
				if err != nil {
					t.Fatal(err)
				}
				if u.Reserved == held && len(u.Holders) == holders {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: client %d reads %s reserved by %d holders (%v), want %s by %d; stored: %s", what, i, u.Reserved, len(u.Holders), u.Holders, held, holders, storedHolds(ctx, store(), "rg", u.Holders))
				}
				time.Sleep(20 * time.Millisecond) // polls a condition; no timing is assumed
			}
			if err := c.CheckQuota(ctx); err != nil {
				t.Errorf("%s: client %d: CheckQuota: %v", what, i, err)
			}
		}
	}
	settled("after the starts", want, clusters)
	each("hibernate", func(c *dlc.Client, id string) error {
		if _, err := c.Clusters().Hibernate(ctx, id, dlc.DeleteOptions{}); err != nil {
			return err
		}
		_, err := c.Clusters().Wait(ctx, id, cluster.InState(cluster.Hibernated))
		return err
	})
	settled("after the hibernates", quota.Resources{}, 0)
	if n := largest.Load(); n > 16<<10 {
		t.Errorf("the resource group was written at %d bytes; want a few KB with 40 holders", n)
	}
	t.Logf("the resource group's largest write: %d bytes, %d holders", largest.Load(), clusters)
}

// storedHolds says what the API server stores of the resource group rg
// and of the hold documents of holders, for a failure message.
func storedHolds(ctx context.Context, st *kube.Store, rg string, holders map[string]quota.Resources) string {
	var b strings.Builder
	ids := []string{"resourcegroup/" + rg}
	for h := range holders {
		ids = append(ids, "hold/"+rg+"."+h)
	}
	for _, key := range ids {
		kind, id, _ := strings.Cut(key, "/")
		d, err := st.GetLatest(ctx, kind, id)
		if err != nil {
			fmt.Fprintf(&b, "\n%s: %v", key, err)
			continue
		}
		fmt.Fprintf(&b, "\n%s v%s: %s", key, d.Version, d.Data)
	}
	return b.String()
}
