package dlc_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/quota"
)

// A growth granted in the queue's turn is Ray's autoscaler's to use: its
// ceiling is not given back to a waiter of the cluster's priority or
// above before the autoscaler has seen it (it was, at the next
// observation, the grant lost), for up to the repair grace; used, it is
// Ray's; unused past the grace, it goes to what waits.
func TestGrantedGrowthKeptUntilTheAutoscalerUsesIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		uses bool // the autoscaler takes the worker granted
	}{
		{"used", true},
		{"unused past the grace", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const grace = 30 * time.Second
			f := newQueueFixture(t, 24, dlc.WithRepairGrace(grace))
			a := f.started("a", 1, 5, 0, 4)[0]         // head 4 + a worker of headroom: 8 cores
			fillers := f.started("filler", 2, 5, 1, 1) // 16 cores: the group is full
			f.ray.autoscale(a, "cpu", 1)               // the autoscaler takes the worker lent, asks one more
			f.settle()
			if g := f.cluster(a).Growth; g == nil || g.Want != 2 {
				t.Fatalf("growth %+v, want 2 waiting", g)
			}
			run := f.submit("od", 5, 1) // 8 cores at the cluster's priority, behind its growth
			f.settle()
			if _, err := f.c.Clusters().Hibernate(f.ctx, fillers[0], dlc.HibernateOptions{}); err != nil {
				t.Fatal(err)
			}
			// 8 cores free: the growth (4) first; the run (8) does not fit
			// the rest, and waits at the cluster's priority. Within the
			// grace, the autoscaler not yet at the new ceiling:
			f.m.Settle(100*time.Millisecond, int(grace/(100*time.Millisecond))/2)
			cl := f.cluster(a)
			if cl.Replicas["cpu"] != 2 || cl.Granted == nil || cl.Granted.Want != 2 {
				t.Fatalf("within the grace: replicas %d, granted %+v; want the grant of 2 kept", cl.Replicas["cpu"], cl.Granted)
			}
			if !f.waiting(run) {
				t.Fatal("the run took the growth's quota")
			}
			if tc.uses {
				f.ray.autoscale(a, "cpu", 2)
			}
			f.m.Step(grace)
			f.settle()
			cl = f.cluster(a)
			if cl.Granted != nil {
				t.Errorf("the grant's record stays: %+v", cl.Granted)
			}
			if tc.uses {
				if cl.Replicas["cpu"] != 2 {
					t.Errorf("used, the grant was taken back: replicas %d", cl.Replicas["cpu"])
				}
				if !f.waiting(run) {
					t.Error("the run got quota the autoscaler runs")
				}
				return
			}
			if cl.Replicas["cpu"] != 1 || len(cl.Yielded) == 0 {
				t.Errorf("unused past the grace: replicas %d, yielded %v; want 1, given back to the run", cl.Replicas["cpu"], cl.Yielded)
			}
			if f.waiting(run) {
				t.Error("the run still waits for the grant nobody used")
			}
		})
	}
}

