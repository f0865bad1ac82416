package platform

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// ResourceGroupService is the resource groups of an Engine: capacity that
// clusters and on-demand runs reserve from (C4, C14, J3, J12). A resource
// group is a stored object and its reservations live on it, so every
// client over the store sees and changes the same ones.
type ResourceGroupService struct{ c *Engine }

// ResourceGroups returns the client's resource groups.
func (c *Engine) ResourceGroups() *ResourceGroupService { return &ResourceGroupService{c} }

// Register adds a resource group with its allocatable capacity inside a
// resource package, or changes its capacity (never below what is
// reserved). Runs waiting for quota are reconsidered.
func (s *ResourceGroupService) Register(ctx context.Context, g quota.Group) (quota.Usage, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return quota.Usage{}, err
	}
	if err := g.Validate(); err != nil {
		return quota.Usage{}, err
	}
	a := &quota.Account{Group: g}
	v, err := c.acc.create(ctx, kindResourceGroup, g.ID, nil, a)
	if err == nil {
		a.Version = v
		return a.Usage(), nil
	}
	if !errors.Is(err, errs.ErrConflict) {
		return quota.Usage{}, err
	}
	a, err = c.ledger.changeAccount(ctx, g.ID, func(a *quota.Account) (bool, error) {
		if a.Package != g.Package {
			return false, errs.Conflict("resource group", g.ID, fmt.Sprintf("belongs to package %q, not %q", a.Package, g.Package))
		}
		if a.Capacity == g.Capacity {
			return false, nil
		}
		return true, a.SetCapacity(g.Capacity)
	})
	if err != nil {
		return quota.Usage{}, err
	}
	return a.Usage(), nil
}

// Delete deletes resource group id. It is refused (*errs.StateError)
// while anything holds quota in it (a starting, running or hibernating
// cluster; an admitted on-demand run's cluster) or a run queues, runs or
// is being cleaned up in it. Both are decided on the store: the account
// is read there, the runs are listed there, and the account is deleted
// on the version read, so a reservation made meanwhile (every one is a
// compare-and-swap of the account) makes the delete look again.
//
// What only names the group is not refused: a created or hibernated
// cluster whose spec names it cannot start until its spec names another
// (C4), and an on-demand job config's next run fails saying the group
// does not exist (J12), as does a run submitted while the delete ran and
// stored after its list. The group's settled hold documents, which hold
// nothing once the account does not, are deleted first.
func (s *ResourceGroupService) Delete(ctx context.Context, id string) error {
	c := s.c
	if err := ctx.Err(); err != nil {
		return err
	}
	if id == "" {
		return errs.List{errs.Required("id", "", "name the resource group to delete")}.ToError()
	}
	for attempt := 0; ; attempt++ {
		a, v, err := fresh[quota.Account](ctx, c.acc, kindResourceGroup, id)
		if err != nil {
			return notFoundAs(err, "resource group", id)
		}
		if err := s.inUse(ctx, a); err != nil {
			return err
		}
		if err := s.deleteHolds(ctx, id); err != nil {
			return err
		}
		err = c.store.Delete(ctx, kindResourceGroup, id, v)
		if errors.Is(err, errs.ErrConflict) && attempt < conflictRetries {
			continue // changed meanwhile (a reservation, a capacity): look again
		}
		return notFoundAs(err, "resource group", id)
	}
}

// inUse returns a *errs.StateError when account a (as stored) holds
// anything, or a run that is not done targets it in the store.
func (s *ResourceGroupService) inUse(ctx context.Context, a *quota.Account) error {
	refuse := func(state, reason string) error {
		return &errs.StateError{Kind: "resource group", ID: a.ID, Op: "delete", State: state,
			Allowed: []string{"nothing held or queued"}, Reason: reason}
	}
	if !a.Sum.IsZero() {
		return refuse("in use", fmt.Sprintf("%s is reserved in it: hibernate or delete its clusters, or wait for its on-demand runs to end", a.Sum))
	}
	for holder, h := range a.Pending {
		if !h.Resources.IsZero() {
			return refuse("in use", fmt.Sprintf("%s holds %s in it", holder, h.Resources))
		}
	}
	docs, err := s.c.acc.listLatest(ctx, kindRun, map[string]string{labelTarget: targetResourceGroup + a.ID})
	if err != nil {
		return err
	}
	n := 0
	for _, d := range docs {
		if d.Labels[labelPhase] != phaseDone {
			n++
		}
	}
	if n > 0 {
		return refuse(fmt.Sprintf("%d runs not finished", n), "stop its on-demand runs or wait for them to finish")
	}
	return nil
}

