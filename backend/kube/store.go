package kube

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
)

// Keys of the metadata the store writes on its objects.
const (
	// StoreKeyID is an annotation holding the document's id, which the
	// object's name is only when the id is a valid DNS-1123 subdomain.
	StoreKeyID = "store.dlc.aidlc.io/id"
	// StoreKeyLabels is an annotation holding the document's labels as a
	// JSON object, the truth the store lists by, for the kinds whose
	// status has no storeLabels (resource groups, name claims; the others
	// keep them in status.storeLabels, so that a change of state is one
	// status write). The metadata labels of those kinds are a copy for
	// kubectl, under StoreLabelPrefix, of the pairs that are valid
	// Kubernetes labels.
	StoreKeyLabels = "store.dlc.aidlc.io/labels"
	// StoreKeyKind is a label of the StoreEntries that hold documents,
	// naming their kind ("name" for name claims); the store's StoreEntry
	// informer selects by it.
	StoreKeyKind = "store.dlc.aidlc.io/kind"
	// StoreKeyInitialStatus is an annotation holding a document's status
	// as it was created: the API server drops status on create, so a
	// create is one write, and readers take the status from here until
	// the status subresource is first written.
	StoreKeyInitialStatus = "store.dlc.aidlc.io/initial-status"
	// StoreLabelPrefix prefixes a document's label key in metadata.labels.
	StoreLabelPrefix = "dlc.aidlc.io/"
)

// StoreOptions configures a Store.
type StoreOptions struct {
	// SyncTimeout bounds NewStore's wait for the informer caches to fill
	// (default 1 min).
	SyncTimeout time.Duration
	// WriteWait bounds how long a write waits, after the API server took
	// it, for the cache to show it, so that a Get after a write reads it
	// (default 10s; on timeout the write still succeeds).
	WriteWait time.Duration
	// NoEvents turns off the Kubernetes Events the store writes for the
	// system entries of the documents' event logs (see Store).
	NoEvents bool
	// Logger receives what the store does not return, such as an Event it
	// could not write (default: discarded).
	Logger logr.Logger
}

// Store is a backend.Store on a Kubernetes API server: each document is an
// object of dlc.aidlc.io/v1alpha1 in one namespace (a name claim, a
// membership or a settled reservation is a StoreEntry), its Version the object's resourceVersion. Reads (Get, List,
// Watch) are served from informer caches, which every write waits for
// (see StoreOptions.WriteWait), so a client reads its own writes; writes
// go to the API server with the version as a compare-and-swap.
//
// A document's Data is split into the object's spec and status by the
// JSON names of the v1alpha1 types, and joined back on reads: a Get
// returns Data that decodes to the same domain value as the one written,
// except that empty slices and maps read as absent (nil). A domain field
// that the kind's types have no place for is refused (ErrInvalid) rather
// than dropped.
//
// The API server drops status on create and ignores it on update. A
// Create is one write: the status rides in the StoreKeyInitialStatus
// annotation, which readers take as the status until the status
// subresource is first written (a write of the main resource after that
// drops the annotation). A create whose status holds nothing but what the
// store derives for kubectl (a resource group's, before its first
// reservation) writes no annotation, and the status right after, best
// effort. An Update writes only the parts that
// changed: the main resource when the spec or the metadata did, the
// status subresource when the status did. For the kinds whose status has
// storeLabels (all but resource groups and name claims) the document's
// labels are part of the status, so that a change of state and of the
// labels that follow it is one status write. When both parts change, the
// main resource goes first, then the status with the resourceVersion the
// first write returned; if the second fails, Update returns the error
// with the spec written and the status as it was, at a new version, so
// that the caller's retry with its old version is a conflict and it
// re-reads. Between the two writes readers and watchers (of this store
// and of any other on the namespace) may see the new spec with the old
// status. An update that changes nothing is still written (the API server
// keeps the version) so that a stale version is a conflict. An update at
// a version older than the one the cache has is a conflict without a call.
//
// Labels and annotations are the store's: an update replaces any that
// others put on the object. A run's job config, a label that never
// changes, is also written to the Run's metadata.labels
// (dlc.aidlc.io/job), so that ListLatest by job has the API server select
// (once every cached Run carries it: a Run an older version wrote lists
// every Run until its next update labels it; during an upgrade, one that
// an older replica writes is missed by such a list until this store's
// cache has seen it, as a list of the cache would miss it). For kubectl alone, and derived from the
// object's own fields on every write, the store also writes a resource
// group's status.reserved and status.summary (reservations beside the
// capacity in cores and binary units), a finished run's
// status.summary.duration, and a compute cluster's label
// v1alpha1.LabelOnDemand; readers drop them.
//
// Watch reports the changes of one kind in the order the API server made
// them; changes of different kinds come from different informers, and
// their relative order is only roughly the order they were made in.
//
// Unless StoreOptions.NoEvents, each system entry (Source "system": what
// the platform did, such as a cluster becoming running or abnormal) that
// a successful Create or Update adds to a document's event log is also
// written as a Kubernetes Event on its object, so that kubectl describe
// and kubectl get events show it: reason the entry's action in
// UpperCamelCase ("running" is Running), message its message, type
// Warning when the entry says something went wrong (abnormal, failed, a
// step refused or retried), else Normal, component "dlc". Entries are
// new when the log before the write (as the store's cache had it) holds
// no equal entry. The Events are best effort: written asynchronously,
// rate-limited and aggregated per object by client-go's event
// broadcaster, a failure logged (StoreOptions.Logger) and never the
// write's; the store needs permission to create and patch events.
type Store struct {
	c         client.Client
	namespace string
	opts      StoreOptions
	stop      func()
	events    *eventRecorder // nil when StoreOptions.NoEvents
	listPage  int64          // objects per page of a ListLatest
	listed    atomic.Int64   // objects ListLatest has read, for tests

	mu   sync.RWMutex
	docs map[string]map[string]entry // kind → id → entry
	// unselectable holds, per kind with selectable labels, the documents
	// whose object lacks one of them in metadata.labels (written by a
	// version before they were): while any does, ListLatest lists every
	// object of the kind.
	unselectable map[string]map[string]bool
	lastRV       map[string]string // kind → resourceVersion of the last event applied
	// ticks holds, per kind, a channel closed and replaced on every change
	// of a document of the kind: what a write's wait for its cache waits
	// on (await), woken only by its own kind's changes.
	ticks    map[string]chan struct{}
	watchers backend.Watchers[func(backend.Change)]
}

