package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayutils "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// Labels KubeRay puts on the pods of a RayCluster.
const (
	rayLabelNodeType = "ray.io/node-type"
	rayLabelGroup    = "ray.io/group"
)

// indexCluster is the field index, on RayClusters, RayJobs and pods, of
// the KeyClusterID label.
const indexCluster = "dlc.clusterID"

// Provisioner is the Ray side of the Kubernetes backend (a dlc.Provisioner):
//
//   - a cluster is a RayCluster named RayClusterName(id), owned by the
//     cluster's ComputeCluster object (so deleting that deletes it), applied
//     with server-side apply; hibernate and start flip spec.suspend;
//   - an on-demand run's cluster is the run's RayJob (RenderRayJob, with
//     the cluster's id as a label), owned by the cluster's object; KubeRay
//     makes its RayCluster, submits the job when the cluster is up and
//     deletes the cluster when the job ends;
//   - a run on a cluster or a group member goes to the Ray Jobs REST API of
//     the cluster's head (Options.Dashboard, or the API server's service
//     proxy), with the run's id as submission_id.
//
// It reads RayClusters, RayJobs and their pods from an informer cache of
// the namespace (indexed by the cluster id label, so that no call lists
// the namespace) and tells its observers which cluster or run changed;
// jobs on the Jobs API, which has no watch, are looked at again every
// Options.PollInterval while they run. Writes wait for the cache to show
// them, so that a read after a write sees it.
type Provisioner struct {
	c         client.Client
	cache     ctrlcache.Cache
	store     *Store
	namespace string
	groupNS   map[string]string // resource group → namespace (Options.GroupNamespaces)
	render    RenderOptions
	manager   string
	dashboard func(ctx context.Context, rc *rayv1.RayCluster) (string, *http.Client, error)
	poll      time.Duration
	headTime  time.Duration
	heads     *HeadGuard
	logTime   time.Duration
	logHeads  *HeadGuard // log reads: a guard apart from the control calls'
	tokens    func(ctx context.Context, namespace string, ref corev1.SecretKeySelector) (string, error)
	netpol    *NetworkPolicyOptions // nil: no NetworkPolicy kept
	// netpolDone are the resource groups whose NetworkPolicy this process
	// applied.
	netpolDone sync.Map
	// groups remembers clusters' live resource groups (clusterGroup).
	groups  sync.Map
	log     logr.Logger
	stop    func()
	waitFor time.Duration

	mu       sync.Mutex
	watchers backend.Watchers[func(kind, id string)]
	polled   map[string]bool // runs on the Jobs API to look at again
	// rechecks are clusters to look at again from a time on: the end of
	// a head takeover's grace (HeadTakeover), which no event marks.
	rechecks map[string]time.Time
	tick     chan struct{} // closed and replaced on every informer event
	// podsAt is, per cluster, when the informer last saw one of its pods
	// start or stop running (Observation.Since), for a day; podsSwept is
	// the size past which it is swept of older times.
	podsAt    map[string]time.Time
	podsSwept int
	// pods and rcs are what the pod and RayCluster informers keep, by
	// cluster, as their handlers keep them.
	pods clusterIndex[*cachedPod]
	rcs  clusterIndex[*cachedRayCluster]
}