// deleteHolds deletes the settled hold documents of resource group id, as
// the store has them: its account, which holds nothing, is the truth (a
// document is at most an older change of a hold since released, or one
// the platform did not write). None is left to stand in the way of a
// later group of the same id (putHold never writes over a later change).
func (s *ResourceGroupService) deleteHolds(ctx context.Context, id string) error {
	c := s.c
	docs, err := c.store.List(ctx, kindHold, map[string]string{labelResourceGroup: id})
	if err != nil {
		return err
	}
	for _, d := range docs {
		if err := c.store.Delete(ctx, kindHold, d.ID, d.Version); err != nil && !errs.IsNotFound(err) && !errors.Is(err, errs.ErrConflict) {
			return err
		}
	}
	return nil
}

// Get returns a resource group's capacity, reservations, what it can
// still allocate, and what is reserved but not running (Usage.Headroom).
func (s *ResourceGroupService) Get(ctx context.Context, id string) (quota.Usage, error) {
	if err := ctx.Err(); err != nil {
		return quota.Usage{}, err
	}
	a, _, err := get[quota.Account](ctx, s.c.acc, kindResourceGroup, "resource group", id)
	if err != nil {
		return quota.Usage{}, err
	}
	return s.c.usage(ctx, a), nil
}

// usage is a's usage with its headroom: what each running autoscaling
// cluster of the group holds above what Ray's autoscaler runs of it
// (Ray asked, one cluster at a time; a cluster Ray cannot tell of now
// counts nothing).
func (c *Engine) usage(ctx context.Context, a *quota.Account) quota.Usage {
	u := a.Usage()
	for _, mark := range []string{headroomLent, headroomYielded} {
		for _, d := range c.cache.SelectDocs(kindCluster, map[string]string{labelResourceGroup: a.ID, labelHeadroom: mark}) {
			cl, _, err := fromCache[cluster.Cluster](c.acc, kindCluster, d.ID)
			if err != nil || cl.Live == nil {
				continue
			}
			h, ok := a.Hold(cl.ID)
			if !ok {
				continue
			}
			obs, err := c.ray.ClusterStatus(ctx, cl.ID)
			if err != nil {
				continue
			}
			runs, err := cl.Live.ResourcesAt(c.cat.Nodes, running(cl, obs.Autoscaled))
			if err != nil {
				continue
			}
			u.Headroom = u.Headroom.Add(h.Resources.Sub(runs).Max(quota.Resources{}))
		}
	}
	return u
}

// running returns the workers Ray runs of cl per worker group: its held
// workers (HeldReplicas: its ceilings, or what a lowered one still
// drains), each autoscaling group's taken down to what Ray's autoscaler
// runs (obs, bounded as followAutoscaler bounds it).
func running(cl *cluster.Cluster, obs *cluster.Autoscaled) map[string]int {
	out := cl.HeldReplicas()
	if obs == nil {
		return out
	}
	for _, w := range cl.Live.Workers {
		ceiling, ok := out[w.Name]
		if r, seen := obs.Workers[w.Name]; ok && seen && w.Instances.Autoscaling() {
			out[w.Name] = min(max(r, w.Instances.Min), ceiling)
		}
	}
	return out
}

// List returns every resource group's usage, by id.
func (s *ResourceGroupService) List(ctx context.Context) ([]quota.Usage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	accounts, err := list[quota.Account](s.c.acc, kindResourceGroup, nil, nil)
	if err != nil {
		return nil, err
	}
	out := make([]quota.Usage, 0, len(accounts))
	for _, a := range accounts {
		out = append(out, s.c.usage(ctx, a))
	}
	return out, nil
}