// entry is a cached document with the parts its writes compare.
type entry struct {
	doc  backend.Doc
	name string
	uid  types.UID // the object's, for an owner reference to it (ownerOf)
	// The sums (SHA-256) of the labels and annotations, the spec (the data
	// of a StoreEntry) and the status, each as canonical JSON: an update
	// compares what it writes with them, to write only the parts that
	// changed. Sums, not the JSON: every replica keeps an entry per stored
	// object, and the JSON was as large again as the document (issue 43).
	meta, spec, status [sha256.Size]byte
	initial            string // the initial-status annotation, while the status subresource is unwritten
}

// kindInfo says how a kind is stored.
type kindInfo struct {
	kind string
	// newObj returns an empty object of the kind's type.
	newObj func() client.Object
	// typ is the Go type of the kind's objects, when they are not
	// StoreEntries (storeKindOf).
	typ reflect.Type
	// status reports whether the type has a status subresource.
	status bool
	// specKeys and statusKeys are the top-level JSON names of the spec
	// and status types.
	specKeys, statusKeys map[string]bool
	// nested is the domain key whose object is the spec ("spec" for a
	// cluster), with topSpec the spec keys that are instead top-level in
	// the domain JSON.
	nested  string
	topSpec map[string]bool
	// derived are the status keys the store derives on every write, for
	// kubectl (see present); dropStatus are those and the other status
	// keys the domain has not (storeLabels, which are the labels).
	derived, dropStatus map[string]bool
	// selectable are the label keys of a kind that keeps its labels in
	// its status whose value never changes once a document is created (a
	// run's job config): they are also written to metadata.labels, so
	// that ListLatest has the API server select by them.
	selectable []string
}

var kinds = map[string]*kindInfo{}

func init() {
	add := func(kind string, newObj func() client.Object) *kindInfo {
		k := &kindInfo{kind: kind, newObj: newObj, status: true, typ: reflect.TypeOf(newObj())}
		t := k.typ.Elem()
		sf, _ := t.FieldByName("Spec")
		st, _ := t.FieldByName("Status")
		k.specKeys = jsonKeys(sf.Type)
		k.statusKeys = jsonKeys(st.Type)
		kinds[kind] = k
		return k
	}
	cl := add("cluster", func() client.Object { return &v1alpha1.ComputeCluster{} })
	cl.nested = "spec"
	cl.topSpec = map[string]bool{}
	domainSpec := jsonKeys(reflect.TypeFor[cluster.Spec]())
	for key := range cl.specKeys {
		if !domainSpec[key] {
			cl.topSpec[key] = true
		}
	}
	add("group", func() client.Object { return &v1alpha1.ClusterGroup{} })
	add("template", func() client.Object { return &v1alpha1.ClusterTemplate{} })
	add("job", func() client.Object { return &v1alpha1.JobConfig{} })
	run := add("run", func() client.Object { return &v1alpha1.Run{} })
	run.derived = map[string]bool{"summary": true}
	run.selectable = []string{"job"} // the platform never moves a run to another config
	rg := add("resourcegroup", func() client.Object { return &v1alpha1.ResourceGroup{} })
	rg.derived = map[string]bool{"summary": true}
	for _, k := range kinds {
		k.dropStatus = maps.Clone(k.derived)
		if k.dropStatus == nil {
			k.dropStatus = map[string]bool{}
		}
		if k.statusKeys[storeLabelsKey] {
			k.dropStatus[storeLabelsKey] = true
		}
	}
	for _, kind := range entryKinds {
		kinds[kind] = &kindInfo{kind: kind, newObj: func() client.Object { return &v1alpha1.StoreEntry{} }}
	}
	// Usage records are listed by cluster and by day (compaction): the API
	// server selects them by their metadata labels.
	kinds["usage"].selectable = []string{"on", "day", "month", "compacted"}
}

// entryKinds are the kinds kept in StoreEntries (labelled StoreKeyKind
// with the kind): name claims, the membership documents of the clients
// that share the work, the settled reservations of resource groups, the
// clusters' meters (their open usage intervals), the usage records and
// how far their compaction has come.
// Only the backend writes them (v1alpha1.StoreEntry).
var entryKinds = []string{"name", "replica", "hold", "meter", "usage", "usagemark"}

// uncachedKinds are the entry kinds the store does not cache: a usage
// record is written once and read by reports, which list them past the
// cache (ListLatest); Get reads one from the API server, List and Watch
// never tell of them. So a replica's memory does not grow with the
// records.
var uncachedKinds = []string{"usage"}

// inEntry reports whether documents of kind k are StoreEntries.
func (k *kindInfo) inEntry() bool { return slices.Contains(entryKinds, k.kind) }

// cachedEntryKinds are the entry kinds the store's informer selects.
func cachedEntryKinds() []string {
	return slices.DeleteFunc(slices.Clone(entryKinds), func(k string) bool { return slices.Contains(uncachedKinds, k) })
}

// storeLabelsKey is the status key of a document's labels, in the kinds
// whose status has one (v1alpha1.Record): there a change of state and of
// the labels that follow it is one write of the status subresource. The
// other kinds keep them in the StoreKeyLabels annotation, with a copy in
// metadata.labels.
const storeLabelsKey = "storeLabels"

// labelsInStatus reports whether the kind keeps its labels in the status.
func (k *kindInfo) labelsInStatus() bool { return k.status && k.statusKeys[storeLabelsKey] }

// jsonKeys returns the top-level JSON names of struct type t, embedded
// and inline structs flattened, as encoding/json does.
func jsonKeys(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
			maps.Copy(out, jsonKeys(f.Type))
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = true
	}
	return out
}