func newProvisioner(ctx context.Context, cfg *rest.Config, st *Store, o Options) (*Provisioner, error) {
	scheme, c, err := newClient(cfg, "kube provisioner", rayv1.AddToScheme)
	if err != nil {
		return nil, err
	}
	ours := labels.SelectorFromSet(labels.Set{KeyManagedBy: ManagedBy})
	hasCluster, err := labels.NewRequirement(KeyClusterID, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	watched := map[string]ctrlcache.Config{o.Namespace: {}}
	for _, ns := range o.GroupNamespaces { // valid names (New)
		watched[ns] = ctrlcache.Config{}
	}
	cache, err := ctrlcache.New(cfg, ctrlcache.Options{
		Scheme:            scheme,
		DefaultNamespaces: watched,
		// Nothing reads an object's managedFields: kept, they were a
		// large share of each RayCluster's and pod's bytes in every
		// replica (issue 43).
		DefaultTransform: ctrlcache.TransformStripManagedFields(),
		ByObject: map[client.Object]ctrlcache.ByObject{
			&rayv1.RayCluster{}: {Label: ours, Transform: cacheRayCluster},
			&rayv1.RayJob{}:     {Label: ours},
			&corev1.Pod{}:       {Label: labels.NewSelector().Add(*hasCluster), Transform: cachePod},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("kube provisioner: %w", err)
	}
	p := &Provisioner{
		c: c, cache: cache, store: st, namespace: o.Namespace, groupNS: maps.Clone(o.GroupNamespaces), render: o.Render,
		manager: o.FieldManager, dashboard: o.Dashboard, poll: o.PollInterval, log: o.Logger,
		headTime: o.HeadTimeout, heads: &HeadGuard{Backoff: o.HeadBackoff},
		logTime: o.LogTimeout, logHeads: &HeadGuard{Backoff: o.HeadBackoff}, tokens: o.RayTokens,
		waitFor: o.Store.WriteWait, netpol: o.NetworkPolicy,
		polled: map[string]bool{}, rechecks: map[string]time.Time{}, tick: make(chan struct{}), podsAt: map[string]time.Time{},
	}
	p.render.Namespace = o.Namespace
	if p.manager == "" {
		p.manager = "dlc"
	}
	if p.poll <= 0 {
		p.poll = 2 * time.Second
	}
	if p.waitFor <= 0 {
		p.waitFor = 10 * time.Second
	}
	if p.log.GetSink() == nil {
		p.log = logr.Discard()
	}
	if p.tokens == nil {
		p.tokens = (&SecretTokens{Client: c}).Token
	}
	if p.dashboard == nil {
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("kube provisioner: a client for the service proxy: %w", err)
		}
		// The proxy passes a head's redirect on, to anywhere: following it
		// would send the API server's credentials there.
		hc.CheckRedirect = noRedirect
		p.dashboard = func(_ context.Context, rc *rayv1.RayCluster) (string, *http.Client, error) {
			base, err := ServiceProxyURL(cfg, rc.Namespace, headService(rc))
			return base, hc, err
		}
	}
	byCluster := func(o client.Object) []string {
		if id := o.GetLabels()[KeyClusterID]; id != "" {
			return []string{id}
		}
		return nil
	}
	// Pods and RayClusters are found by cluster in the provisioner's own
	// indexes (pods, rcs), which hold what their informers keep: no index
	// of the cache's.
	if err := cache.IndexField(ctx, &rayv1.RayJob{}, indexCluster, byCluster); err != nil {
		return nil, fmt.Errorf("kube provisioner: index: %w", err)
	}
	var regs []toolscache.ResourceEventHandlerRegistration
	for _, obj := range []client.Object{&rayv1.RayCluster{}, &rayv1.RayJob{}, &corev1.Pod{}} {
		inf, err := cache.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("kube provisioner: informer: %w", err)
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { p.index(nil, obj); p.podRunning(nil, obj); p.changed(obj) },
			UpdateFunc: func(old, obj any) { p.index(old, obj); p.podRunning(old, obj); p.changed(obj) },
			DeleteFunc: func(obj any) { p.index(obj, nil); p.podRunning(obj, nil); p.changed(obj) },
		})
		if err != nil {
			return nil, fmt.Errorf("kube provisioner: handler: %w", err)
		}
		regs = append(regs, reg)
	}
	run, stop := startCache(ctx, cache)
	timeout := o.Store.SyncTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	synced := cache.WaitForCacheSync(sctx)
	for _, reg := range regs {
		for synced && !reg.HasSynced() {
			select {
			case <-sctx.Done():
				synced = false
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	if !synced {
		stop()
		return nil, errs.Unavailable("kube provisioner sync", fmt.Errorf("caches of namespaces %v did not sync: %w", slices.Sorted(maps.Keys(watched)), context.Cause(sctx)))
	}
	keeping, err := startQuotaKeeper(run, p)
	if err != nil {
		stop()
		return nil, fmt.Errorf("kube provisioner: resource group quotas: %w", err)
	}
	polling := make(chan struct{})
	go func() { defer close(polling); p.poller(run) }()
	p.stop = func() { stop(); keeping(); awaitStopped(polling) }
	return p, nil
}

// Close stops the provisioner's informers and its poller, and waits until
// they have stopped (see startCache).
func (p *Provisioner) Close() { p.stop() }

// Observe calls f with "cluster" and the id of a cluster whose RayCluster,
// RayJob or pods changed, and with "run" and the id of a run whose RayJob
// changed or whose job on a Jobs API is due to be looked at again, until
// the backend is closed. f must return quickly.
//
// It first calls f with every cluster that has a RayCluster or RayJob in a
// resource group's own namespace (Options.GroupNamespaces), as the cache
// has them now: their informers' first events came before any observer,
// and such an object has no owner that the garbage collector would follow
// (owner references do not cross namespaces), so one whose cluster is no
// longer stored (its ComputeCluster removed while no client ran) is found
// here, and deleted by the client's look at it, or not at all.
func (p *Provisioner) Observe(ctx context.Context, f func(kind, id string)) {
	p.watchers.Add(ctx, &p.mu, f, nil)
	seen := map[string]bool{}
	for _, ns := range slices.Sorted(maps.Values(p.groupNS)) {
		if ns == p.namespace || seen[ns] {
			continue
		}
		seen[ns] = true
		var rjs rayv1.RayJobList
		if err := p.cache.List(ctx, &rjs, client.InNamespace(ns)); err != nil {
			p.log.Error(err, "listing Ray objects at start", "namespace", ns)
		}
		ids := map[string]bool{}
		for _, id := range p.rcs.ids() {
			for _, rc := range p.rcs.of(id) {
				if rc.Namespace == ns {
					ids[id] = true
				}
			}
		}
		for _, rj := range rjs.Items {
			ids[rj.Labels[KeyClusterID]] = true
		}
		delete(ids, "")
		for _, id := range slices.Sorted(maps.Keys(ids)) {
			f("cluster", id)
		}
	}
}

// changed tells the observers what an informer event is about.
// podRunning notes when a cluster's pod started or stopped running, as
// the informer tells it (old is nil for an add, obj nil for a delete):
// the time its pods changed that ClusterStatus reports
// (Observation.Since), for metering to close an interval then rather
// than when it looks.
func (p *Provisioner) podRunning(old, obj any) {
	before, was := runningPod(old)
	after, is := runningPod(obj)
	pod := after
	if pod == nil {
		pod = before
	}
	if pod == nil || was == is || pod.Labels[KeyClusterID] == "" {
		return
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.podsAt[pod.Labels[KeyClusterID]] = now
	if len(p.podsAt) > p.podsSwept {
		// A time is needed until metering has seen the change (a step,
		// seconds): what is older than a day is dropped, so that the map
		// keeps the clusters that changed lately, not all there ever were.
		for id, at := range p.podsAt {
			if now.Sub(at) > 24*time.Hour {
				delete(p.podsAt, id)
			}
		}
		p.podsSwept = 2 * max(len(p.podsAt), 512)
	}
}

// runningPod returns o as a pod, if it is one (a cachedPod, or a pod),
// and whether it runs as the cluster's observation counts it (podOf):
// running and not being deleted.
func runningPod(o any) (*corev1.Pod, bool) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	if c, ok := o.(*cachedPod); ok {
		o = c.pod()
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return nil, false
	}
	return pod, pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil
}

// index keeps the provisioner's indexes of pods and RayClusters by
// cluster (pods, rcs) as an informer tells of them.
func (p *Provisioner) index(old, obj any) {
	p.pods.update(old, obj)
	p.rcs.update(old, obj)
}

// podsChangedAt returns when cluster id's pods last started or stopped
// running, as podRunning saw it (zero if not since this process began).
func (p *Provisioner) podsChangedAt(id string, gone bool) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.podsAt[id]
	if gone {
		delete(p.podsAt, id)
	}
	return t
}

func (p *Provisioner) changed(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	var notes [][2]string
	id := o.GetLabels()[KeyClusterID]
	switch c := o.(type) {
	case *cachedPod:
		id = c.cluster()
	case *cachedRayCluster:
		id = c.cluster()
	}
	if id != "" {
		notes = append(notes, [2]string{"cluster", id})
	}
	if _, isJob := o.(*rayv1.RayJob); isJob {
		if id := o.GetAnnotations()[KeyRunID]; id != "" {
			notes = append(notes, [2]string{"run", id})
		}
	}
	p.notify(notes...)
}

func (p *Provisioner) notify(notes ...[2]string) {
	p.mu.Lock()
	close(p.tick)
	p.tick = make(chan struct{})
	fs := p.watchers.All()
	p.mu.Unlock()
	for _, n := range notes {
		for _, f := range fs {
			f(n[0], n[1])
		}
	}
}

// poller tells the observers, every poll interval, of the runs on a Jobs
// API that RunStatus found unfinished.
func (p *Provisioner) poller(ctx context.Context) {
	t := time.NewTicker(p.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.heads.Prune()
		p.logHeads.Prune()
		p.mu.Lock()
		ids := make([]string, 0, len(p.polled))
		for id := range p.polled {
			ids = append(ids, id)
		}
		clear(p.polled)
		var due []string
		now := time.Now()
		for id, at := range p.rechecks {
			if !now.Before(at) {
				due = append(due, id)
				delete(p.rechecks, id)
			}
		}
		p.mu.Unlock()
		notes := make([][2]string, 0, len(ids)+len(due))
		for _, id := range ids {
			notes = append(notes, [2]string{"run", id})
		}
		for _, id := range due {
			notes = append(notes, [2]string{"cluster", id})
		}
		if len(notes) > 0 {
			p.notify(notes...)
		}
	}
}

// recheckAt has the observers told of cluster id again at (the poller's
// next tick from then on).
func (p *Provisioner) recheckAt(id string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.rechecks[id]; !ok || at.Before(cur) {
		p.rechecks[id] = at
	}
}

func (p *Provisioner) pollLater(runID string) {
	p.mu.Lock()
	p.polled[runID] = true
	p.mu.Unlock()
}

// getCached reads key from the cache into obj: a RayCluster from the
// provisioner's index (rcs) under obj's cluster id label, anything else
// from the informers' cache.
func (p *Provisioner) getCached(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	into, ok := obj.(*rayv1.RayCluster)
	if !ok {
		return p.cache.Get(ctx, key, obj)
	}
	rc := p.cachedRayCluster(into.Labels[KeyClusterID], key)
	if rc == nil {
		return apierrors.NewNotFound(rayv1.Resource("rayclusters"), key.Name)
	}
	*into = *rc
	return nil
}

// cachedRayCluster returns the cached RayCluster key of cluster id, or nil.
func (p *Provisioner) cachedRayCluster(id string, key types.NamespacedName) *rayv1.RayCluster {
	if id == "" {
		return nil
	}
	for _, c := range p.rcs.of(id) {
		if c.Namespace == key.Namespace && c.Name == key.Name {
			return c.rayCluster()
		}
	}
	return nil
}

// awaitCached waits until the cache's copy of key (read into obj, or a
// NotFound error) satisfies done, ctx is done or the write wait has passed.
func (p *Provisioner) awaitCached(ctx context.Context, obj client.Object, key types.NamespacedName, done func(error) bool) {
	timer := time.NewTimer(p.waitFor)
	defer timer.Stop()
	for {
		p.mu.Lock()
		tick := p.tick
		p.mu.Unlock()
		if done(p.getCached(ctx, key, obj)) {
			return
		}
		select {
		case <-tick:
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		}
	}
}

// ApplyCluster makes Ray follow c at c.Generation: it applies c's
// RayCluster (an on-demand cluster's RayJob) unless the cache shows it at
// that generation already, so that applying a generation again writes
// nothing, or at a newer one, so that a late apply (a replica that read
// the cluster before another's change) never takes Ray back.
func (p *Provisioner) ApplyCluster(ctx context.Context, c *cluster.Cluster) error {
	var obj client.Object
	if c.Temporary {
		cur, err := p.rayJob(ctx, c.ID)
		if err != nil {
			return err
		} else if cur != nil && generationOf(cur) >= c.Generation {
			return nil // at this generation already, or a newer one: never back
		}
		r, err := p.getRun(ctx, c.OwnerRun)
		if err != nil {
			return err
		}
		rj, err := RenderTemporary(c, r, p.renderIn(liveGroup(c)))
		if err != nil {
			return err
		}
		if r.Config.OnDemand != nil {
			if err := p.ensureNetworkPolicy(ctx, r.Config.OnDemand.ResourceGroup); err != nil {
				return err
			}
		}
		if cur != nil {
			// A resize: KubeRay disregards a RayJob's cluster spec once it
			// has made the RayCluster, so the RayCluster is resized itself
			// first; the RayJob, applied second, records the generation.
			if err := p.resizeJobCluster(ctx, c, cur, rj); err != nil {
				return err
			}
		}
		obj = rj
	} else {
		cur, err := p.rayCluster(ctx, c.ID)
		if err != nil {
			return err
		} else if cur != nil && generationOf(cur) >= c.Generation && cur.DeletionTimestamp == nil {
			return nil // at this generation already, or a newer one: a late apply never takes Ray back
		}
		rc, err := RenderRayCluster(c, p.renderIn(liveGroup(c)))
		if err != nil {
			return err
		}
		if err := p.leaveOldNamespace(ctx, c.ID, rc); err != nil {
			return err
		}
		if err := p.ensureNetworkPolicy(ctx, rc.Labels[KeyResourceGroup]); err != nil {
			return err
		}
		if cur != nil && cur.DeletionTimestamp == nil {
			carryOver(rc, cur)
			pods, err := p.podsOf(ctx, c.ID)
			if err != nil {
				return err
			}
			if err := p.keepRemovedGroups(ctx, rc, cur, pods); err != nil {
				return err
			}
			nameSurplus(rc, pods)
		}
		obj = rc
	}
	if obj.GetNamespace() != p.namespace {
		return p.apply(ctx, obj) // owner references do not cross namespaces: the delete deletes it
	}
	owner, err := p.store.ownerOf("cluster", c.ID)
	if err != nil {
		return apiError("read the cluster object", "cluster", c.ID, err)
	}
	if err := SetOwner(obj, owner, v1alpha1.GroupVersion.WithKind("ComputeCluster")); err != nil {
		return err
	}
	return p.apply(ctx, obj)
}

// leaveOldNamespace deletes cluster id's RayCluster in another namespace
// than rc's, left there by the resource group it ran in before (started
// again in a group of another namespace, after an edit while hibernated),
// and then fails the step, which is tried again once it is gone. One that
// is not suspended still runs: it is not deleted, and the step fails
// saying so.
func (p *Provisioner) leaveOldNamespace(ctx context.Context, id string, rc *rayv1.RayCluster) error {
	all, err := p.rayClustersOf(ctx, id, "")
	if err != nil {
		return err
	}
	var old []client.Object
	for i := range all {
		o := &all[i]
		if o.Name != rc.Name || o.Namespace == rc.Namespace || o.DeletionTimestamp != nil {
			continue
		}
		if o.Spec.Suspend == nil || !*o.Spec.Suspend {
			return &errs.StateError{Kind: "ray cluster", ID: id, Op: "move to namespace " + rc.Namespace,
				State: "running in namespace " + o.Namespace, Allowed: []string{"suspended"}}
		}
		old = append(old, o)
	}
	if len(old) == 0 {
		return nil
	}
	if err := p.deleteObjects(ctx, id, old); err != nil {
		return err
	}
	return errs.Unavailable("apply RayCluster "+rc.Name, fmt.Errorf(
		"cluster %s moves to namespace %s: its RayCluster in namespace %s is being deleted first", id, rc.Namespace, old[0].GetNamespace()))
}

// liveGroup is the resource group cluster c runs in (its live one, which
// an edit of its spec changes at its next start), as RenderRayCluster
// labels it.
func liveGroup(c *cluster.Cluster) string {
	if c.Live != nil && c.Live.ResourceGroup != "" {
		return c.Live.ResourceGroup
	}
	return c.Spec.ResourceGroup
}

// nsFor returns the namespace of resource group rg's Ray objects: its own
// (Options.GroupNamespaces), else the backend's.
func (p *Provisioner) nsFor(rg string) string {
	if ns, ok := p.groupNS[rg]; ok {
		return ns
	}
	return p.namespace
}

// renderIn returns the render options of resource group rg's objects: in
// its namespace.
func (p *Provisioner) renderIn(rg string) RenderOptions {
	o := p.render
	o.Namespace = p.nsFor(rg)
	return o
}

// apply writes obj with server-side apply as the field manager, taking
// over fields others set, and waits for the cache to show it.
func (p *Provisioner) apply(ctx context.Context, obj client.Object) error {
	rv, err := p.applyOnly(ctx, obj)
	if err != nil {
		return err
	}
	into := obj.DeepCopyObject().(client.Object)
	p.awaitCached(ctx, into, client.ObjectKeyFromObject(obj), func(err error) bool {
		if err != nil {
			return false
		}
		c, cerr := resourceversion.CompareResourceVersion(into.GetResourceVersion(), rv)
		return into.GetResourceVersion() == rv || (cerr == nil && c >= 0)
	})
	return nil
}

// applyOnly writes obj with server-side apply as the field manager,
// taking over fields others set, and returns the resourceVersion written;
// it waits for no cache (apply does).
func (p *Provisioner) applyOnly(ctx context.Context, obj client.Object) (string, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return "", err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	kind := u.GetKind()
	if err := p.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(p.manager), client.ForceOwnership); err != nil {
		return "", apiError("apply "+kind, kind, obj.GetName(), err)
	}
	return u.GetResourceVersion(), nil
}

// RenderTemporary renders the RayJob of on-demand cluster c, made for its
// run r (c.OwnerRun): RenderRayJob's, with c's worker ceilings (Replicas:
// an autoscaling group's maxReplicas), c's id on the RayJob, on the
// RayCluster KubeRay makes from it and on their pods (KeyClusterID), and
// c's generation (KeyGeneration).
func RenderTemporary(c *cluster.Cluster, r *job.Run, o RenderOptions) (*rayv1.RayJob, error) {
	rj, err := renderRayJob(r, o, c.Replicas)
	if err != nil {
		return nil, err
	}
	ids := idLabels(map[string]string{KeyClusterID: c.ID})
	for k, v := range ids {
		rj.Labels[k] = v
		spec := rj.Spec.RayClusterSpec
		spec.HeadGroupSpec.Template.Labels[k] = v
		for i := range spec.WorkerGroupSpecs {
			spec.WorkerGroupSpecs[i].Template.Labels[k] = v
		}
	}
	rj.Annotations[KeyClusterID] = c.ID
	rj.Annotations[KeyGeneration] = strconv.FormatInt(c.Generation, 10)
	return rj, nil
}

// DeleteCluster deletes the cluster's RayCluster, RayJob and the RayCluster
// of that RayJob; what is gone already is not an error.
func (p *Provisioner) DeleteCluster(ctx context.Context, id string) error {
	var objs []client.Object
	if rj, err := p.rayJob(ctx, id); err != nil {
		return err
	} else if rj != nil {
		objs = append(objs, rj)
	}
	rcs, err := p.rayClustersOf(ctx, id, "") // and what is left of a group it ran in before
	if err != nil {
		return err
	}
	for i := range rcs {
		objs = append(objs, &rcs[i])
	}
	return p.deleteObjects(ctx, id, objs)
}

// deleteObjects deletes cluster id's objects objs (each by its uid, in the
// background) and waits for the cache to show each going.
func (p *Provisioner) deleteObjects(ctx context.Context, id string, objs []client.Object) error {
	for _, obj := range objs {
		if obj.GetDeletionTimestamp() != nil {
			continue
		}
		err := p.c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: new(obj.GetUID())})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return apiError("delete "+obj.GetObjectKind().GroupVersionKind().Kind, "cluster", id, err)
		}
		// Wait for the cache to show it going, so that a delete again soon
		// after writes nothing.
		into := obj.DeepCopyObject().(client.Object)
		p.awaitCached(ctx, into, client.ObjectKeyFromObject(obj), func(err error) bool {
			return apierrors.IsNotFound(err) || (err == nil && (into.GetDeletionTimestamp() != nil || into.GetUID() != obj.GetUID()))
		})
	}
	return nil
}