// storeAccounts reads every resource group's account and settled holds
// from the store itself. The holds are read between two reads of the
// accounts, and an account is taken only when both reads found it at one
// version: a hold changes only through a change of its account, so its
// settled holds were then as read. An account that keeps changing is
// read again, three times at most, and then left out (it is in use: its
// next audit sees it); busy names those left out.
func (c *Engine) storeAccounts(ctx context.Context) (out []*quota.Account, busy map[string]bool, err error) {
	want := map[string]bool(nil) // nil: every one
	for range 3 {
		before, err := c.store.List(ctx, kindResourceGroup, nil)
		if err != nil {
			return nil, nil, err
		}
		holdDocs, err := c.store.List(ctx, kindHold, nil)
		if err != nil {
			return nil, nil, err
		}
		after, err := c.store.List(ctx, kindResourceGroup, nil)
		if err != nil {
			return nil, nil, err
		}
		holds := map[string]quota.HoldMap{}
		for _, d := range holdDocs {
			h, err := decode[holdDoc](d)
			if err != nil || holdLabels(h, d.ID) == nil {
				continue // not one the platform wrote: the true-up sees the sum
			}
			if holds[h.ResourceGroup] == nil {
				holds[h.ResourceGroup] = quota.HoldMap{}
			}
			holds[h.ResourceGroup][h.Holder] = h.Hold
		}
		versions := map[string]string{}
		for _, d := range before {
			versions[d.ID] = d.Version
		}
		moved := map[string]bool{}
		for _, d := range after {
			if want != nil && !want[d.ID] {
				continue
			}
			if versions[d.ID] != d.Version {
				moved[d.ID] = true
				continue
			}
			a, err := decode[quota.Account](d)
			if err != nil {
				return nil, nil, err
			}
			a.Bind(holds[a.ID])
			out = append(out, a)
		}
		if len(moved) == 0 {
			return out, nil, nil
		}
		want = moved
	}
	return out, want, nil
}

// datedAhead is how far ahead of this client's clock a hold may be dated
// before CheckQuota reports it: further than any replica's clock is off,
// so the date was written from outside the platform. No decision reads a
// hold's date (a hold ages from when a client first sees it, holdAge), so
// such a hold does no harm beyond its report.
const datedAhead = time.Hour

// CheckQuota audits the reservations in the store itself, both ways, and
// against what Ray runs. In every resource group: no reservation is
// negative, larger than the capacity or dated in the future (further than
// clocks are apart), together they fit the capacity, and none has been
// seen (by this client, on its own clock) for longer than the repair grace
// held by a holder that no longer justifies it (a leak). Every live
// cluster (starting, running, abnormal or hibernating) holds at least
// what it runs in its resource group, and every cluster but one being
// deleted holds at least what the pods Ray runs of it request (the
// provisioner's pods, terminating ones included): a hold missing or short,
// as an edit from outside the platform leaves it, lets the group hand out
// quota in use. It returns every problem found.
func (c *Engine) CheckQuota(ctx context.Context) error {
	docs, busy, err := c.storeAccounts(ctx)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	accounts, bad, err := c.auditAccounts(ctx, docs, now)
	if err != nil {
		return err
	}
	// The other way: every live cluster holds what it runs.
	clusters, err := c.store.List(ctx, kindCluster, nil)
	if err != nil {
		return err
	}
	for _, d := range clusters {
		cl, err := decode[cluster.Cluster](d)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		if cl.State == cluster.Deleting {
			// It holds what it held until Ray's objects and their pods are
			// gone (on Kubernetes, the garbage collector deletes the pods
			// after their RayCluster), while the pods already stopping are
			// still listed.
			continue
		}
		problem, gone, err := c.auditPods(ctx, cl, accounts)
		if err != nil {
			return err
		}
		if problem != "" {
			bad = append(bad, problem)
		}
		if gone {
			continue // deleted, or being deleted, since it was listed
		}
		if problem, err = c.auditLiveHold(ctx, cl, accounts, busy, now); err != nil {
			return err
		}
		if problem != "" {
			bad = append(bad, problem)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("quota: %s", strings.Join(bad, "; "))
	}
	return nil
}

// auditAccounts checks each stored account (docs) in itself and each of
// its holds: none dated in the future, none older than the repair grace
// that nothing justifies (a leak). It returns the accounts by resource
// group, and the problems found.
func (c *Engine) auditAccounts(ctx context.Context, docs []*quota.Account, now time.Time) (map[string]*quota.Account, []string, error) {
	var bad []string
	accounts := map[string]*quota.Account{}
	for _, a := range docs {
		if err := a.Check(); err != nil {
			bad = append(bad, err.Error())
		}
		accounts[a.ID] = a
		// Seen here (holdAge, below), on a client that may not own the
		// group, its holds are also forgotten here once gone (the owner's
		// pass does so for its own).
		c.ledger.forgetHolds(a.ID, a)
		for h, hold := range a.Holds() {
			if hold.Since.After(now.Add(datedAhead)) {
				bad = append(bad, fmt.Sprintf("resource group %s: %s holds %s since %s, in the future",
					a.ID, h, hold.Resources, hold.Since.Format(time.RFC3339)))
				continue
			}
			if c.ledger.holdAge(a.ID, h, hold, now) < c.o.grace {
				continue
			}
			ok, err := c.justified(ctx, h, a.ID, true)
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				bad = append(bad, fmt.Sprintf("resource group %s: %s holds %s since %s and nothing justifies it",
					a.ID, h, hold.Resources, hold.Since.Format(time.RFC3339)))
			}
		}
	}
	return accounts, bad, nil
}