// NewStore starts a reflector on namespace for each type of object the
// store keeps, which lists and watches into the store's documents (feed),
// waits until each has listed, and returns the store. The reflectors run
// until ctx is done or Close is called (or NewStore fails); the store must
// not be used after that.
func NewStore(ctx context.Context, cfg *rest.Config, namespace string, opts StoreOptions) (*Store, error) {
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = time.Minute
	}
	if opts.WriteWait <= 0 {
		opts.WriteWait = 10 * time.Second
	}
	cfg = limitConfig(cfg, 0, 0) // cfg's own limit, or DefaultQPS
	scheme, c, err := newClient(cfg, "kube store", v1alpha1.AddToScheme)
	if err != nil {
		return nil, err
	}
	inEntry, err := labels.NewRequirement(StoreKeyKind, selection.In, cachedEntryKinds())
	if err != nil {
		return nil, fmt.Errorf("kube store: %w", err)
	}
	sel := labels.NewSelector().Add(*inEntry)
	s := &Store{
		c: c, namespace: namespace, opts: opts,
		docs: map[string]map[string]entry{}, lastRV: map[string]string{}, listPage: defaultListPage,
		unselectable: map[string]map[string]bool{},
		ticks:        map[string]chan struct{}{},
	}
	for _, k := range kinds {
		s.docs[k.kind], s.ticks[k.kind] = map[string]entry{}, make(chan struct{})
	}
	run, cancelFeeds := context.WithCancel(ctx)
	feeds, stopped, err := s.startFeeds(run, cfg, scheme, sel)
	if err != nil {
		cancelFeeds()
		return nil, err
	}
	stop := func() { cancelFeeds(); awaitStopped(stopped) }
	s.stop = stop
	if !opts.NoEvents {
		if s.events, err = newEventRecorder(run, cfg, namespace, scheme, opts.Logger); err != nil {
			stop()
			return nil, err
		}
	}
	// A list the API server refuses (RBAC, a CRD not installed) is retried
	// by the reflectors for ever: a probe after syncProbeAfter, and again
	// as long after, says so, and ends the wait with the refusal instead
	// of the timeout.
	pctx, refused := context.WithCancelCause(ctx)
	defer refused(nil)
	sctx, cancel := context.WithTimeout(pctx, opts.SyncTimeout)
	defer cancel()
	probe := time.AfterFunc(syncProbeAfter, func() {
		// Asked twice, syncProbeAfter apart: a RoleBinding or a CRD that
		// is still being set up is not taken for a refusal.
		if listRefusal(sctx, c, namespace) == nil {
			return
		}
		t := time.NewTimer(syncProbeAfter)
		defer t.Stop()
		select {
		case <-sctx.Done():
			return
		case <-t.C:
		}
		if err := listRefusal(sctx, c, namespace); err != nil {
			refused(err)
		}
	})
	defer probe.Stop()
	for _, f := range feeds {
		select {
		case <-f.ready:
			continue
		case <-sctx.Done():
		}
		stop()
		if err := context.Cause(pctx); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			return nil, err // the refusal the probe found
		}
		return nil, syncError(ctx, c, namespace, fmt.Errorf("caches of namespace %s did not sync: %w", namespace, context.Cause(sctx)))
	}
	return s, nil
}

