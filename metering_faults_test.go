package dlc_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/usage"
)

// meteredCluster is a running cluster of a cu.4c8g head and a cu.4c8g
// worker (1–4) on a memory fixture with hooks, started two minutes in.
func meteredCluster(t *testing.T, hooks memory.StoreHooks, more ...dlc.Option) (*dlctest.Memory, context.Context, string) {
	t.Helper()
	m := dlctest.NewMemory(dlctest.MemoryOptions{T: t, Store: hooks, Options: append([]dlc.Option{dlc.WithMeteringInterval(20 * time.Minute)}, more...)})
	alice := dlc.WithUser(t.Context(), "alice")
	if _, err := m.Client.ResourceGroups().Register(alice, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 200000, Memory: 800 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	grp, err := m.Client.Groups().Create(alice, "g")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := dlc.NewCluster("c1").Groups(grp.ID).Resources("pkg-1", "rg-1").Tag("team", "a").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 4).Build()
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Client.Clusters().Create(alice, spec)
	if err != nil {
		t.Fatal(err)
	}
	m.Step(time.Second)
	if _, err := m.Client.Clusters().Start(alice, c.ID); err != nil {
		t.Fatal(err)
	}
	m.Step(2 * time.Minute)
	return m, alice, c.ID
}

func nodeHours(t *testing.T, c *dlc.Client, ctx context.Context, from, to time.Time) float64 {
	t.Helper()
	rep, err := c.Usage(ctx, usage.Query{From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Total.NodeHours["cu.4c8g"]
}

// TestMeteringThroughAMeterOutage: the meter's writes fail while a
// change closes its interval (the record written, the meter's move not):
// a report meanwhile counts nothing twice, and when the nodes go back
// before the meter's write gets through, what ran since is not lost.
func TestMeteringThroughAMeterOutage(t *testing.T) {
	var down atomic.Bool
	m, alice, id := meteredCluster(t, memory.StoreHooks{Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if w.Doc.Kind == "meter" && down.Load() {
			return "", errs.Unavailable("store write", errors.New("injected: meter writes fail"))
		}
		return next(ctx)
	}})
	c := m.Client
	up := m.Clock.Now().Add(-2*time.Minute + 150*time.Millisecond) // the pods came up 150 ms after the start
	from, to := dlctest.Epoch.Add(-time.Hour), dlctest.Epoch.AddDate(0, 0, 2)
	m.Step(time.Hour)
	down.Store(true)
	scaled := m.Clock.Now()
	if _, err := c.Clusters().Autoscale(alice, id, "cpu", 3); err != nil {
		t.Fatal(err)
	}
	m.Step(time.Minute)
	// Meanwhile the report counts the interval closed (its record) once,
	// and the minute since at the nodes the meter knows (2 of the 4).
	known := 2 * m.Clock.Now().Sub(up).Hours()
	if got := nodeHours(t, c, alice, from, to); math.Abs(got-known) > 1e-6 {
		t.Errorf("during the outage the report says %.4f node-hours, want %.4f (Ray ran %.4f)", got, known,
			2*scaled.Sub(up).Hours()+4*m.Clock.Now().Sub(scaled).Hours())
	}
	back := m.Clock.Now()
	if _, err := c.Clusters().Autoscale(alice, id, "cpu", 1); err != nil { // back before the meter's write gets through
		t.Fatal(err)
	}
	m.Step(time.Minute)
	down.Store(false)
	m.Step(2 * time.Hour)
	if _, err := c.Clusters().Hibernate(alice, id, dlc.HibernateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := m.Clock.Now().Add(50 * time.Millisecond) // the pods go 50 ms after the hibernate
	m.Step(time.Hour)
	ran := 2*scaled.Sub(up).Hours() + 4*back.Sub(scaled).Hours() + 2*stop.Sub(back).Hours()
	// The minute the meter could not write is billed as the nodes it
	// knew (2): its second change was never seen apart from the first.
	got := nodeHours(t, c, alice, from, to)
	if math.Abs(got-ran) > 2.0/60+1e-6 {
		t.Errorf("billed %.4f node-hours, Ray ran %.4f", got, ran)
	}
}

// TestUsageHonoursEveryAttribute: a report counts a cluster only when the
// reader may describe it as it was billed: a policy that denies a cluster
// group, or one tag value among tags whose keys and values hold "=",
// hides it (and only it).
func TestUsageHonoursEveryAttribute(t *testing.T) {
	m, alice, id := meteredCluster(t, memory.StoreHooks{})
	c := m.Client
	cl, err := c.Clusters().Get(alice, id)
	if err != nil {
		t.Fatal(err)
	}
	setTags := func(tags map[string]string) {
		got, err := c.Clusters().Get(alice, id)
		if err != nil {
			t.Fatal(err)
		}
		got.Spec.Tags = tags
		if _, err := c.Clusters().Update(alice, got); err != nil {
			t.Fatal(err)
		}
	}
	setTags(map[string]string{"a=b": "c"})
	m.Step(time.Hour)
	setTags(map[string]string{"a": "b=c"})
	m.Step(time.Hour)
	for _, tc := range []struct {
		name, condition string
		visible         []string // the tag a's values bob sees
	}{
		{"a cluster group denied", `"dlc:cluster_group":["` + cl.Spec.Groups[0] + `"]`, nil},
		{"one tag value denied", `"dlc:tag/a":["b=c"]`, []string{""}}, // team=a, then a=b=c (no tag a), not a=b=c
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := auth.ParsePolicy([]byte(`{"version":"2.0","statement":[
			 {"effect":"allow","action":["dlc:*"],"resource":["*"]},
			 {"effect":"deny","principal":{"user":["bob"]},"action":["dlc:DescribeCluster"],"resource":["*"],
			  "condition":{"string_equal":{` + tc.condition + `}}}]}`))
			if err != nil {
				t.Fatal(err)
			}
			a, err := auth.NewPolicyAuthorizer(pol)
			if err != nil {
				t.Fatal(err)
			}
			gated := m.NewClient(dlc.WithAuthorizer(a))
			defer m.CloseClient(gated)
			bob := dlc.WithUser(t.Context(), "bob")
			rep, err := gated.Usage(bob, usage.Query{From: dlctest.Epoch, To: m.Clock.Now().Add(time.Hour), GroupBy: usage.TagKey("a")})
			if err != nil {
				t.Fatal(err)
			}
			var seen []string
			for _, r := range rep.Rows {
				seen = append(seen, r.Key)
			}
			if !slices.Equal(seen, tc.visible) {
				t.Errorf("bob sees the rows %q, want %q", seen, tc.visible)
			}
		})
	}
}

