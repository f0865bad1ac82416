package dlctest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// EditStored edits a stored document behind the platform's back, as
// someone with edit rights on the store (kubectl edit, a GitOps tool)
// would: it reads kind/id ("cluster", "run", "resourcegroup", …) from
// the store, lets edit change its JSON content and its labels, and writes
// it back with the version read, again on a conflict (at most 16 times).
func EditStored(ctx context.Context, s dlc.Store, kind, id string, edit func(data map[string]any, labels map[string]string)) error {
	for attempt := 0; ; attempt++ {
		d, err := s.Get(ctx, kind, id)
		if err != nil {
			return err
		}
		var data map[string]any
		dec := json.NewDecoder(bytes.NewReader(d.Data))
		dec.UseNumber() // int64 amounts stay exact
		if err := dec.Decode(&data); err != nil {
			return fmt.Errorf("dlctest: %s %s: %w", kind, id, err)
		}
		if d.Labels == nil {
			d.Labels = map[string]string{}
		}
		edit(data, d.Labels)
		if d.Data, err = json.Marshal(data); err != nil {
			return err
		}
		_, err = s.Update(ctx, d)
		if err == nil || !errors.Is(err, errs.ErrConflict) || attempt >= 16 {
			return err
		}
	}
}

// EditHold edits holder's reservation in resource group rg behind the
// platform's back, wherever the platform keeps it: among the account's
// pending holds (the resource group document), or in the hold's own
// document (kind "hold", id rg + "." + holder). edit gets the hold (the
// zero Hold when there is none) and returns it changed, or keep false to
// remove it. The account's reserved sum is left as it is: an edit from
// outside the platform.
func EditHold(ctx context.Context, s dlc.Store, rg, holder string, edit func(h quota.Hold) (_ quota.Hold, keep bool)) error {
	_, a, err := storedAccount(ctx, s, rg)
	if err != nil {
		return err
	}
	if _, ok := a.Pending[holder]; ok {
		var bad error
		err := EditStored(ctx, s, "resourcegroup", rg, func(data map[string]any, _ map[string]string) {
			pending := Object(data, "pending")
			var h quota.Hold
			bad = nil // this attempt's
			if v, ok := pending[holder]; ok {
				str, _ := v.(string)
				if h, bad = quota.DecodeHold(str); bad != nil {
					return // left as it is
				}
			}
			if h, keep := edit(h); keep {
				pending[holder] = h.Encode()
			} else {
				delete(pending, holder)
			}
		})
		return errors.Join(err, bad)
	}
	type holdDoc struct {
		ResourceGroup string `json:"resourceGroup"`
		Holder        string `json:"holder"`
		quota.Hold
	}
	id := rg + "." + holder
	for attempt := 0; ; attempt++ {
		hd, err := s.Get(ctx, "hold", id)
		if errs.IsNotFound(err) {
			h, keep := edit(quota.Hold{})
			if !keep {
				return nil
			}
			h.Seq = max(h.Seq, 1)
			data, err := json.Marshal(holdDoc{ResourceGroup: rg, Holder: holder, Hold: h})
			if err != nil {
				return err
			}
			_, err = s.Create(ctx, backend.Doc{Kind: "hold", ID: id, Data: data})
			if err == nil || !errors.Is(err, errs.ErrConflict) || attempt >= 16 {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		var cur holdDoc
		if err := json.Unmarshal(hd.Data, &cur); err != nil {
			return fmt.Errorf("dlctest: hold %s: %w", id, err)
		}
		h, keep := edit(cur.Hold)
		if !keep {
			err = s.Delete(ctx, "hold", id, hd.Version)
		} else {
			cur.Hold = h
			if hd.Data, err = json.Marshal(cur); err != nil {
				return err
			}
			_, err = s.Update(ctx, hd)
		}
		if err == nil || !errors.Is(err, errs.ErrConflict) || attempt >= 16 {
			return err
		}
	}
}

// storedAccount reads resource group rg's account from the store.
func storedAccount(ctx context.Context, s dlc.Store, rg string) (backend.Doc, *quota.Account, error) {
	d, err := s.Get(ctx, "resourcegroup", rg)
	if err != nil {
		return d, nil, err
	}
	var a quota.Account
	if err := json.Unmarshal(d.Data, &a); err != nil {
		return d, nil, fmt.Errorf("dlctest: resource group %s: %w", rg, err)
	}
	return d, &a, nil
}

// LeakHold makes holder hold h in resource group rg as a replica that
// died between its reservation and the write that needed it leaves it:
// a pending hold of the account, counted in its sum.
func LeakHold(ctx context.Context, s dlc.Store, rg, holder string, h quota.Hold) error {
	for attempt := 0; ; attempt++ {
		d, a, err := storedAccount(ctx, s, rg)
		if err != nil {
			return err
		}
		a.Seq++
		h.Seq = a.Seq
		if a.Pending == nil {
			a.Pending = quota.PendingHolds{}
		}
		a.Pending[holder] = h
		a.Sum = a.Sum.Add(h.Resources)
		if d.Data, err = json.Marshal(a); err != nil {
			return err
		}
		_, err = s.Update(ctx, d)
		if err == nil || !errors.Is(err, errs.ErrConflict) || attempt >= 16 {
			return err
		}
	}
}

// Object returns the JSON object at key in m, made if absent.
func Object(m map[string]any, key string) map[string]any {
	o, ok := m[key].(map[string]any)
	if !ok {
		o = map[string]any{}
		m[key] = o
	}
	return o
}

// capacityWatch follows the backend's store and records every moment at
// which the clusters that Ray runs or is starting in a resource group
// (starting, running, abnormal or hibernating) need more than its
// capacity: what the platform runs, whatever its stored reservations say.
type capacityWatch struct {
	nodes quota.Catalog

	mu       sync.Mutex
	capacity map[string]quota.Resources            // resource group → capacity
	needs    map[string]map[string]quota.Resources // resource group → cluster → what it runs
	where    map[string]string                     // cluster → its resource group
	bad      []string
}

func (s *suite) watchCapacity(nodes quota.Catalog) *capacityWatch {
	s.t.Helper()
	w := &capacityWatch{nodes: nodes, capacity: map[string]quota.Resources{},
		needs: map[string]map[string]quota.Resources{}, where: map[string]string{}}
	snap, err := s.backend().Watch(s.t.Context(), w.change)
	s.must(err)
	for _, d := range snap {
		w.change(backend.Change{Doc: d})
	}
	return w
}

func (w *capacityWatch) change(ch backend.Change) {
	d := ch.Doc
	w.mu.Lock()
	defer w.mu.Unlock()
	switch d.Kind {
	case "resourcegroup":
		var a quota.Account
		if ch.Deleted || json.Unmarshal(d.Data, &a) != nil {
			return
		}
		w.capacity[d.ID] = a.Capacity
		w.check(d.ID, "resource group "+d.ID+" at "+d.Version)
	case "cluster":
		if rg, ok := w.where[d.ID]; ok {
			delete(w.needs[rg], d.ID)
			delete(w.where, d.ID)
		}
		var cl cluster.Cluster
		if ch.Deleted || json.Unmarshal(d.Data, &cl) != nil {
			return
		}
		if !cl.State.HoldsQuota() || cl.State == cluster.Deleting || cl.Live == nil {
			return
		}
		need, err := cl.Live.ResourcesAt(w.nodes, cl.Replicas)
		if err != nil {
			w.bad = append(w.bad, fmt.Sprintf("cluster %s: %v", cl.ID, err))
			return
		}
		rg := cl.Live.ResourceGroup
		if w.needs[rg] == nil {
			w.needs[rg] = map[string]quota.Resources{}
		}
		w.needs[rg][cl.ID] = need
		w.where[cl.ID] = rg
		w.check(rg, fmt.Sprintf("cluster %s %s", cl.ID, cl.State))
	}
}

// check records rg running more than its capacity; the caller holds mu.
func (w *capacityWatch) check(rg, at string) {
	capacity, ok := w.capacity[rg]
	if !ok {
		return
	}
	var sum quota.Resources
	for _, n := range w.needs[rg] {
		sum = sum.Add(n)
	}
	if !sum.Fits(capacity) {
		w.bad = append(w.bad, fmt.Sprintf("after %s: resource group %s runs %s, capacity %s: %v", at, rg, sum, capacity, w.needs[rg]))
	}
}

func (w *capacityWatch) violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.bad)
}

