package platform

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/runner"
)

// Replicas share the background work by key (DESIGN.md, "Reconcilers").
// Nothing in dlc must be single, since every decision is a
// compare-and-swap on a stored object; but when every replica reconciles
// every object, each transition costs a conflict per extra replica and
// replicas add no throughput. So each client with workers keeps a small
// membership document in the store, renewed every third of its TTL, and
// takes as live the members whose document it has seen change within the
// TTL, on its own clock. A key is reconciled by one live member: the one
// with the highest rendezvous hash of (member, the key's affinity). Every
// client filters what it queues by ownership (the store's watch, Ray's
// notices, timers, the resync) and, when the members change, queues the
// keys it now owns. What a key's change means for other keys is derived
// from the watch on every client (a cluster's change queues the runs that
// depend on it), so a key owned elsewhere is still told. User calls are
// not shared: they act on the caller's client at once.
//
// Taking a member for live on the strength of its document alone trusts
// whoever writes the store: a document forged by anyone with write rights
// there, and kept changing, or a replica whose workers hang while its
// document is renewed, is a member that owns about 1/(N+1) of the keys
// and takes no step of them. So each periodic resync (WithResync) is also
// a round of adoption (adoption.go): a client takes one step of each key
// it does not own and finds unchanged since the round before; a step that
// writes is a strike against the key's owner, and a member struck at two
// rounds in a row is reported and left out: this client takes its share
// over, for a bounded number of rounds or until its document goes, then
// counts it again. A member left out wrongly (slow, not stalled) costs
// conflicts, never correctness, every decision being a compare-and-swap.
// Without a periodic resync (WithResync(0)) nothing is adopted. A member
// whose document appears after this client started is on probation for
// WithMemberProbation's periodic resyncs before it owns anything here, so that
// ids that keep changing never own a key.

// kindReplica is the kind of the membership documents.
const kindReplica = "replica"

// replicaDoc is a client's membership document.
type replicaDoc struct {
	ID   string `json:"id"`
	Beat uint64 `json:"beat"` // renewals so far: each changes the version
	TTL  string `json:"ttl"`  // for a reader: how long it counts as live unrenewed
}

// memberSeen is another member's document as this client last saw it
// change, and when (on this client's clock); and from which periodic
// resync on the member is counted (on probation until then).
type memberSeen struct {
	version string
	at      time.Time
	from    uint64
}

// DefaultMemberProbation is how many periodic resyncs a member whose
// document appears after this client started waits before it is counted
// (WithMemberProbation): a member
// that came and went within them never owned a key here. Documents forged
// with ids that change (issue 38: each id left out by adoption only to be
// followed by a new one) then never hold up the work: a forged id must
// last its probation before it owns anything, and is then left out as
// any stalled member is. A replica that starts is counted a little later
// by the others; until then it and they both take the keys its share
// would have (conflicts, never a key left undone).
const DefaultMemberProbation = 2

// replicas is this client's view of the members sharing the work.
type replicas struct {
	self      string
	ttl       time.Duration
	probation uint64               // periodic resyncs a member that appears later waits before it is counted
	view      atomic.Pointer[view] // the members as last published

	mu      sync.Mutex
	seen    map[string]memberSeen
	beat    uint64
	version string // of this client's own document; "" when not stored
	stop    func() bool

	// The adoption of idle keys (periodicResync, adoptedStep).
	round    uint64               // periodic resyncs so far, the one at start included
	versions map[string]string    // key → its version at the last periodic resync, or as an adopted step here left it
	adopted  map[string]struct{}  // keys owned elsewhere that the last periodic resync queued: process takes each once
	strikes  map[string]int       // member → keys of its share that an adopted step here moved, this round
	struck   map[string]int       // the same, the round before
	excluded map[string]exclusion // members left out of the live ones for leaving their share undone
}

// view is who shares the work, as this client counts them.
type view struct {
	live []string // sorted ids of the live members, self included
	out  []string // sorted ids of the members left out (adoption.go), whose share is this client's
}

// exclusion is a member left out of the live ones: until round until
// (0: let back in, and watched); offenses counts its exclusions since its
// document appeared.
type exclusion struct {
	until    uint64
	offenses int
}

// Exclusions last stallRounds periodic resyncs, doubled for each
// exclusion in a row up to stallRounds<<maxStallShift: a member that
// never does its share stalls its keys for about two rounds out of a
// growing number of them.
const (
	stallRounds   = 4
	maxStallShift = 4
)

// workSharing is this client's part in sharing the work with the other
// clients on the store (see the top of this file, and adoption.go): its
// membership document, renewed; the members it sees; which member owns a
// key; the adoption rounds. Its state is rep's, behind rep.mu.
type workSharing struct {
	rep     *replicas // nil: this client shares the work with no one
	acc     *access
	clock   backend.Clock
	log     logr.Logger
	ctx     context.Context // the client's: done at Close
	metrics *metrics
	run     *runner.Runner
	// walk calls see with every key the client's reconcilers handle (nil:
	// queues those this client owns), from the cache.
	walk func(see func(key, version string, owned bool))
}