// ClusterStatus reads what Ray runs of cluster id from its RayCluster's
// spec.suspend, conditions and observedGeneration (an on-demand cluster's
// from its RayJob and the RayJob's RayCluster):
//
//   - the generation is the one the object was applied at (KeyGeneration),
//     once KubeRay has observed the object's latest spec, else none;
//   - suspended: spec.suspend and RayClusterSuspended;
//   - ready: running, RayClusterProvisioned and HeadPodReady;
//   - failed: provisioned once but the head pod is not ready any more (it
//     failed, KubeRay replaces it and the cluster lost its state), or the
//     RayJob failed before its job ran;
//   - pending otherwise, and while a high-availability head is being
//     replaced: with GCS fault tolerance the cluster's state waits in
//     Redis for the new head, so for HeadTakeover after HeadPodReady went
//     false the cluster is not failed (a running cluster stays running,
//     and a run submitted meanwhile waits, retrying, for the new head);
//     past that it is failed, and the observers are told of the cluster
//     again then.
//
// An on-demand cluster whose job has ended reads ready: it did its work,
// and KubeRay shuts it down; the run's reconciler then deletes it.
func (p *Provisioner) ClusterStatus(ctx context.Context, id string) (cluster.Observation, error) {
	rg := p.clusterGroup(ctx, id) // read once for the three lookups
	rj, err := p.rayJobOf(ctx, id, rg)
	if err != nil {
		return cluster.Observation{}, err
	}
	rcs, err := p.rayClustersOf(ctx, id, rg)
	if err != nil {
		return cluster.Observation{}, err
	}
	raw, err := p.podsOfIn(ctx, id, rg)
	if err != nil {
		return cluster.Observation{}, err
	}
	now := time.Now()
	if rj == nil && len(rcs) == 0 {
		// Ray's objects are gone; their pods go after them (the garbage
		// collector deletes them, and each takes its termination grace).
		// Until they have, the cluster is not gone: its hold, released
		// then, would free quota its pods still use.
		if left := lingering(raw, now); len(left) > 0 {
			return cluster.Observation{Phase: cluster.PhasePending, Pods: clusterPods(left),
				Reason: fmt.Sprintf("%d of its pods are still being deleted", len(left))}, nil
		}
		p.podsChangedAt(id, true)
		return cluster.Observation{}, errs.NotFound("ray cluster", id)
	}
	pods := clusterPods(raw)
	since := p.podsChangedAt(id, false)
	var rc *rayv1.RayCluster
	for i := range rcs {
		if rj == nil || rcs[i].Name == rj.Status.RayClusterName {
			rc = &rcs[i]
		}
	}
	if rc != nil {
		if until, ok := takeover(rc, now); ok {
			p.recheckAt(id, until)
		}
	}
	if rj == nil {
		o := clusterObservation(rc, now)
		o.Pods, o.Autoscaled, o.Since = pods, autoscaled(rc), since
		o.Queued = o.Queued || kubeRayOwes(rc, raw)
		return o, nil
	}
	// KubeRay v1.5 leaves a RayJob's status.observedGeneration unset: the
	// generation is our annotation, which ApplyCluster writes once the
	// RayJob's RayCluster has the generation's size (resizeJobCluster).
	o := cluster.Observation{Generation: generationOf(rj), Phase: cluster.PhasePending, Pods: pods, Since: since}
	switch {
	case rc == nil && !jobEnded(rj) && !rayJobFailed(rj):
		o.Queued = true // KubeRay has not made the RayJob's cluster yet
	case rayJobFailed(rj) && !jobEnded(rj):
		o.Phase, o.Reason = cluster.PhaseFailed, rayJobReason(rj)
	case jobEnded(rj):
		o.Phase = cluster.PhaseReady
	case rc != nil:
		ro := clusterObservation(rc, now)
		o.Phase, o.Reason, o.Queued, o.Refused = ro.Phase, ro.Reason, ro.Queued || kubeRayOwes(rc, raw), ro.Refused
		o.Autoscaled = autoscaled(rc)
	}
	return o, nil
}