// newClient returns a client of cfg whose scheme has the core types and
// those that add puts in it; what names the caller in its errors.
func newClient(cfg *rest.Config, what string, add ...func(*runtime.Scheme) error) (*runtime.Scheme, client.Client, error) {
	scheme := runtime.NewScheme()
	for _, f := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme}, add...) {
		if err := f(scheme); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	c, err := client.New(callConfig(cfg), client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return scheme, c, nil
}

// syncError is the error of caches that did not sync: the API server's
// refusal of a list (forbidden: the user's RBAC does not reach the
// namespace; not found: a CRD is not installed), found by one list of at
// most one object of each kind, or else ErrUnavailable with cause.
func syncError(ctx context.Context, c client.Client, namespace string, cause error) error {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := listRefusal(pctx, c, namespace); err != nil {
		return err
	}
	return errs.Unavailable("kube store sync", cause)
}

// syncProbeAfter is how long NewStore waits for its caches before it asks
// the API server whether it refuses their lists (listRefusal).
const syncProbeAfter = 2 * time.Second

// listRefusal lists at most one object of each kind in namespace and
// returns the first list the API server refuses for good (forbidden, or
// the kind not served), or nil.
func listRefusal(pctx context.Context, c client.Client, namespace string) error {
	for _, k := range kinds {
		gvk, err := apiutil.GVKForObject(k.newObj(), c.Scheme())
		if err != nil {
			continue
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		err = c.List(pctx, list, client.InNamespace(namespace), client.Limit(1))
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return fmt.Errorf("kube store sync: listing %ss in namespace %s: %w", k.kind, namespace, err)
		}
	}
	return nil
}

// Close stops the store's informers (from then on its cache and its
// watchers see no further changes) and its Events (any still queued may
// be lost), and waits until the informers have stopped (see startCache),
// so that what they cached can be freed.
func (s *Store) Close() { s.stop(); s.events.close() }

// observe applies to the documents what a feed's reflector listed or was
// told of (deleted: its deletion), and tells watchers. What is not one of
// the store's cached objects, or does not decode, is ignored.
func (s *Store) observe(l *listed, deleted bool) {
	if !l.ok {
		return
	}
	k, e := l.kind, l.e
	s.mu.Lock()
	defer s.mu.Unlock()
	byID := s.docs[k.kind]
	if cur, ok := byID[e.doc.ID]; ok && !deleted && cur.doc.Version == e.doc.Version {
		return // a relist
	}
	if deleted {
		delete(byID, e.doc.ID)
	} else {
		byID[e.doc.ID] = e
	}
	if len(k.selectable) > 0 {
		s.noteSelectable(k, l.unselectable, e.doc.ID, deleted)
	}
	s.noteVersion(k.kind, e.doc.Version)
	s.changed(e.doc, deleted)
}

// noteVersion records that the cache of kind has seen resourceVersion rv
// (lastRV), when it is later than what it had. s.mu is held.
func (s *Store) noteVersion(kind, rv string) {
	if last := s.lastRV[kind]; last == "" {
		s.lastRV[kind] = rv
	} else if c, err := resourceversion.CompareResourceVersion(rv, last); err == nil && c > 0 {
		s.lastRV[kind] = rv
	}
}

// forget deletes the documents of kind k that a full list at
// resourceVersion rv did not have (listed: the ids it had), tells
// watchers, and records that the cache of k has seen rv.
func (s *Store) forget(k *kindInfo, listed map[string]bool, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.docs[k.kind] {
		if listed[id] {
			continue
		}
		delete(s.docs[k.kind], id)
		if len(k.selectable) > 0 {
			s.noteSelectable(k, false, id, true)
		}
		s.changed(e.doc, true)
	}
	if rv != "" && rv != s.lastRV[k.kind] {
		s.noteVersion(k.kind, rv)
		s.tickKind(k.kind) // a wait for a version the list covers is over
	}
}

// changed tells watchers of a change of document d and wakes whoever
// awaits one. s.mu is held.
func (s *Store) changed(d backend.Doc, deleted bool) {
	s.watchers.Each(func(h func(backend.Change)) { h(backend.Change{Doc: watched(d), Deleted: deleted}) })
	s.tickKind(d.Kind)
}

// tickKind wakes whoever awaits a change of kind. s.mu is held.
func (s *Store) tickKind(kind string) {
	if t, ok := s.ticks[kind]; ok {
		close(t)
	}
	s.ticks[kind] = make(chan struct{})
}

// lacksSelectable reports whether object o of kind k, whose document has
// labels lbl, lacks one of the kind's selectable labels in its
// metadata.labels (written by a version before they were).
func lacksSelectable(k *kindInfo, o client.Object, lbl map[string]string) bool {
	for _, key := range k.selectable {
		if v, ok := lbl[key]; ok && o.GetLabels()[StoreLabelPrefix+key] != v {
			return true
		}
	}
	return false
}

// noteSelectable keeps s.unselectable for document id of kind k, whose
// object lacks a selectable label (deleted: gone). s.mu is held.
func (s *Store) noteSelectable(k *kindInfo, lacks bool, id string, deleted bool) {
	set := s.unselectable[k.kind]
	switch {
	case lacks && !deleted:
		if set == nil {
			set = map[string]bool{}
			s.unselectable[k.kind] = set
		}
		set[id] = true
	case set != nil:
		delete(set, id)
	}
}

// serverSelector returns the metadata labels ListLatest can have the API
// server select kind k's objects by for selector: its selectable keys,
// once every cached object of the kind carries them (nil otherwise).
func (s *Store) serverSelector(k *kindInfo, selector map[string]string) client.MatchingLabels {
	if len(k.selectable) == 0 {
		return nil
	}
	s.mu.RLock()
	all := len(s.unselectable[k.kind]) == 0
	s.mu.RUnlock()
	if !all {
		return nil
	}
	var ml client.MatchingLabels
	for _, key := range k.selectable {
		if v, ok := selector[key]; ok && len(validation.IsValidLabelValue(v)) == 0 {
			if ml == nil {
				ml = client.MatchingLabels{}
			}
			ml[StoreLabelPrefix+key] = v
		}
	}
	return ml
}

// await waits until cond holds of the cached documents, ctx is done or
// WriteWait has passed.
func (s *Store) await(ctx context.Context, kind string, cond func() bool) {
	timer := time.NewTimer(s.opts.WriteWait)
	defer timer.Stop()
	for {
		s.mu.RLock()
		ok, tick := cond(), s.ticks[kind]
		s.mu.RUnlock()
		if ok {
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

// awaitVersion waits until the cache of kind has seen resourceVersion rv:
// it holds kind/id at rv, or an event of kind at rv or later (comparing
// resourceVersions as Kubernetes 1.35 made them comparable; where they
// are not numbers, only the first test applies).
func (s *Store) awaitVersion(ctx context.Context, kind, id, rv string) {
	if slices.Contains(uncachedKinds, kind) {
		return // no cache to wait for
	}
	s.await(ctx, kind, func() bool {
		if s.docs[kind][id].doc.Version == rv {
			return true
		}
		c, err := resourceversion.CompareResourceVersion(s.lastRV[kind], rv)
		return err == nil && c >= 0
	})
}

func kindOf(kind string) (*kindInfo, error) {
	k, ok := kinds[kind]
	if !ok {
		return nil, fmt.Errorf("%w: kube store: unknown kind %q", errs.ErrInvalid, kind)
	}
	return k, nil
}

// Get returns the document kind/id from the cache or, when the cache has
// it not, from the API server; or an error that is errors.Is ErrNotFound.
func (s *Store) Get(ctx context.Context, kind, id string) (backend.Doc, error) {
	if err := ctx.Err(); err != nil {
		return backend.Doc{}, err
	}
	k, err := kindOf(kind)
	if err != nil {
		return backend.Doc{}, err
	}
	if d, ok := s.cached(kind, id); ok {
		return backend.CopyDoc(d), nil
	}
	// A miss may be the cache lagging a write another replica made a
	// moment ago (behind a load balancer, a user's next call lands on
	// another replica): the API server itself says whether it exists.
	return s.getLatest(ctx, k, id)
}

// cached returns the document kind/id as the store's cache has it, and
// whether it has it; it never asks the API server. The document is the
// cache's own: not to be changed (Get returns a copy).
func (s *Store) cached(kind, id string) (backend.Doc, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.docs[kind][id]
	return e.doc, ok
}

// ownerOf returns the metadata an owner reference to the object of
// document kind/id takes (its name, namespace and UID) as the store's cache
// has it, or the API server's not-found error when the cache has it not.
func (s *Store) ownerOf(kind, id string) (metav1.Object, error) {
	s.mu.RLock()
	e, ok := s.docs[kind][id]
	s.mu.RUnlock()
	if !ok {
		k := kinds[kind]
		return nil, apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource(kind).GroupResource(), storeObjectName(k, id))
	}
	return &metav1.ObjectMeta{Name: e.name, Namespace: s.namespace, UID: e.uid}, nil
}

// GetLatest returns the document kind/id as the API server has it now,
// past the cache (a dlc.LatestReader): one GET, a quorum read.
func (s *Store) GetLatest(ctx context.Context, kind, id string) (backend.Doc, error) {
	if err := ctx.Err(); err != nil {
		return backend.Doc{}, err
	}
	k, err := kindOf(kind)
	if err != nil {
		return backend.Doc{}, err
	}
	return s.getLatest(ctx, k, id)
}

func (s *Store) getLatest(ctx context.Context, k *kindInfo, id string) (backend.Doc, error) {
	kind := k.kind
	obj := k.newObj()
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: storeObjectName(k, id)}, obj); err != nil {
		return backend.Doc{}, apiError("store get "+kind+"/"+id, kind, id, err)
	}
	got, err := fromObject(k, obj)
	if err != nil || got.doc.ID != id {
		return backend.Doc{}, errs.NotFound(kind, id) // not one of ours
	}
	return backend.CopyDoc(got.doc), nil
}

// List returns the cached documents of a kind whose labels include every
// pair of selector (all of the kind when selector is empty), by id.
func (s *Store) List(ctx context.Context, kind string, selector map[string]string) ([]backend.Doc, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := kindOf(kind); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []backend.Doc
	for _, e := range s.docs[kind] {
		if backend.Matches(e.doc.Labels, selector) {
			out = append(out, backend.CopyDoc(e.doc))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// defaultListPage is how many objects one page of a ListLatest holds.
const defaultListPage = 500

// ListLatest returns the documents of a kind whose labels include every
// pair of selector (all of the kind when selector is empty), by id, as the
// API server has them now, past the cache (a dlc.LatestLister): a LIST of
// the kind in the namespace, a quorum read, in pages of at most 500
// objects that the API server serves from one snapshot (an expired page
// token is ErrUnavailable: list again). The store's labels of most kinds
// are in their status (status.storeLabels), where the API server cannot
// select by them, so the store selects on each page as it reads it and
// keeps only what is selected: the LIST transfers every object of the
// kind in the namespace. The kinds kept in StoreEntries (name claims, the
// clients' membership documents, settled reservations) are selected by their kind label
// (StoreKeyKind) on the API server, as the cache selects them. An object
// that is not the store's is left out, as the cache leaves it out.
func (s *Store) ListLatest(ctx context.Context, kind string, selector map[string]string) ([]backend.Doc, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k, err := kindOf(kind)
	if err != nil {
		return nil, err
	}
	op := "store list " + kind
	gvk, err := apiutil.GVKForObject(k.newObj(), s.c.Scheme())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	lo, err := s.c.Scheme().New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	list, ok := lo.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%s: %T is not a list", op, lo)
	}
	opts := []client.ListOption{client.InNamespace(s.namespace), client.Limit(s.listPage)}
	if k.inEntry() {
		opts = append(opts, client.MatchingLabels{StoreKeyKind: k.kind})
	}
	if ml := s.serverSelector(k, selector); ml != nil {
		opts = append(opts, ml) // the rest of the selector is applied below, as always
	}
	var out []backend.Doc
	for next := ""; ; {
		if err := s.c.List(ctx, list, append(opts, client.Continue(next))...); err != nil {
			switch {
			case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
				return nil, errs.Unavailable(op, err) // the snapshot's pages expired: list again
			case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
				return nil, fmt.Errorf("%s: %w", op, err) // no such resource: not a missing document
			}
			return nil, apiError(op, kind, "", err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		s.listed.Add(int64(len(items)))
		for _, item := range items {
			obj, ok := item.(client.Object)
			if !ok {
				continue
			}
			e, err := fromObject(k, obj)
			if err != nil {
				continue // not one of ours
			}
			if backend.Matches(e.doc.Labels, selector) {
				out = append(out, e.doc)
			}
		}
		if next = list.GetContinue(); next == "" {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Watch calls h with every change the cache sees from now on, until ctx
// is done, and returns every cached document as of the moment it started:
// no change is missed between the snapshot and the first call. h is
// called with the store locked, from the reflectors' goroutines (one per
// type), with nothing buffered between: it must return quickly and must
// not call the store; while it runs, every feed of the store, every read
// of its cache and the writes waiting for it wait too.
func (s *Store) Watch(ctx context.Context, h func(backend.Change)) ([]backend.Doc, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var snap []backend.Doc
	s.watchers.Add(ctx, &s.mu, h, func() {
		for _, byID := range s.docs {
			for _, e := range byID {
				snap = append(snap, watched(e.doc))
			}
		}
	})
	return snap, nil
}

// watched is d as a watcher is told of it (backend.Change): its labels its
// own, its data the store's.
func watched(d backend.Doc) backend.Doc {
	d.Labels = maps.Clone(d.Labels)
	return d
}

// Create stores a new document and returns its version; an existing id is
// a conflict.
func (s *Store) Create(ctx context.Context, d backend.Doc) (string, error) {
	rv, await, err := s.CreateStored(ctx, d)
	if err != nil {
		return "", err
	}
	await(ctx)
	return rv, nil
}

// CreateStored is Create without its wait for the cache
// (backend.AwaitingCreator): it returns once the API server has the
// object, with the wait apart.
func (s *Store) CreateStored(ctx context.Context, d backend.Doc) (string, func(context.Context), error) {
	rv, err := s.createStored(ctx, d)
	if err != nil {
		return "", nil, err
	}
	return rv, func(ctx context.Context) { s.awaitVersion(ctx, d.Kind, d.ID, rv) }, nil
}

func (s *Store) createStored(ctx context.Context, d backend.Doc) (string, error) {
	k, err := kindOf(d.Kind)
	if err != nil {
		return "", err
	}
	obj, status, err := s.toObject(k, d)
	if err != nil {
		return "", err
	}
	obj.SetResourceVersion("")
	op := "store create " + d.Kind + "/" + d.ID
	derivedOnly, err := k.derivedOnly(status)
	if err != nil {
		return "", err
	}
	if status != nil && !derivedOnly {
		// One write: the status rides in an annotation until it is first
		// written, so no reader ever sees the object without it.
		b, err := json.Marshal(status)
		if err != nil {
			return "", err
		}
		ann := obj.GetAnnotations()
		ann[StoreKeyInitialStatus] = string(b)
		obj.SetAnnotations(ann)
	}
	if err := s.c.Create(ctx, obj); err != nil {
		if k.kind == "name" && apierrors.IsAlreadyExists(err) {
			return "", s.foreignClaim(ctx, op, d.ID, obj.GetName(), err)
		}
		return "", apiError(op, d.Kind, d.ID, err)
	}
	s.events.record(k, nil, d.Data, obj)
	rv := obj.GetResourceVersion()
	if derivedOnly {
		// The status is only what the store derives for kubectl (a
		// resource group's summary before its first reservation), which
		// readers have no need of: written now, best effort, so that
		// kubectl get shows it from the start. If it fails, the next
		// write of the status has it.
		setStatus(obj, status)
		if err := s.c.Status().Update(ctx, obj); err != nil {
			s.opts.Logger.V(1).Info("the summary of a new object is not written", "kind", d.Kind, "id", d.ID, "error", err.Error())
		} else {
			rv = obj.GetResourceVersion()
		}
	}
	return rv, nil
}

// derivedOnly reports whether status (a pointer to the kind's status type,
// or nil) sets no field but those the store derives for kubectl.
func (k *kindInfo) derivedOnly(status any) (bool, error) {
	if status == nil || len(k.derived) == 0 {
		return false, nil
	}
	b, err := json.Marshal(status)
	if err != nil {
		return false, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return false, err
	}
	for key := range m {
		if !k.derived[key] {
			return false, nil
		}
	}
	return true, nil
}

// foreignClaim is the error of a name claim whose StoreEntry exists: a
// conflict, which names the StoreEntry when it is not the store's (made by
// someone else, without the label the store's cache selects by, so the
// store can never read it as a claim). One uncached read tells.
func (s *Store) foreignClaim(ctx context.Context, op, id, name string, err error) error {
	se := &v1alpha1.StoreEntry{}
	if gerr := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, se); gerr != nil ||
		se.Labels[StoreKeyKind] == "name" {
		return apiError(op, "name", id, err)
	}
	return &wrapped{errs.Conflict("name", id, fmt.Sprintf(
		"StoreEntry %s/%s holds the name's claim but is not the store's (it lacks the label %s=name): someone else made it; delete it to free the name",
		s.namespace, name, StoreKeyKind)), err}
}

// Update replaces a document whose current version is d.Version and
// returns the new version; another version is a conflict, a missing
// document not found. See Store for an update of spec and status.
func (s *Store) Update(ctx context.Context, d backend.Doc) (string, error) {
	k, err := kindOf(d.Kind)
	if err != nil {
		return "", err
	}
	if d.Version == "" {
		return "", errs.Conflict(d.Kind, d.ID, "no version: an update needs the version read")
	}
	obj, status, err := s.toObject(k, d)
	if err != nil {
		return "", err
	}
	s.mu.RLock()
	cur, ok := s.docs[k.kind][d.ID]
	s.mu.RUnlock()
	if ok && cur.doc.Version != d.Version {
		if c, err := resourceversion.CompareResourceVersion(cur.doc.Version, d.Version); err == nil && c > 0 {
			// The cache has a later version of the object: the API server
			// would refuse the write. Refused here, no call made.
			return "", errs.Conflict(d.Kind, d.ID, "stale version: the object changed since it was read")
		}
	}
	if ok && cur.initial != "" {
		// Until the status is written, the main write keeps the initial
		// status readers take it from; it is no change of the main part.
		ann := obj.GetAnnotations()
		ann[StoreKeyInitialStatus] = cur.initial
		obj.SetAnnotations(ann)
	}
	e, err := fromObject(k, obj)
	if err != nil {
		return "", err
	}
	mainChanged, statusChanged := true, k.status
	if ok && cur.doc.Version == d.Version {
		mainChanged = cur.meta != e.meta || cur.spec != e.spec
		statusChanged = k.status && cur.status != e.status
		if !mainChanged && !statusChanged {
			mainChanged = true // a no-op write still checks the version
		}
	}
	if ok && cur.initial != "" {
		statusChanged = k.status
	}
	op := "store update " + d.Kind + "/" + d.ID
	if mainChanged {
		if err := s.c.Update(ctx, obj); err != nil {
			return "", apiError(op, d.Kind, d.ID, err)
		}
	}
	if statusChanged {
		if status == nil {
			status = emptyStatus(k)
		}
		setStatus(obj, status)
		if err := s.c.Status().Update(ctx, obj); err != nil {
			return "", apiError(op+" (status)", d.Kind, d.ID, err)
		}
	}
	s.events.record(k, cur.doc.Data, d.Data, obj)
	rv := obj.GetResourceVersion()
	s.awaitVersion(ctx, d.Kind, d.ID, rv)
	return rv, nil
}

// Delete removes kind/id if version is its current one ("": any version).
func (s *Store) Delete(ctx context.Context, kind, id, version string) error {
	k, err := kindOf(kind)
	if err != nil {
		return err
	}
	obj := k.newObj()
	obj.SetNamespace(s.namespace)
	obj.SetName(storeObjectName(k, id))
	var opts []client.DeleteOption
	if version != "" {
		opts = append(opts, client.Preconditions{ResourceVersion: &version})
	}
	s.mu.RLock()
	before := s.docs[kind][id].doc.Version
	s.mu.RUnlock()
	if err := s.c.Delete(ctx, obj, opts...); err != nil {
		return apiError("store delete "+kind+"/"+id, kind, id, err)
	}
	s.await(ctx, kind, func() bool {
		e, ok := s.docs[kind][id]
		return !ok || e.doc.Version != before
	})
	return nil
}

// apiError maps an API error to the store's errors.
func apiError(op, kind, id string, err error) error {
	var status apierrors.APIStatus
	switch {
	case apierrors.IsConflict(err):
		return &wrapped{errs.Conflict(kind, id, "stale version: the object changed since it was read"), err}
	case apierrors.IsAlreadyExists(err):
		return &wrapped{errs.Conflict(kind, id, "already exists"), err}
	case apierrors.IsNotFound(err):
		return &wrapped{errs.NotFound(kind, id), err}
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return fmt.Errorf("%s: %w: %w", op, errs.ErrInvalid, err)
	case tooLarge(err):
		// The same write fails the same way: not worth a retry.
		return fmt.Errorf("%s: %w: the object is too large to store: %w", op, errs.ErrInvalid, err)
	case errors.Is(err, context.Canceled):
		return err
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err),
		errors.Is(err, context.DeadlineExceeded):
		return errs.Unavailable(op, err)
	case errors.As(err, &status):
		if status.Status().Code >= 500 {
			return errs.Unavailable(op, err)
		}
		return fmt.Errorf("%s: %w", op, err)
	default:
		// Not an answer of the API server: the connection failed.
		return errs.Unavailable(op, err)
	}
}

// tooLarge reports whether the API server refused a write for its size:
// 413 Request Entity Too Large (a body over its limit, 3 MiB), or in a 500
// etcd's "request is too large" (an object over etcd's limit, 1.5 MiB by
// default) or gRPC's "message larger than max" (over the API server's
// 2 MiB limit for a call to etcd).
func tooLarge(err error) bool {
	var status apierrors.APIStatus
	if apierrors.IsRequestEntityTooLargeError(err) {
		return true
	}
	if !errors.As(err, &status) || status.Status().Code < 500 {
		return false
	}
	msg := status.Status().Message
	return strings.Contains(msg, "request is too large") || // etcd's limit
		strings.Contains(msg, "message larger than max") // the API server's gRPC limit towards etcd (2 MiB)
}

// wrapped is a store error (errors.As *errs.ConflictError or
// *errs.NotFoundError) that also unwraps to the API error it came from.
type wrapped struct {
	err   error
	cause error
}

func (w *wrapped) Error() string   { return w.err.Error() }
func (w *wrapped) Unwrap() []error { return []error{w.err, w.cause} }

// storeObjectName is the object name of document id: the id when it is a
// valid DNS-1123 subdomain (a claim's never is: it holds a colon), else
// "x-" and 40 hex digits of its SHA-256. An id that is itself such a name
// conflicts with the one it hashes from, which only a crafted id can do.
func storeObjectName(k *kindInfo, id string) string {
	if !k.inEntry() && len(validation.IsDNS1123Subdomain(id)) == 0 {
		return id
	}
	sum := sha256.Sum256([]byte(k.kind + "\x00" + id))
	return "x-" + hex.EncodeToString(sum[:20])
}

// toObject builds the object of d, with its status part separately (nil
// when empty).
func (s *Store) toObject(k *kindInfo, d backend.Doc) (client.Object, any, error) {
	invalid := func(format string, a ...any) error {
		return fmt.Errorf("%w: kube store: %s %q: %s", errs.ErrInvalid, d.Kind, d.ID, fmt.Sprintf(format, a...))
	}
	if d.ID == "" {
		return nil, nil, invalid("no id")
	}
	obj := k.newObj()
	obj.SetNamespace(s.namespace)
	obj.SetName(storeObjectName(k, d.ID))
	obj.SetResourceVersion(d.Version)
	lj, err := json.Marshal(d.Labels)
	if err != nil {
		return nil, nil, invalid("labels: %v", err)
	}
	if d.Labels == nil {
		lj = []byte("{}")
	}
	if k.labelsInStatus() {
		// The labels ride in the status (see storeLabelsKey).
		obj.SetAnnotations(map[string]string{StoreKeyID: d.ID})
	} else {
		obj.SetAnnotations(map[string]string{StoreKeyID: d.ID, StoreKeyLabels: string(lj)})
	}
	kl := map[string]string{}
	for key, v := range d.Labels {
		if len(validation.IsQualifiedName(StoreLabelPrefix+key)) == 0 && len(validation.IsValidLabelValue(v)) == 0 {
			kl[StoreLabelPrefix+key] = v
		}
	}
	if k.inEntry() {
		kl[StoreKeyKind] = k.kind
		se := obj.(*v1alpha1.StoreEntry)
		se.Labels = kl
		if !json.Valid(d.Data) {
			return nil, nil, invalid("data is not JSON")
		}
		se.Data = string(d.Data)
		return se, nil, nil
	}
	if !k.labelsInStatus() {
		obj.SetLabels(kl)
	} else if len(k.selectable) > 0 {
		sl := map[string]string{}
		for _, key := range k.selectable {
			if v, ok := kl[StoreLabelPrefix+key]; ok {
				sl[StoreLabelPrefix+key] = v
			}
		}
		obj.SetLabels(sl)
	}

	var top map[string]json.RawMessage
	if err := json.Unmarshal(d.Data, &top); err != nil {
		return nil, nil, invalid("data is not a JSON object: %v", err)
	}
	spec, status := map[string]json.RawMessage{}, map[string]json.RawMessage{}
	for key, v := range top {
		switch {
		case key == "id":
		case k.nested != "" && key == k.nested:
			var inner map[string]json.RawMessage
			if err := json.Unmarshal(v, &inner); err != nil {
				return nil, nil, invalid("%s is not a JSON object: %v", key, err)
			}
			for ik, iv := range inner {
				if !k.specKeys[ik] || k.topSpec[ik] {
					return nil, nil, invalid("%s.%s has no place in the %T spec", key, ik, obj)
				}
				spec[ik] = iv
			}
		case k.specKeys[key] && (k.nested == "" || k.topSpec[key]):
			spec[key] = v
		case k.statusKeys[key] && !k.dropStatus[key]:
			status[key] = v
		default:
			return nil, nil, invalid("field %q has no place in %T", key, obj)
		}
	}
	if k.labelsInStatus() && len(d.Labels) > 0 {
		status[storeLabelsKey] = lj
	}
	rv := reflect.ValueOf(obj).Elem()
	if err := strictDecode(spec, rv.FieldByName("Spec").Addr().Interface()); err != nil {
		return nil, nil, invalid("spec: %v", err)
	}
	stPtr := reflect.New(rv.FieldByName("Status").Type()).Interface()
	if err := strictDecode(status, stPtr); err != nil {
		return nil, nil, invalid("status: %v", err)
	}
	setStatus(obj, stPtr)
	present(obj)
	reflect.ValueOf(stPtr).Elem().Set(rv.FieldByName("Status"))
	if reflect.ValueOf(stPtr).Elem().IsZero() {
		return obj, nil, nil
	}
	return obj, stPtr, nil
}

func strictDecode(m map[string]json.RawMessage, into any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

func emptyStatus(k *kindInfo) any {
	st, _ := reflect.TypeOf(k.newObj()).Elem().FieldByName("Status")
	return reflect.New(st.Type).Interface()
}

// setStatus sets obj's Status to *status.
func setStatus(obj client.Object, status any) {
	reflect.ValueOf(obj).Elem().FieldByName("Status").Set(reflect.ValueOf(status).Elem())
}

// fromObject is the document an object holds, with the parts writes
// compare.
func fromObject(k *kindInfo, obj client.Object) (entry, error) {
	ann := obj.GetAnnotations()
	id, ok := ann[StoreKeyID]
	if !ok {
		return entry{}, fmt.Errorf("kube store: %s has no %s annotation", obj.GetName(), StoreKeyID)
	}
	var lbl map[string]string
	if !k.labelsInStatus() {
		if err := json.Unmarshal([]byte(ann[StoreKeyLabels]), &lbl); err != nil {
			return entry{}, fmt.Errorf("kube store: %s: labels: %w", obj.GetName(), err)
		}
		if len(lbl) == 0 {
			lbl = nil
		}
	}
	meta, err := json.Marshal(struct {
		L map[string]string `json:"l"`
		A map[string]string `json:"a"`
	}{nilIfEmpty(obj.GetLabels()), nilIfEmpty(withoutInitial(ann))})
	if err != nil {
		return entry{}, err
	}
	e := entry{name: obj.GetName(), uid: obj.GetUID(), meta: sha256.Sum256(meta)}
	e.doc = backend.Doc{Kind: k.kind, ID: id, Version: obj.GetResourceVersion(), Labels: lbl}
	if se, ok := obj.(*v1alpha1.StoreEntry); ok {
		if se.Labels[StoreKeyKind] != k.kind {
			// The StoreEntry kinds share one informer: each takes its own.
			return entry{}, fmt.Errorf("kube store: %s is not a %s", obj.GetName(), k.kind)
		}
		e.doc.Data = []byte(se.Data)
		e.spec = sha256.Sum256(e.doc.Data)
		return e, nil
	}
	rv := reflect.ValueOf(obj).Elem()
	specJSON, err := canonicalJSON(rv.FieldByName("Spec").Interface())
	if err != nil {
		return entry{}, err
	}
	statusJSON, err := canonicalJSON(rv.FieldByName("Status").Interface())
	if err != nil {
		return entry{}, err
	}
	if init, ok := ann[StoreKeyInitialStatus]; ok {
		zero, err := canonicalJSON(reflect.Zero(rv.FieldByName("Status").Type()).Interface())
		if err != nil {
			return entry{}, err
		}
		if bytes.Equal(statusJSON, zero) {
			if statusJSON, err = canonicalJSON(json.RawMessage(init)); err != nil {
				return entry{}, fmt.Errorf("kube store: %s: initial status: %w", obj.GetName(), err)
			}
			e.initial = init
		}
	}
	var spec, status map[string]json.RawMessage
	e.spec, e.status = sha256.Sum256(specJSON), sha256.Sum256(statusJSON)
	if err := json.Unmarshal(specJSON, &spec); err != nil {
		return entry{}, err
	}
	if err := json.Unmarshal(statusJSON, &status); err != nil {
		return entry{}, err
	}
	top := map[string]json.RawMessage{}
	inner := map[string]json.RawMessage{}
	for key, v := range spec {
		if k.nested != "" && !k.topSpec[key] {
			inner[key] = v
		} else {
			top[key] = v
		}
	}
	if k.nested != "" {
		b, err := json.Marshal(inner)
		if err != nil {
			return entry{}, err
		}
		top[k.nested] = b
	}
	for key, v := range status {
		if !k.dropStatus[key] {
			top[key] = v
		}
	}
	if raw, ok := status[storeLabelsKey]; ok && k.labelsInStatus() {
		if err := json.Unmarshal(raw, &lbl); err != nil {
			return entry{}, fmt.Errorf("kube store: %s: labels: %w", obj.GetName(), err)
		}
	}
	if len(lbl) == 0 {
		lbl = nil
	}
	e.doc.Labels = lbl
	idj, _ := json.Marshal(id)
	top["id"] = idj
	if e.doc.Data, err = json.Marshal(top); err != nil {
		return entry{}, err
	}
	return e, nil
}

// withoutInitial returns the annotations but the initial status, which is
// no part of what an update compares: it is superseded once the status is
// written, and dropped by the next write of the main resource.
func withoutInitial(ann map[string]string) map[string]string {
	if _, ok := ann[StoreKeyInitialStatus]; !ok {
		return ann
	}
	out := maps.Clone(ann)
	delete(out, StoreKeyInitialStatus)
	return out
}

// canonicalJSON marshals v with the keys of every object sorted, nested
// raw JSON (a node group's) included, so that an update compares what it
// writes with what the API server returned, whatever the key order.
func canonicalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