// resync queues every object this client owns that may still need a
// step: what a closed or crashed client left is taken up here.
func (w *workSharing) resync() { w.walk(nil) }

// seedReplicas counts the members of the store's snapshot snap as live
// from now until they fail to renew within the TTL: they were there
// before this client. It runs before the changes the store's watch told
// of meanwhile are applied (applyEarly), which are newer: a member gone
// since is then forgotten, one renewed since keeps its standing.
func (w *workSharing) seedReplicas(snap []backend.Doc) {
	rep := w.rep
	now := w.clock.Now()
	rep.mu.Lock()
	defer rep.mu.Unlock()
	for _, d := range snap {
		if d.Kind == kindReplica && d.ID != rep.self {
			rep.seen[d.ID] = memberSeen{d.Version, now, 0} // there before this client: counted at once
		}
	}
}

// startReplicas publishes the members seen so far, stores this client's
// membership document and starts renewing it.
func (w *workSharing) startReplicas() {
	rep := w.rep
	rep.mu.Lock()
	rep.publish()
	rep.mu.Unlock()
	w.renew()
}

// newReplicas returns a view of the members with this client alone;
// members that appear later wait probation periodic resyncs before they
// are counted (with no periodic resync there are no rounds: pass 0).
func newReplicas(ttl time.Duration, probation uint64) *replicas {
	rep := &replicas{self: newID("replica"), ttl: ttl, seen: map[string]memberSeen{}, probation: probation,
		versions: map[string]string{}, strikes: map[string]int{}, struck: map[string]int{}, excluded: map[string]exclusion{}}
	rep.publish()
	return rep
}

// publish recomputes the live members from what was seen, and those left
// out; the caller holds mu, or is the only one with rep. It reports
// whether they changed.
func (rep *replicas) publish() bool {
	v := view{live: []string{rep.self}}
	for id, s := range rep.seen {
		switch {
		case rep.excluded[id].until > rep.round:
			v.out = append(v.out, id)
		case s.from > rep.round:
			// On probation: its share is the live members'.
		default:
			v.live = append(v.live, id)
		}
	}
	slices.Sort(v.live)
	slices.Sort(v.out)
	if old := rep.view.Load(); old != nil && slices.Equal(old.live, v.live) && slices.Equal(old.out, v.out) {
		return false
	}
	rep.view.Store(&v)
	return true
}

// observeReplica takes a change of a membership document from the store's
// watch: a renewal keeps its member live, a new member joins, a deleted
// document's member leaves at once. It runs inside the store's write and
// only touches memory; a change of the members queues a resync.
func (w *workSharing) observeReplica(d backend.Doc, deleted bool) {
	rep := w.rep
	if rep == nil || d.ID == rep.self {
		return
	}
	rep.mu.Lock()
	if deleted {
		delete(rep.seen, d.ID)
		delete(rep.excluded, d.ID)
	} else if s, ok := rep.seen[d.ID]; !ok {
		from := uint64(0)
		if rep.probation > 0 {
			from = rep.round + rep.probation
		}
		rep.seen[d.ID] = memberSeen{d.Version, w.clock.Now(), from}
	} else if s.version != d.Version {
		s.version, s.at = d.Version, w.clock.Now()
		rep.seen[d.ID] = s
	}
	changed := rep.publish()
	rep.mu.Unlock()
	if changed {
		w.membersChanged()
		go w.resync() // not under the store's lock: it walks the cache
	}
}

// renew writes this client's membership document, forgets the members
// that stopped renewing theirs within the TTL (deleting their documents,
// on the version seen), and runs again in a third of the TTL.
func (w *workSharing) renew() {
	rep := w.rep
	if w.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, rep.ttl/3)
	defer cancel()
	rep.mu.Lock()
	rep.beat++
	doc := replicaDoc{ID: rep.self, Beat: rep.beat, TTL: rep.ttl.String()}
	version := rep.version
	rep.mu.Unlock()
	var err error
	if version == "" {
		version, err = w.acc.create(ctx, kindReplica, rep.self, nil, doc)
	} else {
		version, err = w.acc.update(ctx, kindReplica, rep.self, version, nil, doc)
		if errs.IsNotFound(err) || errors.Is(err, errs.ErrConflict) {
			// Taken for gone by a member that did not see it renewed (a
			// pause longer than the TTL), or changed by someone else: made
			// anew.
			_ = w.acc.store.Delete(ctx, kindReplica, rep.self, "")
			version, err = w.acc.create(ctx, kindReplica, rep.self, nil, doc)
		}
	}
	if err != nil {
		version = ""
		w.log.Error(err, "renewing this replica's membership failed; tried again", "replica", rep.self)
	}
	now := w.clock.Now()
	rep.mu.Lock()
	rep.version = version
	var gone []string
	var goneV []string
	for id, s := range rep.seen {
		if now.Sub(s.at) >= rep.ttl {
			gone, goneV = append(gone, id), append(goneV, s.version)
			delete(rep.seen, id)
			delete(rep.excluded, id)
		}
	}
	changed := rep.publish()
	if w.ctx.Err() == nil {
		rep.stop = w.clock.AfterFunc(rep.ttl/3, w.renew)
	}
	rep.mu.Unlock()
	for i, id := range gone {
		w.log.Info("a replica stopped renewing its membership: its share of the work is taken over", "replica", rep.self, "gone", id)
		_ = w.acc.store.Delete(ctx, kindReplica, id, goneV[i]) // a renewal since then keeps it
	}
	if changed {
		w.resync()
	}
}