// LingerBound is how long past its deletion a pod still counts as using
// its requests (see lingering): past it, its node has not confirmed it
// stopped (a node lost, a kubelet down), Kubernetes' pod garbage collector
// is the one to remove it, and a deleted cluster waits for it no longer.
const LingerBound = 10 * time.Minute

// lingering returns the pods of a deleted cluster that still use what they
// request: not finished, and deleted less than LingerBound ago (a pod's
// deletionTimestamp is when its grace ends) or not deleted at all.
func lingering(pods []corev1.Pod, now time.Time) []corev1.Pod {
	var out []corev1.Pod
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if d := pod.DeletionTimestamp; d != nil && now.Sub(d.Time) > LingerBound {
			continue
		}
		out = append(out, pod)
	}
	return out
}

func generationOf(o client.Object) int64 {
	g, _ := strconv.ParseInt(o.GetAnnotations()[KeyGeneration], 10, 64)
	return g
}

// HeadTakeover is how long a RayCluster with GCS fault tolerance (a
// high-availability head) may be without a ready head, once provisioned,
// before its cluster is observed failed: KubeRay replaces the head pod,
// and the new head takes the cluster's state over from Redis. It is
// measured from HeadPodReady's lastTransitionTime, which KubeRay writes
// with its own clock.
const HeadTakeover = 2 * time.Minute

// headClockSkew is how far ahead of the backend's clock a head's
// HeadPodReady transition may be dated and still start a takeover.
const headClockSkew = time.Minute

// takeoverError is the error of a call to a head not made because the
// cluster's high-availability head is being replaced (within its
// HeadTakeover): errors.Is errs.ErrUnavailable, and Busy, so that the
// client's reconcilers retry it with backoff without counting it as a
// failed step. A run waits through a takeover, for HeadTakeover at most:
// the cluster is failed then.
type takeoverError struct{ cluster string }

func (e *takeoverError) Error() string {
	return "ray cluster " + e.cluster + ": unavailable: its high-availability head is being replaced; try again"
}

// Is makes a takeover errors.Is errs.ErrUnavailable.
func (e *takeoverError) Is(target error) bool { return target == errs.ErrUnavailable }

// Busy says the call was not made because the head is being replaced: a
// retry is not a failure.
func (e *takeoverError) Busy() bool { return true }

// inTakeover reports whether rc's head is being replaced within its
// HeadTakeover at now.
func inTakeover(rc *rayv1.RayCluster, now time.Time) bool {
	_, ok := takeover(rc, now)
	return ok
}

// takeover reports whether rc's head is being replaced within its
// HeadTakeover (at now), and until when.
func takeover(rc *rayv1.RayCluster, now time.Time) (until time.Time, ok bool) {
	if rc.Spec.GcsFaultToleranceOptions == nil || rc.DeletionTimestamp != nil || (rc.Spec.Suspend != nil && *rc.Spec.Suspend) ||
		!meta.IsStatusConditionTrue(rc.Status.Conditions, string(rayv1.RayClusterProvisioned)) {
		return time.Time{}, false
	}
	head := meta.FindStatusCondition(rc.Status.Conditions, string(rayv1.HeadPodReady))
	if head == nil || head.Status == metav1.ConditionTrue {
		return time.Time{}, false
	}
	if head.LastTransitionTime.After(now.Add(headClockSkew)) {
		// Dated further ahead than clocks are apart: written by someone
		// else, not believed, or the takeover would never end.
		return time.Time{}, false
	}
	until = head.LastTransitionTime.Add(HeadTakeover)
	return until, now.Before(until)
}

func clusterObservation(rc *rayv1.RayCluster, now time.Time) cluster.Observation {
	o := cluster.Observation{Phase: cluster.PhasePending}
	if rc.Status.ObservedGeneration == rc.Generation {
		o.Generation = generationOf(rc)
	} else {
		o.Queued = true // KubeRay has not reconciled its spec yet: its backlog
	}
	conds := rc.Status.Conditions
	suspended := meta.IsStatusConditionTrue(conds, string(rayv1.RayClusterSuspended))
	provisioned := meta.IsStatusConditionTrue(conds, string(rayv1.RayClusterProvisioned))
	head := meta.FindStatusCondition(conds, string(rayv1.HeadPodReady))
	switch {
	case rc.DeletionTimestamp != nil:
	case rc.Spec.Suspend != nil && *rc.Spec.Suspend:
		if suspended {
			o.Phase = cluster.PhaseSuspended
		} else if meta.IsStatusConditionTrue(conds, string(rayv1.RayClusterSuspending)) {
			// KubeRay suspends in two reconciles: the first says
			// Suspending and deletes the pods, the second, from its
			// queue, says Suspended. Until then the change waits on its
			// backlog.
			o.Queued = true
		}
	case suspended:
	case provisioned && head != nil && head.Status == metav1.ConditionTrue:
		o.Phase = cluster.PhaseReady
	case provisioned && inTakeover(rc, now):
		// Pending: a high-availability head is being replaced.
	case provisioned:
		o.Phase, o.Reason = cluster.PhaseFailed, "the head pod is not ready"
		if head != nil && head.Message != "" {
			o.Reason += ": " + head.Message
		} else if head != nil && head.Reason != "" {
			o.Reason += ": " + head.Reason
		}
		o.Reason = job.ClipMessage(o.Reason)
	}
	o.Refused = quotaRefusal(rc)
	return o
}

// quotaRefusal says which ResourceQuota refuses rc's pods when KubeRay's
// last reconcile failed to create one for it: KubeRay (v1.5.0,
// raycluster_controller.go, calculateStatus) sets the condition
// ReplicaFailure to the error of its pod create, which says "exceeded
// quota: <name>, requested: …" (the API server's quota admission). The
// words kept are the stable ones (not the amounts, which change with
// every pod), so that a cluster's log says it once.
func quotaRefusal(rc *rayv1.RayCluster) string {
	c := meta.FindStatusCondition(rc.Status.Conditions, string(rayv1.RayClusterReplicaFailure))
	if c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	const exceeded = "exceeded quota: "
	i := strings.Index(c.Message, exceeded)
	if i < 0 {
		return ""
	}
	name := c.Message[i+len(exceeded):]
	if j := strings.IndexAny(name, ", "); j >= 0 {
		name = name[:j]
	}
	if len(name) > 253 {
		name = name[:253]
	}
	return fmt.Sprintf("Kubernetes refuses pods of its RayCluster in namespace %s: exceeded quota %s (other pods use what its resource group may request there); it waits for room", rc.Namespace, strconv.Quote(name))
}