// offline edits the store while no client runs, checks that a replica
// started on it finds what wantAudit names with CheckQuota before any
// reconciler has run ("" expects nothing), and returns a new client,
// which heals the edit.
func (s *suite) offline(c *dlc.Client, edit func(), wantAudit ...string) *dlc.Client {
	s.t.Helper()
	_ = c.Close()
	edit()
	audit := s.client(nil, dlc.WithWorkers(0))
	err := audit.CheckQuota(s.ctx())
	for _, w := range wantAudit {
		if err == nil || !strings.Contains(err.Error(), w) {
			s.t.Errorf("CheckQuota after the edit = %v, want it to name %q", err, w)
		}
	}
	_ = audit.Close()
	return s.client(nil)
}

// Someone else edits the platform's stored objects (kubectl edit, a GitOps
// tool; issue 18): a running cluster's hold is removed, two holds are
// inflated to 2^62 milli-CPU, waiting runs' demand is edited to nearly
// nothing and a waiting run's labels say it is done. CheckQuota finds
// each quota discrepancy, the platform heals each, and at no moment does
// it run more than the resource group's capacity.
func testForeignEdits(t *testing.T, s *suite) {
	c := s.client(nil)
	ctx := s.ctx()
	st := s.backend()
	edit := func(kind, id string, f func(map[string]any, map[string]string)) {
		t.Helper()
		s.must(EditStored(ctx, st, kind, id, f))
	}
	grp := s.world(c, "rg-fe", 16)
	w := s.watchCapacity(c.Catalogs().Nodes)
	a := s.runningCluster(c, "fe_a", grp, "rg-fe")
	b := s.runningCluster(c, "fe_b", grp, "rg-fe")
	third, err := c.Clusters().Create(ctx, s.spec("fe_c", grp, "rg-fe"))
	s.must(err)
	s.clusterState(c, third.ID, cluster.Created)
	u, err := c.ResourceGroups().Get(ctx, "rg-fe")
	s.must(err)
	need := u.Holders[a.ID]
	held := func(id string, want quota.Resources) func() (bool, string) {
		return func() (bool, string) {
			u, err := c.ResourceGroups().Get(ctx, "rg-fe")
			if err != nil {
				return false, err.Error()
			}
			return u.Holders[id] == want, fmt.Sprint(u.Holders)
		}
	}

	// A running cluster's hold removed: restored, so the group stays full.
	c = s.offline(c, func() {
		s.must(EditHold(ctx, st, "rg-fe", a.ID, func(quota.Hold) (quota.Hold, bool) { return quota.Hold{}, false }))
	}, "cluster "+a.ID)
	s.eventually("the removed hold restored", held(a.ID, need))
	if _, err := c.Clusters().Start(ctx, third.ID); !errors.Is(err, dlc.ErrQuota) {
		t.Fatalf("starting a third cluster on the quota in use = %v, want ErrQuota", err)
	}

	// Two holds inflated to 2^62 milli-CPU: normalised to what each runs,
	// and the group stays writable (a hibernate releases its hold).
	c = s.offline(c, func() {
		for _, id := range []string{a.ID, b.ID} {
			s.must(EditHold(ctx, st, "rg-fe", id, func(h quota.Hold) (quota.Hold, bool) {
				h.Resources.MilliCPU = 1 << 62
				return h, true
			}))
		}
	}, "holder "+a.ID+" holds", "holder "+b.ID+" holds")
	s.eventually("inflated hold of "+a.ID+" normalised", held(a.ID, need))
	s.eventually("inflated hold of "+b.ID+" normalised", held(b.ID, need))
	_, err = c.Clusters().Hibernate(ctx, b.ID, dlc.DeleteOptions{})
	s.must(err)
	s.clusterState(c, b.ID, cluster.Hibernated)
	s.eventually("the hibernated cluster's hold released", held(b.ID, quota.Resources{}))

	// A run waiting for the hibernated cluster, its labels edited to say
	// it is done.
	rec, err := c.Jobs().Create(ctx, s.jobConfig("fe_wait", b.ID, ""), dlc.SaveOptions{})
	s.must(err)
	waiting, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
	s.must(err)
	s.runState(c, waiting.ID, job.Waiting)
	edit("run", waiting.ID, func(_ map[string]any, l map[string]string) {
		l["phase"], l["state"], l["target"] = "done", "succeeded", "cluster.elsewhere"
	})

	// Two on-demand runs of 8 cores wait for quota; their stored demand is
	// edited to nearly nothing, and a replica restarts on the store.
	if _, err = c.Clusters().Start(ctx, third.ID); err != nil {
		u, _ := c.ResourceGroups().Get(ctx, "rg-fe")
		t.Fatalf("starting the third cluster: %v; holders %v", err, u.Holders)
	}
	s.clusterState(c, third.ID, cluster.Running)
	odJob := s.onDemand(c, "fe_od", "rg-fe", 5)
	var od []string
	for range 2 {
		r, err := c.Runs().Create(ctx, odJob.ID, dlc.RunOptions{})
		s.must(err)
		od = append(od, r.ID)
	}
	for _, id := range od {
		if r := s.runState(c, id, job.Waiting); r.WaitReason != job.InsufficientQuota {
			t.Fatalf("on-demand run waits because %q", r.WaitReason)
		}
	}
	c = s.offline(c, func() {
		for _, id := range od {
			edit("run", id, func(data map[string]any, _ map[string]string) {
				data["demand"] = map[string]any{"milliCPU": 0, "memory": 1, "gpu": 0}
			})
		}
	})
	s.eventually("the restarted replica queues both runs at their config's demand", func() (bool, string) {
		p, err := c.ResourceGroups().Pending(ctx, "rg-fe")
		if err != nil {
			return false, err.Error()
		}
		if len(p) != 2 {
			return false, fmt.Sprintf("%d pending", len(p))
		}
		for _, x := range p {
			if x.Needs.MilliCPU != 8000 {
				return false, fmt.Sprintf("%s needs %s", x.RunID, x.Needs)
			}
		}
		return true, ""
	})
	// Free one cluster's quota: the runs go one at a time.
	_, err = c.Clusters().Hibernate(ctx, third.ID, dlc.DeleteOptions{})
	s.must(err)
	for _, id := range od {
		if r := s.runEnds(c, id); r.State != job.Succeeded {
			t.Fatalf("on-demand run %s: %s %s", id, r.State, r.Message)
		}
	}
	// The run whose labels were edited runs once its cluster does (once
	// the last on-demand cluster has released its quota).
	s.eventually("start "+b.ID+" once freed", func() (bool, string) {
		_, err := c.Clusters().Start(ctx, b.ID)
		return err == nil, fmt.Sprint(err)
	})
	if r := s.runEnds(c, waiting.ID); r.State != job.Succeeded {
		t.Fatalf("the run whose labels were edited: %s %s", r.State, r.Message)
	}
	s.quotaClean(c)
	if bad := w.violations(); len(bad) > 0 {
		t.Fatalf("the platform ran more than the capacity:\n%s", strings.Join(bad, "\n"))
	}
}