// stopReplicas stops renewing and deletes this client's membership
// document, so that the others take its share at once.
func (w *workSharing) stopReplicas() {
	rep := w.rep
	if rep == nil {
		return
	}
	rep.mu.Lock()
	if rep.stop != nil {
		rep.stop()
	}
	rep.mu.Unlock()
	// Whatever version it is at: a renewal whose reply was lost may have
	// written it.
	ctx, cancel := context.WithTimeout(context.Background(), rep.ttl/3)
	defer cancel()
	_ = w.acc.store.Delete(ctx, kindReplica, rep.self, "")
}

// self returns this client's membership id, "" when it shares the work
// with no one.
func (w *workSharing) self() string {
	if w.rep == nil {
		return ""
	}
	return w.rep.self
}

// gone reports whether member id, whose mark is age old on this client's
// clock, is gone as this client sees the members: not this client, not a
// member whose document it has seen change within the TTL, and the mark
// older than the TTL (a member that has just started may not be seen
// yet). Without a membership of its own (sharing off) this client cannot
// tell, and reports false. It decides only when a dead operation's mark
// stops holding up the work: taking a mark off is a compare-and-swap that
// a live operation's next write conflicts with (fences.go).
func (w *workSharing) gone(id string, age time.Duration) bool {
	rep := w.rep
	if rep == nil || id == "" || id == rep.self || age < rep.ttl {
		return false
	}
	rep.mu.Lock()
	defer rep.mu.Unlock()
	_, seen := rep.seen[id]
	return !seen
}

// owns reports whether this client reconciles key: always when it shares
// the work with no one.
func (w *workSharing) owns(key string) bool {
	_, ok := w.owner(key)
	return ok
}

// owner returns the member that reconciles key ("" when this client
// shares the work with no one), and whether it is this client: the one
// with the highest rendezvous hash among the live members and those left
// out, and this client when that one is left out. A share left out is
// not divided again among the rest: another client may not have left
// that member out, and would drop what this one gave it (adoption.go).
func (w *workSharing) owner(key string) (string, bool) {
	rep := w.rep
	if rep == nil {
		return "", true
	}
	v := rep.view.Load()
	if len(v.live) <= 1 {
		return rep.self, true
	}
	a := fnv64(w.affinity(key))
	best, bestH := "", uint64(0)
	for _, m := range v.live {
		if s := mix64(fnv64(m) ^ a); best == "" || s > bestH {
			best, bestH = m, s
		}
	}
	for _, m := range v.out {
		if mix64(fnv64(m)^a) > bestH {
			return rep.self, true
		}
	}
	return best, best == rep.self
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// mix64 is splitmix64's finalizer: every bit of x moves about half the
// bits of the result, so that the rendezvous scores of two members are
// independent for keys that differ in one character (FNV alone keeps
// their order for such keys: one member owned every resource group).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// affinity is what decides a key's owner: the key itself, but for an
// on-demand run and its cluster, which go with their resource group. Its
// reconciler admits the group's queued runs and queues those it admitted,
// which are then its own, as are the queued runs that ask it to look. A
// group's settling goes with the group too: its step queues it.
func (w *workSharing) affinity(key string) string {
	kind, id, _ := strings.Cut(key, "/")
	switch kind {
	case keySettle:
		return kindResourceGroup + "/" + id
	case kindCluster:
		run, ok := strings.CutPrefix(id, odPrefix)
		if !ok {
			return key
		}
		id = run
		fallthrough
	case kindRun:
		if d, ok := w.acc.cache.Get(kindRun, id); ok {
			if rg, ok := strings.CutPrefix(d.Labels[labelTarget], targetResourceGroup); ok {
				return kindResourceGroup + "/" + rg
			}
		}
		return kindRun + "/" + id
	}
	return key
}