// autoscaled is what Ray's autoscaler has written into rc's worker groups
// (replicas, which it owns in those that autoscale), or nil when rc does not
// autoscale or is not running. Replicas left unset read as 0, KubeRay's
// default: the group's minimum.
func autoscaled(rc *rayv1.RayCluster) *cluster.Autoscaled {
	if rc.DeletionTimestamp != nil || !ptr.Deref(rc.Spec.EnableInTreeAutoscaling, false) || ptr.Deref(rc.Spec.Suspend, false) {
		return nil
	}
	a := &cluster.Autoscaled{Generation: generationOf(rc), Workers: map[string]int{}}
	for _, w := range rc.Spec.WorkerGroupSpecs {
		a.Workers[w.GroupName] = int(ptr.Deref(w.Replicas, 0))
	}
	return a
}

// resizeJobCluster gives the RayCluster KubeRay made for on-demand
// cluster c's RayJob (rj as cached) the worker ceilings of rendered (c's
// RayJob at its generation), names the workers beyond them to delete, and
// marks it with c's generation. It updates the RayCluster on the version
// read (a concurrent write, the autoscaler's or KubeRay's, makes it
// conflict and be tried again), changing nothing else of it. A RayCluster
// not made yet is left alone: KubeRay makes it from the RayJob as
// applied.
func (p *Provisioner) resizeJobCluster(ctx context.Context, c *cluster.Cluster, rj, rendered *rayv1.RayJob) error {
	rcs, err := p.rayClusters(ctx, c.ID)
	if err != nil {
		return err
	}
	var rc *rayv1.RayCluster
	for i := range rcs {
		if rcs[i].Name == rj.Status.RayClusterName && rcs[i].DeletionTimestamp == nil {
			rc = &rcs[i]
		}
	}
	if rc == nil || rendered.Spec.RayClusterSpec == nil {
		return nil
	}
	// The update writes the whole object: it is read whole, as the API
	// server has it (the cache keeps no pod templates: slimRayCluster), and
	// made on that version.
	live := &rayv1.RayCluster{}
	if err := p.c.Get(ctx, client.ObjectKeyFromObject(rc), live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return apiError("get RayCluster", "cluster", c.ID, err)
	}
	if live.UID != rc.UID || live.DeletionTimestamp != nil {
		return nil // another one since, or going: the next observation decides
	}
	rc = live
	want := map[string]*rayv1.WorkerGroupSpec{}
	for i := range rendered.Spec.RayClusterSpec.WorkerGroupSpecs {
		w := &rendered.Spec.RayClusterSpec.WorkerGroupSpecs[i]
		want[w.GroupName] = w
	}
	for i := range rc.Spec.WorkerGroupSpecs {
		w := &rc.Spec.WorkerGroupSpecs[i]
		if r, ok := want[w.GroupName]; ok {
			w.MinReplicas, w.MaxReplicas = r.MinReplicas, r.MaxReplicas
		}
	}
	pods, err := p.podsOf(ctx, c.ID)
	if err != nil {
		return err
	}
	nameSurplus(rc, pods)
	if rc.Annotations == nil {
		rc.Annotations = map[string]string{}
	}
	rc.Annotations[KeyGeneration] = strconv.FormatInt(c.Generation, 10)
	if err := p.c.Update(ctx, rc, client.FieldOwner(p.manager)); err != nil {
		return apiError("update RayCluster", "cluster", c.ID, err)
	}
	return nil
}

// carryOver copies into rc, rendered to be applied over cur, what Ray's
// autoscaler owns in cur's worker groups: an autoscaling group's replicas
// and each group's scaleStrategy.workersToDelete. KubeRay's
// workerGroupSpecs is an atomic list for server-side apply, so an apply
// sets every group as a whole: without these the apply would reset what
// the autoscaler wrote. The apply is made on cur's resourceVersion, so
// that a write of the autoscaler's since cur was read makes it conflict
// (and be tried again on the newer object) rather than be lost.
func carryOver(rc, cur *rayv1.RayCluster) {
	rc.ResourceVersion = cur.ResourceVersion
	was := map[string]*rayv1.WorkerGroupSpec{}
	for i := range cur.Spec.WorkerGroupSpecs {
		was[cur.Spec.WorkerGroupSpecs[i].GroupName] = &cur.Spec.WorkerGroupSpecs[i]
	}
	for i := range rc.Spec.WorkerGroupSpecs {
		w := &rc.Spec.WorkerGroupSpecs[i]
		old, ok := was[w.GroupName]
		if !ok {
			continue
		}
		if w.Replicas == nil {
			w.Replicas = old.Replicas
		}
		// Only names of the cluster's own workers of the group: KubeRay
		// deletes whatever pod the list names, and another writer of the
		// RayCluster may have named another's (the admission policy
		// dlc-ray-workers-to-delete refuses it where it is installed).
		w.ScaleStrategy.WorkersToDelete = nil
		prefix := workerPrefix(rc.Name, w.GroupName)
		for _, n := range old.ScaleStrategy.WorkersToDelete {
			if strings.HasPrefix(n, prefix) {
				w.ScaleStrategy.WorkersToDelete = append(w.ScaleStrategy.WorkersToDelete, n)
			}
		}
	}
}

// keepRemovedGroups keeps in rc, with no workers, each worker group of
// cur that rc no longer has while workers of it still run (a start from
// abnormal after an edit that removed the group): KubeRay (v1.5.0,
// raycluster_controller.go reconcilePods) reconciles only the groups in
// the spec, so a group dropped from it leaves its pods running, held and
// metered, until the RayCluster goes. At replicas, minReplicas and
// maxReplicas 0 KubeRay deletes them (where the autoscaler decides which
// go, nameSurplus names them all); once they are gone, the next apply
// drops the group. A worker group's suspend, which deletes its pods too,
// is refused with the autoscaler on and behind a feature gate
// (validation.go ValidateRayClusterSpec). Only pods named as KubeRay
// names the group's workers count: another's are not ours to delete. The
// cache keeps no pod templates (slimRayCluster), and KubeRay's schema
// and its validation refuse a group without one: the groups kept are
// copied from the RayCluster as the API server has it, at the version
// carried over (a newer one, which the cache has not seen yet, makes the
// apply conflict and be tried again).
func (p *Provisioner) keepRemovedGroups(ctx context.Context, rc, cur *rayv1.RayCluster, pods []corev1.Pod) error {
	removed := removedRunning(rc, pods)
	if len(removed) == 0 {
		return nil
	}
	live := &rayv1.RayCluster{}
	if err := p.c.Get(ctx, client.ObjectKeyFromObject(cur), live); err != nil {
		return apiError("get RayCluster", "cluster", rc.Labels[KeyClusterID], err)
	}
	if live.UID != cur.UID || live.ResourceVersion != cur.ResourceVersion {
		return errs.Conflict("cluster", rc.Labels[KeyClusterID], "its RayCluster changed since it was read: applied again once it is seen")
	}
	keepGroups(rc, live, removed)
	return nil
}

// removedRunning returns the worker groups rc does not have that run
// workers of rc's (named as KubeRay names them) among pods.
func removedRunning(rc *rayv1.RayCluster, pods []corev1.Pod) map[string]bool {
	var running map[string]bool
	for g := range ownWorkers(rc.Name, pods) {
		if !slices.ContainsFunc(rc.Spec.WorkerGroupSpecs, func(w rayv1.WorkerGroupSpec) bool { return w.GroupName == g }) {
			if running == nil {
				running = map[string]bool{}
			}
			running[g] = true
		}
	}
	return running
}

// ownWorkers returns, by worker group, the pods among pods that are
// RayCluster rc's running workers (not being deleted): those named as
// KubeRay names a worker of their group. A pod that carries a group's
// labels but not such a name is not ours to count or name (nor would
// admission let us name it).
func ownWorkers(rc string, pods []corev1.Pod) map[string][]*corev1.Pod {
	byGroup := map[string][]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		g := p.Labels[rayLabelGroup]
		if p.Labels[rayLabelNodeType] == "worker" && p.DeletionTimestamp == nil && strings.HasPrefix(p.Name, workerPrefix(rc, g)) {
			byGroup[g] = append(byGroup[g], p)
		}
	}
	return byGroup
}