// auditPods checks what the provisioner observes of cluster cl (not being
// deleted): the pods that exist request no more than the cluster holds (a
// pod requests what it runs until it is gone). It returns the problem
// found, or "", and whether the cluster turned out deleted or being
// deleted since it was listed.
func (c *Engine) auditPods(ctx context.Context, cl *cluster.Cluster, accounts map[string]*quota.Account) (problem string, gone bool, err error) {
	pods, err := c.ray.Pods(ctx, cl.ID)
	if err != nil && !errs.IsNotFound(err) {
		return "", false, err
	}
	inRay := podRequests(pods)
	if len(pods) == 0 {
		return "", false, nil
	}
	var held quota.Resources
	if a := accounts[cl.QuotaGroup]; a != nil {
		held = a.Held(cl.ID)
	}
	if inRay.Fits(held) {
		return "", false, nil
	}
	// The accounts and the cluster were read before the pods: a start
	// since (reserve first, act second) shows pods and no hold. The
	// cluster and its account as they are now decide, against the pods as
	// they are after them (a hibernate that ended since released its hold
	// after its pods went).
	fcl, err := c.clusters.getFresh(ctx, cl.ID)
	if errs.IsNotFound(err) {
		return "", true, nil
	}
	if err != nil {
		return "", false, err
	}
	if fcl.State == cluster.Deleting {
		return "", true, nil
	}
	held = quota.Resources{}
	if fcl.QuotaGroup != "" {
		a, _, err := fresh[quota.Account](ctx, c.acc, kindResourceGroup, fcl.QuotaGroup)
		if err != nil && !errs.IsNotFound(err) {
			return "", false, err
		}
		if err == nil {
			held = a.Held(cl.ID)
		}
	}
	if pods, err = c.ray.Pods(ctx, cl.ID); err != nil && !errs.IsNotFound(err) {
		return "", false, err
	}
	if inRay = podRequests(pods); !inRay.Fits(held) {
		return fmt.Sprintf("cluster %s is %s and Ray runs %d pods of it requesting %s, but it holds %s in resource group %q",
			cl.ID, fcl.State, len(pods), inRay, held, fcl.QuotaGroup), false, nil
	}
	return "", false, nil
}

// auditLiveHold checks that live cluster cl holds what it runs in its
// resource group (confirmed on the store before it is reported). busy are
// the groups whose accounts kept changing while read: the next audit
// looks at them. It returns the problem found, or "".
func (c *Engine) auditLiveHold(ctx context.Context, cl *cluster.Cluster, accounts map[string]*quota.Account, busy map[string]bool, now time.Time) (string, error) {
	if cl.Live == nil || !cl.State.HoldsQuota() || cl.State == cluster.Deleting {
		return "", nil
	}
	a := accounts[cl.Live.ResourceGroup]
	if a == nil && busy[cl.Live.ResourceGroup] {
		return "", nil
	}
	if a == nil {
		return fmt.Sprintf("cluster %s is %s in resource group %s, which does not exist", cl.ID, cl.State, cl.Live.ResourceGroup), nil
	}
	if _, lacks := c.lacksHold(cl, a); !lacks {
		return "", nil
	}
	need, held, lacks, err := c.confirmLacks(ctx, cl.ID, a.ID, now)
	if err != nil || !lacks {
		return "", err
	}
	return fmt.Sprintf("resource group %s: cluster %s is %s and runs %s but holds %s there",
		a.ID, cl.ID, cl.State, need, held), nil
}