// TestMeteringWithASkewedReplica: a replica whose clock is ten minutes
// behind opens the interval; Ray's own time dates it, so nothing is billed
// from before Ray ran the pods.
func TestMeteringWithASkewedReplica(t *testing.T) {
	m := dlctest.NewMemory(dlctest.MemoryOptions{T: t, Options: []dlc.Option{dlc.WithMeteringInterval(20 * time.Minute)}})
	m.CloseClient(m.Client)
	c := m.NewSkewedClient(-10 * time.Minute)
	alice := dlc.WithUser(t.Context(), "alice")
	if _, err := c.ResourceGroups().Register(alice, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 200000, Memory: 800 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	grp, err := c.Groups().Create(alice, "g")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := dlc.NewCluster("c1").Groups(grp.ID).Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 4).Build()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := c.Clusters().Create(alice, spec)
	if err != nil {
		t.Fatal(err)
	}
	m.Step(time.Second)
	if _, err := c.Clusters().Start(alice, cl.ID); err != nil {
		t.Fatal(err)
	}
	up := m.Clock.Now().Add(150 * time.Millisecond)
	m.Step(time.Hour)
	m.CloseClient(c) // the skewed replica goes; one with the right time takes over
	c = m.NewClient()
	if _, err := c.Clusters().Hibernate(alice, cl.ID, dlc.HibernateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := m.Clock.Now().Add(50 * time.Millisecond)
	m.Step(10 * time.Minute)
	ran := 2 * stop.Sub(up).Hours()
	if got := nodeHours(t, c, alice, dlctest.Epoch.Add(-time.Hour), m.Clock.Now().Add(time.Hour)); math.Abs(got-ran) > 1e-6 {
		t.Errorf("billed %.4f node-hours; Ray ran %.4f", got, ran)
	}
}