// keepGroups appends to rc each worker group of full (a RayCluster read
// whole) named in groups, with no workers and none named to delete.
func keepGroups(rc, full *rayv1.RayCluster, groups map[string]bool) {
	for i := range full.Spec.WorkerGroupSpecs {
		w := &full.Spec.WorkerGroupSpecs[i]
		if !groups[w.GroupName] {
			continue
		}
		g := *w.DeepCopy()
		g.Replicas, g.MinReplicas, g.MaxReplicas = ptr.To[int32](0), ptr.To[int32](0), ptr.To[int32](0)
		g.ScaleStrategy.WorkersToDelete = nil
		rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs, g)
	}
}

// workerPrefix is how the names of a RayCluster's workers of a group
// begin: KubeRay (v1.5.0, utils.PodName) generates them from
// lower((<cluster>-<group>)[:50]) + "-worker-".
func workerPrefix(cluster, group string) string {
	p := cluster + "-" + group
	if len(p) > 50 {
		p = p[:50]
	}
	return strings.ToLower(p) + "-worker-"
}

// nameSurplus adds to rc's scaleStrategy.workersToDelete the workers of
// each group beyond what rc lets the group run (its maxReplicas; its
// replicas for a group that does not autoscale), newest first: with
// in-tree autoscaling on, KubeRay deletes a worker on a scale-down only if
// it is named there (it leaves the choice to Ray's autoscaler), so a
// shrink the platform decides (an edit, a lower ceiling) would otherwise
// leave running the workers whose quota it gives back. Workers named
// already are not counted.
func nameSurplus(rc *rayv1.RayCluster, pods []corev1.Pod) {
	if !ptr.Deref(rc.Spec.EnableInTreeAutoscaling, false) || ptr.Deref(rc.Spec.Suspend, false) {
		return
	}
	byGroup := ownWorkers(rc.Name, pods)
	for i := range rc.Spec.WorkerGroupSpecs {
		w := &rc.Spec.WorkerGroupSpecs[i]
		allowed := int(ptr.Deref(w.MaxReplicas, 0))
		if w.Replicas != nil && ptr.Deref(w.MinReplicas, 0) == ptr.Deref(w.MaxReplicas, 0) {
			allowed = min(allowed, int(*w.Replicas))
		}
		var rest []*corev1.Pod
		for _, p := range byGroup[w.GroupName] {
			if !slices.Contains(w.ScaleStrategy.WorkersToDelete, p.Name) {
				rest = append(rest, p)
			}
		}
		surplus := len(rest) - allowed
		if surplus <= 0 {
			continue
		}
		sort.Slice(rest, func(i, j int) bool {
			a, b := rest[i].CreationTimestamp, rest[j].CreationTimestamp
			if !a.Equal(&b) {
				return b.Before(&a)
			}
			return rest[i].Name > rest[j].Name
		})
		for _, p := range rest[:surplus] {
			w.ScaleStrategy.WorkersToDelete = append(w.ScaleStrategy.WorkersToDelete, p.Name)
		}
	}
}

func rayJobFailed(rj *rayv1.RayJob) bool {
	switch rj.Status.JobDeploymentStatus {
	case rayv1.JobDeploymentStatusFailed, rayv1.JobDeploymentStatusValidationFailed:
		return true
	}
	return false
}

func jobEnded(rj *rayv1.RayJob) bool { return rayv1.IsJobTerminal(rj.Status.JobStatus) }

// rayJobReason says why a RayJob failed, clipped to job.MaxMessage: its
// message is what KubeRay copied from the head, which the user's image
// controls.
func rayJobReason(rj *rayv1.RayJob) string {
	why := strings.TrimSpace(rj.Status.Message)
	if why == "" {
		why = string(rj.Status.Reason)
	}
	if why == "" {
		why = "the RayJob " + string(rj.Status.JobDeploymentStatus)
	}
	return job.ClipMessage(why)
}

// SubmitRun submits run r to cluster c's Ray Jobs API, under the run's id
// as submission_id, unless its RayCluster follows a newer generation than
// c's (ErrConflict: the caller's read is behind, and the cluster may have
// been hibernated since). An on-demand run needs no submit: KubeRay submits its
// RayJob's job once the cluster is up. While the cluster's
// high-availability head is being replaced it fails with a busy
// ErrUnavailable, as RunStatus does.
func (p *Provisioner) SubmitRun(ctx context.Context, r *job.Run, c *cluster.Cluster) error {
	if r.Config.OnDemand != nil || c.Temporary {
		return nil
	}
	rc, err := p.rayCluster(ctx, c.ID)
	if err != nil {
		return err
	}
	if rc != nil && generationOf(rc) > c.Generation {
		return errs.Conflict("ray cluster", c.ID, fmt.Sprintf("its RayCluster follows generation %d, newer than %d", generationOf(rc), c.Generation))
	}
	if rc != nil && inTakeover(rc, time.Now()) {
		return &takeoverError{cluster: c.ID}
	}
	if rc == nil || clusterObservation(rc, time.Now()).Phase != cluster.PhaseReady {
		return &errs.StateError{Kind: "ray cluster", ID: c.ID, Op: "submit a job", State: "not ready", Allowed: []string{string(cluster.PhaseReady)}}
	}
	jc, err := p.jobs(ctx, rc)
	if err != nil {
		return err
	}
	req, err := RunRequest(r, p.render)
	if err != nil {
		return err
	}
	if err := jc.Submit(ctx, req); err != nil {
		return err
	}
	p.pollLater(r.ID)
	return nil
}

// StopRun stops the run's job on its cluster's head; a job that has ended,
// or whose cluster has no ready head (so nothing runs), is not an error.
func (p *Provisioner) StopRun(ctx context.Context, runID string) error {
	jc, err := p.headOf(ctx, runID)
	if err != nil || jc == nil {
		return err
	}
	return jc.Stop(ctx, runID)
}

// RunStatus reads an on-demand run's state from its RayJob's status, any
// other run's from its cluster's Jobs API. It fails with ErrNotFound when
// there is no such RayJob, or the head has no such job, and with a busy
// ErrUnavailable while the cluster's high-availability head is being
// replaced (see ClusterStatus).
func (p *Provisioner) RunStatus(ctx context.Context, runID string) (job.Observation, error) {
	r, err := p.getRun(ctx, runID)
	if errs.IsNotFound(err) {
		return job.Observation{}, errs.NotFound("ray job", runID)
	}
	if err != nil {
		return job.Observation{}, err
	}
	if od := r.Config.OnDemand; od != nil {
		var rj rayv1.RayJob
		err := p.cache.Get(ctx, types.NamespacedName{Namespace: p.nsFor(od.ResourceGroup), Name: RayJobName(runID)}, &rj)
		if apierrors.IsNotFound(err) {
			return job.Observation{}, errs.NotFound("ray job", runID)
		}
		if err != nil {
			return job.Observation{}, apiError("read the RayJob", "run", runID, err)
		}
		return rayJobObservation(&rj), nil
	}
	rc, err := p.rayCluster(ctx, r.ClusterID)
	if err != nil {
		return job.Observation{}, err
	}
	if rc == nil || r.ClusterID == "" {
		return job.Observation{}, errs.NotFound("ray job", runID)
	}
	if inTakeover(rc, time.Now()) {
		return job.Observation{}, &takeoverError{cluster: r.ClusterID}
	}
	jc, err := p.jobs(ctx, rc)
	if err != nil {
		return job.Observation{}, err
	}
	info, err := jc.Status(ctx, runID)
	if err != nil {
		return job.Observation{}, err
	}
	if UnknownStatus(info.JobStatus) {
		// The run fails (Observation says why): stop what the head may
		// still run for it, as Ray's own end of a job would have.
		if err := jc.Stop(ctx, runID); err != nil {
			return job.Observation{}, err
		}
	}
	if lost, err := p.driverLost(ctx, rc.Namespace, r.ClusterID, info); err != nil {
		return job.Observation{}, err
	} else if lost != "" {
		// Ray says RUNNING until its job manager, made lazily by the
		// head's agent, recovers the job; a stop makes it (and the job
		// has no supervisor to stop).
		if err := jc.Stop(ctx, runID); err != nil {
			return job.Observation{}, err
		}
		return job.Observation{State: job.Failed, Message: lost}.Bounded(), nil
	}
	o := Observation(&info.RayJobInfo)
	if !o.State.Terminal() {
		p.pollLater(runID)
	}
	return o, nil
}

// LostDriverMessage is what Ray's job manager writes of a job whose
// supervisor (and so its driver) is gone when it recovers the jobs it
// finds running (job_manager.py, _recover_running_jobs).
const LostDriverMessage = "Unexpected error occurred: failed to get job supervisor."