// What the resource group's pass admits of a cluster's growth is
// reserved in the pass's own account write, so that nothing takes it
// before the grant: a standing cluster started in between (a start does
// not queue) is refused for quota, not the growth. A growth withdrawn in
// between is not granted, and what the pass reserved for it is given
// back; one that asks for more in between is granted as it is stored
// then, as far as quota allows.
func TestAdmittedGrowthReservedUntilGranted(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  string // between the pass and its grant: "start" another cluster, "withdraw" the growth, ask for "more"
	}{
		{"another cluster starts", "start"},
		{"the growth is withdrawn", "withdraw"},
		{"the growth asks for more", "more"},
		// The grant's own read of the account, after it read the
		// cluster: its write conflicts, and the next attempt grants the
		// growth as stored then (none).
		{"the growth is withdrawn during the grant", "withdraw-late"},
		{"the growth asks for more during the grant", "more-late"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				f       *queueFixture
				a, late string
				gen     atomic.Int64 // a's generation while its growth waits; 0 before
				fired   atomic.Bool
				lateAct atomic.Bool // withdraw-late: at the next read of the account
				mu      sync.Mutex
				between error // what the act in between returned
			)
			// Right after the pass's account write that reserves for a's
			// next generation, before the grant: the act.
			act := func() {
				bg := dlc.WithUser(context.Background(), "alice")
				var err error
				switch tc.act {
				case "withdraw", "withdraw-late":
					_, err = f.c.Clusters().Autoscale(bg, a, "cpu", 1)
				case "more", "more-late":
					_, err = f.c.Clusters().Autoscale(bg, a, "cpu", 3)
				default:
					_, err = f.c.Clusters().Start(bg, late)
				}
				mu.Lock()
				between = err
				mu.Unlock()
			}
			hooks := memory.StoreHooks{
				Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
					v, err := next(ctx)
					if err != nil || w.Doc.Kind != "resourcegroup" || gen.Load() == 0 || fired.Load() {
						return v, err
					}
					var acc quota.Account
					if json.Unmarshal(w.Doc.Data, &acc) == nil {
						if h, ok := acc.Hold(a); ok && h.Generation > gen.Load() {
							if strings.HasSuffix(tc.act, "-late") {
								lateAct.Store(true)
							} else if fired.CompareAndSwap(false, true) {
								act()
							}
						}
					}
					return v, err
				},
				Read: func(ctx context.Context, kind, id string) error {
					if kind == "resourcegroup" && lateAct.Load() && fired.CompareAndSwap(false, true) {
						act()
					}
					return nil
				},
			}
			f = newHookedQueueFixture(t, 24, hooks, dlc.WithAutoscaleHeadroom(0))
			a = f.started("a", 1, 5, 1, 4)[0]          // head 4 + 1 worker: 8 cores
			fillers := f.started("filler", 2, 5, 1, 1) // 16 cores: full
			lateCl, err := f.c.Clusters().Create(f.ctx, mustSpec(t, f, "late"))
			if err != nil {
				t.Fatal(err)
			}
			late = lateCl.ID
			f.settle()
			res, err := f.c.Clusters().Autoscale(f.ctx, a, "cpu", 2)
			if err != nil {
				t.Fatal(err)
			}
			if !res.QuotaRefused || !res.Queued {
				t.Fatalf("autoscale in a full group: %+v, want refused and queued", res)
			}
			gen.Store(f.cluster(a).Generation)
			// 8 cores freed: the growth's 4 admitted; the late cluster's 8
			// fit only without it. Looked at within the repair grace: what
			// is given back is given back by the pass, not by the repair.
			if _, err := f.c.Clusters().Hibernate(f.ctx, fillers[0], dlc.HibernateOptions{}); err != nil {
				t.Fatal(err)
			}
			f.m.Settle(100*time.Millisecond, 100)
			if !fired.Load() {
				t.Fatal("the pass that admits the growth reserved nothing for it")
			}
			mu.Lock()
			got := between
			mu.Unlock()
			cl := f.cluster(a)
			u := f.usage()
			h := u.Holders[a]
			for _, e := range cl.Events {
				t.Logf("%s %s: %s", e.Time.Format("15:04:05.000"), e.Action, e.Message)
			}
			switch tc.act {
			case "more", "more-late":
				if err := got; err != nil {
					t.Fatalf("ask for more: %v", err)
				}
				// 4 cores reserved by the pass and the 4 left free: both
				// workers more it asks for now.
				if cl.Replicas["cpu"] != 3 || cl.Growth != nil || h.MilliCPU != 16000 {
					t.Errorf("growth asking for more: replicas %d, growth %+v, holds %v; want 3 granted as stored", cl.Replicas["cpu"], cl.Growth, h)
				}
				return
			case "withdraw", "withdraw-late":
				if err := got; err != nil {
					t.Fatalf("withdraw: %v", err)
				}
				if cl.Replicas["cpu"] != 1 || cl.Growth != nil {
					t.Errorf("withdrawn growth: replicas %d, growth %+v; want 1 and none", cl.Replicas["cpu"], cl.Growth)
				}
				for _, e := range cl.Events {
					if e.Action == "quota-repair" {
						t.Errorf("the repair fenced the cluster off: %s", e.Message)
					}
				}
				if h.MilliCPU != 8000 || u.Allocatable.MilliCPU != 8000 {
					t.Errorf("a holds %v and %v is free, want 8 cores each: what the pass reserved is not given back", h, u.Allocatable)
				}
				return
			}
			if got == nil {
				t.Error("a cluster started between the pass and the grant took the growth's quota")
			}
			if cl.Replicas["cpu"] != 2 || cl.Growth != nil {
				t.Errorf("admitted growth: replicas %d, growth %+v; want 2 granted", cl.Replicas["cpu"], cl.Growth)
			}
			if h.MilliCPU != 12000 {
				t.Errorf("a holds %v, want 12 cores", h)
			}
		})
	}
}

// mustSpec is a standing cluster's spec of the fixture: a 4-core head and
// a 4-core worker.
func mustSpec(t *testing.T, f *queueFixture, name string) *cluster.Spec {
	t.Helper()
	s, err := dlc.NewCluster(name).Groups(f.grp).Resources("pkg-1", "rg-q").Priority(5).
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