// driverLost says why a job Ray reports running has lost its driver, or
// "" when it has not: no running pod of the cluster has the IP of its
// driver's node (the IP in driver_agent_http_address) — the head was
// replaced, and with it the driver, which Ray runs on the head — or the
// pod that has it restarted its Ray container after Ray accepted the job
// (driverGone). Ray's GET reads the job store and answers RUNNING until
// the job manager recovers it, which happens only on the agent's next
// submit, stop or logs call (job_agent.py). The cache says where to look;
// a fresh list of the cluster's pods decides, so a new pod the cache has
// not seen yet never fails a run.
func (p *Provisioner) driverLost(ctx context.Context, namespace, clusterID string, info *JobInfo) (string, error) {
	ip := info.DriverIP()
	if ip == "" || (info.JobStatus != rayv1.JobStatusRunning && info.JobStatus != rayv1.JobStatusPending) {
		return "", nil
	}
	cached, err := p.podsOf(ctx, clusterID)
	if err != nil {
		return "", err
	}
	if !driverGone(cached, info) {
		return "", nil
	}
	var live corev1.PodList
	if err := p.c.List(ctx, &live, client.InNamespace(namespace), client.MatchingLabels{KeyClusterID: clusterID}); err != nil {
		return "", apiError("list pods", "cluster", clusterID, err)
	}
	if !driverGone(live.Items, info) {
		return "", nil
	}
	return fmt.Sprintf("the job's driver was lost: its node %s runs no more, or its Ray restarted since (the Ray head was replaced); Ray reports it running until its job manager recovers it: %s",
		ip, LostDriverMessage), nil
}

// driverGone reports whether the node of a job's driver is gone from
// pods: no running pod has its IP (any of the pod's IPs), or the head pod
// that has it started its Ray container after Ray accepted the job. Both of
// those times are read off the node's clock (Ray's start_time by the head
// process, a container's start by the kubelet beside it); a container's
// start is kept in whole seconds, so a restart within the second of the
// submit goes unseen, never the other way round.
func driverGone(pods []corev1.Pod, info *JobInfo) bool {
	ip := info.DriverIP()
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || !hasIP(pod, ip) {
			continue
		}
		accepted := rayTime(info.StartTime)
		for _, cs := range pod.Status.ContainerStatuses {
			// The head's only: Ray accepts a job on the head, which runs
			// before it; a worker may start after (a driver placed there
			// waited for it).
			if cs.Name == HeadContainer && cs.State.Running != nil &&
				!accepted.IsZero() && cs.State.Running.StartedAt.After(accepted) {
				return true // its Ray restarted after the job was accepted
			}
		}
		return false
	}
	return true
}

// hasIP reports whether ip is one of pod's IPs.
func hasIP(pod *corev1.Pod, ip string) bool {
	if pod.Status.PodIP == ip {
		return true
	}
	for _, a := range pod.Status.PodIPs {
		if a.IP == ip {
			return true
		}
	}
	return false
}

// rayJobObservation says what a RayJob's status means for its run. Its
// job status and message are what KubeRay copied from the head: a status
// none of Ray's fails the run (deleting its RayJob stops the job), and the
// observation is bounded (job.Observation.Bounded).
func rayJobObservation(rj *rayv1.RayJob) job.Observation {
	st := rj.Status
	o := job.Observation{Message: st.Message}
	switch {
	case st.JobStatus == rayv1.JobStatusNew: // not submitted yet
		o.State = job.Provisioning
		if rayJobFailed(rj) {
			o.State, o.Message = job.Failed, rayJobReason(rj)
		}
	case UnknownStatus(st.JobStatus):
		o.State, o.Message = job.Failed, unknownStatusMessage(st.JobStatus)
	default:
		o.State = rayJobStates[st.JobStatus]
	}
	// Not StartedAt: KubeRay copies Ray's start_time, which is when Ray
	// accepted the job, not when its driver started.
	if t := st.RayJobStatusInfo.EndTime; t != nil {
		o.EndedAt = t.UTC()
	} else if t := st.EndTime; t != nil && o.State.Terminal() {
		o.EndedAt = t.UTC()
	}
	return o.Bounded()
}

// Logs returns the run's log lines so far from its cluster's head; none
// when the cluster has no ready head (any more).
func (p *Provisioner) Logs(ctx context.Context, runID string) ([]string, error) {
	jc, err := p.headOf(ctx, runID)
	if err != nil || jc == nil {
		return nil, err
	}
	s, err := jc.Logs(ctx, runID)
	if errs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil, nil
	}
	return strings.Split(s, "\n"), nil
}

// headOf returns the Jobs API of the head where run runID runs, or nil
// when it has none that is ready (or no such run is stored).
func (p *Provisioner) headOf(ctx context.Context, runID string) (*JobsClient, error) {
	r, err := p.getRun(ctx, runID)
	if errs.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rc *rayv1.RayCluster
	if od := r.Config.OnDemand; od != nil {
		var rj rayv1.RayJob
		err := p.cache.Get(ctx, types.NamespacedName{Namespace: p.nsFor(od.ResourceGroup), Name: RayJobName(runID)}, &rj)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, apiError("read the RayJob", "run", runID, err)
		}
		if rj.Status.RayClusterName != "" {
			rc = p.cachedRayCluster(rj.Labels[KeyClusterID], types.NamespacedName{Namespace: rj.Namespace, Name: rj.Status.RayClusterName})
		}
	} else if r.ClusterID != "" {
		if rc, err = p.rayCluster(ctx, r.ClusterID); err != nil {
			return nil, err
		}
	}
	if rc == nil || !headReady(rc) {
		return nil, nil
	}
	return p.jobs(ctx, rc)
}

func headReady(rc *rayv1.RayCluster) bool {
	return rc.DeletionTimestamp == nil && meta.IsStatusConditionTrue(rc.Status.Conditions, string(rayv1.HeadPodReady))
}

// jobs returns the Jobs API client of a RayCluster's head, with the
// cluster's Ray token when it has token authentication.
func (p *Provisioner) jobs(ctx context.Context, rc *rayv1.RayCluster) (*JobsClient, error) {
	base, hc, err := p.dashboard(ctx, rc)
	if err != nil {
		return nil, errs.Unavailable("reach the dashboard of RayCluster "+rc.Name, err)
	}
	jc := &JobsClient{Base: base, HTTP: hc, Timeout: p.headTime, Guard: p.heads, LogGuard: p.logHeads, LogTimeout: p.logTime}
	if ref := RayTokenOf(rc); ref != nil {
		if jc.Token, err = p.tokens(ctx, rc.Namespace, *ref); err != nil {
			return nil, err
		}
	}
	return jc, nil
}

// headService is the name of a RayCluster's head service.
func headService(rc *rayv1.RayCluster) string {
	if s := rc.Status.Head.ServiceName; s != "" {
		return s
	}
	if h := rc.Spec.HeadGroupSpec.HeadService; h != nil && h.Name != "" {
		return h.Name
	}
	return rc.Name + "-head-svc"
}

// Pods returns the cluster's pods, by name: the RayCluster's (an on-demand
// cluster's RayJob's RayCluster's), found by the cluster id label.
func (p *Provisioner) Pods(ctx context.Context, clusterID string) ([]cluster.Pod, error) {
	pods, err := p.podsOf(ctx, clusterID)
	if err != nil {
		return nil, err
	}
	return clusterPods(pods), nil
}

// kubeRayOwes reports whether KubeRay has work on an unsuspended
// RayCluster rc that its status does not show done yet, past a spec it has
// observed: the pods it has not made (no head pod: it makes them in the
// reconcile after the one that takes a suspension off, which comes from
// its queue), or pods all running and ready that its status does not say
// yet (it learns of its pods' changes through its queue). A step waiting
// on either waits on the operator's backlog, not on the cluster. Pods that
// exist and are not ready are the cluster's own progress.
func kubeRayOwes(rc *rayv1.RayCluster, pods []corev1.Pod) bool {
	if rc == nil || rc.DeletionTimestamp != nil || ptr.Deref(rc.Spec.Suspend, false) {
		return false
	}
	conds := rc.Status.Conditions
	if meta.IsStatusConditionTrue(conds, string(rayv1.RayClusterProvisioned)) && meta.IsStatusConditionTrue(conds, string(rayv1.HeadPodReady)) {
		return false
	}
	head, ready := false, true
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		head = head || pod.Labels[rayLabelNodeType] == "head"
		ready = ready && rayutils.IsRunningAndReady(pod)
	}
	return !head || ready
}

// clusterPods returns pods as the SDK shows them, by name.
func clusterPods(pods []corev1.Pod) []cluster.Pod {
	out := make([]cluster.Pod, 0, len(pods))
	for i := range pods {
		out = append(out, podOf(&pods[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// podsOf lists cluster clusterID's pods from the cache, by the cluster id
// label: those a RayCluster controls (KubeRay's), in their place
// (inPlace). A pod someone else made with the label is not counted in the
// cluster's hold, nor waited for when it is deleted.
func (p *Provisioner) podsOf(ctx context.Context, clusterID string) ([]corev1.Pod, error) {
	return p.podsOfIn(ctx, clusterID, p.clusterGroup(ctx, clusterID))
}

// podsOfIn is podsOf for cluster clusterID of live resource group rg.
func (p *Provisioner) podsOfIn(ctx context.Context, clusterID, rg string) ([]corev1.Pod, error) {
	cached := p.pods.of(clusterID)
	out := make([]corev1.Pod, 0, len(cached))
	for _, c := range cached {
		if pod := c.pod(); p.rayPodIn(pod, rg) {
			out = append(out, *pod)
		}
	}
	return out, nil
}

// rayPodIn reports whether pod is a RayCluster's of resource group rg in
// its place (podsOfIn).
func (p *Provisioner) rayPodIn(pod *corev1.Pod, rg string) bool {
	owner := metav1.GetControllerOf(pod)
	return owner != nil && owner.Kind == "RayCluster" && strings.HasPrefix(owner.APIVersion, rayv1.GroupVersion.Group+"/") &&
		p.inPlace(pod, rg)
}

func podOf(pod *corev1.Pod) cluster.Pod {
	out := cluster.Pod{
		Name: pod.Name, IP: pod.Status.PodIP, Role: pod.Labels[rayLabelNodeType], Node: pod.Spec.NodeName,
		Group: pod.Labels[KeyNodeGroup], Status: string(pod.Status.Phase), CreatedAt: pod.CreationTimestamp.UTC(),
		NodeSpec: pod.Annotations[KeyNodeSpec],
	}
	if out.Group == "" {
		out.Group = pod.Labels[rayLabelGroup]
	}
	if pod.DeletionTimestamp != nil {
		out.Status = "Terminating"
	}
	if i := rayContainer(pod); i >= 0 {
		out.Image = pod.Spec.Containers[i].Image
	}
	out.Requests = podResources(pod, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Requests })
	out.Limits = podResources(pod, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Limits })
	return out
}

// podResources is what pod requests (or is limited to, by of) as
// Kubernetes counts it for a ResourceQuota and the scheduler
// (k8s.io/component-helpers/resource, PodRequests): its containers added
// up, with its restartable init containers (sidecars), at least each
// other init container with the sidecars started before it, plus its
// overhead. The autoscaler KubeRay adds to a head and the init container
// it adds to workers count, as they count against the namespace's quota.
func podResources(pod *corev1.Pod, of func(corev1.ResourceRequirements) corev1.ResourceList) quota.Resources {
	var sum, sidecars, initMax quota.Resources
	for _, c := range pod.Spec.Containers {
		sum = sum.Add(resourcesOf(of(c.Resources)))
	}
	for _, c := range pod.Spec.InitContainers {
		r := resourcesOf(of(c.Resources))
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum, sidecars = sum.Add(r), sidecars.Add(r)
			continue
		}
		initMax = initMax.Max(r.Add(sidecars))
	}
	return sum.Max(initMax).Add(resourcesOf(pod.Spec.Overhead))
}

func resourcesOf(l corev1.ResourceList) quota.Resources {
	r := quota.Resources{}
	if q, ok := l[corev1.ResourceCPU]; ok {
		r.MilliCPU = q.MilliValue()
	}
	if q, ok := l[corev1.ResourceMemory]; ok {
		r.Memory = q.Value()
	}
	if q, ok := l[GPUResource]; ok {
		r.GPU = q.Value()
	}
	return r
}

// Dashboard returns the address of a cluster's Ray dashboard while its head
// is ready, else "".
func (p *Provisioner) Dashboard(ctx context.Context, clusterID string) (string, error) {
	rcs, err := p.rayClusters(ctx, clusterID)
	if err != nil {
		return "", err
	}
	for i := range rcs {
		if headReady(&rcs[i]) {
			base, _, err := p.dashboard(ctx, &rcs[i])
			if err != nil {
				return "", errs.Unavailable("reach the dashboard of RayCluster "+rcs[i].Name, err)
			}
			return base, nil
		}
	}
	return "", nil
}

// rayCluster returns the RayCluster of (not on-demand) cluster id from the
// cache, or nil.
func (p *Provisioner) rayCluster(ctx context.Context, id string) (*rayv1.RayCluster, error) {
	rcs, err := p.rayClusters(ctx, id) // in whichever namespace its resource group's is
	if err != nil {
		return nil, err
	}
	for i := range rcs {
		// Not another id's whose name hashes the same, nor a RayJob's.
		if rcs[i].Name == RayClusterName(id) && rcs[i].Annotations[KeyClusterID] == id {
			return &rcs[i], nil
		}
	}
	return nil, nil
}

// rayClusters returns the RayClusters labelled with cluster id, in their
// place (inPlace): its own, or its RayJob's.
func (p *Provisioner) rayClusters(ctx context.Context, id string) ([]rayv1.RayCluster, error) {
	return p.rayClustersOf(ctx, id, p.clusterGroup(ctx, id))
}

// rayClustersOf returns the RayClusters labelled with cluster id in their
// place (inPlace) for resource group rg; "" takes those of any group, each
// in its own group's namespace (what is left of a group the cluster ran in
// before, which a start or a delete removes).
func (p *Provisioner) rayClustersOf(ctx context.Context, id, rg string) ([]rayv1.RayCluster, error) {
	var out []rayv1.RayCluster
	for _, c := range p.rcs.of(id) {
		if rc := c.rayCluster(); p.inPlace(rc, rg) {
			out = append(out, *rc)
		}
	}
	return out, nil
}

// rayJob returns the RayJob of on-demand cluster id, in its place
// (inPlace), or nil.
func (p *Provisioner) rayJob(ctx context.Context, id string) (*rayv1.RayJob, error) {
	return p.rayJobOf(ctx, id, p.clusterGroup(ctx, id))
}

// rayJobOf is rayJob for cluster id of live resource group rg.
func (p *Provisioner) rayJobOf(ctx context.Context, id, rg string) (*rayv1.RayJob, error) {
	var list rayv1.RayJobList
	if err := p.cache.List(ctx, &list, client.MatchingFields{indexCluster: id}); err != nil {
		return nil, apiError("list RayJobs", "cluster", id, err)
	}
	for i := range list.Items {
		if p.inPlace(&list.Items[i], rg) {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// inPlace reports whether o, labelled with a cluster's id, is where the
// backend puts that cluster's objects: in the namespace of its own
// resource group (KeyResourceGroup, Options.GroupNamespaces), and of the
// cluster's live group rg when it is known. An object with the id in
// another group's namespace, whose editors may write it there, is not the
// cluster's: a RayCluster made there would otherwise be taken for the
// cluster's, its head given the cluster's jobs and its pods counted in the
// cluster's hold.
func (p *Provisioner) inPlace(o client.Object, rg string) bool {
	own := o.GetLabels()[KeyResourceGroup]
	if rg != "" && own != rg {
		return false
	}
	return o.GetNamespace() == p.nsFor(own)
}

// clusterGroup returns the live resource group of cluster id as the
// store's cache has it (liveGroup), or "" when it has no such cluster (a
// leftover of one deleted). The last one read is remembered by the
// document's version.
func (p *Provisioner) clusterGroup(_ context.Context, id string) string {
	if len(p.groupNS) == 0 {
		return "" // one namespace: nothing to tell apart
	}
	d, ok := p.store.cached("cluster", id)
	if !ok {
		return ""
	}
	if g, ok := p.groups.Load(id); ok && g.(seenGroup).version == d.Version {
		return g.(seenGroup).rg
	}
	var c cluster.Cluster
	if err := json.Unmarshal(d.Data, &c); err != nil {
		return ""
	}
	rg := liveGroup(&c)
	p.groups.Store(id, seenGroup{d.Version, rg})
	return rg
}

// seenGroup is a cluster's live resource group at a version of it.
type seenGroup struct{ version, rg string }

// getRun reads a run from the store's cache.
func (p *Provisioner) getRun(ctx context.Context, id string) (*job.Run, error) {
	d, err := p.store.Get(ctx, "run", id)
	if err != nil {
		return nil, err
	}
	var r job.Run
	if err := json.Unmarshal(d.Data, &r); err != nil {
		return nil, errors.Join(fmt.Errorf("kube provisioner: run %s: %w", id, err), errs.ErrInvalid)
	}
	return &r, nil
}
