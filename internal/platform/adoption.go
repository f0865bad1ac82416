package platform

import (
	"context"
	"errors"
	"sync"
)

// The adoption of idle keys (replicas.go): a member that others count as
// live but that does not do its share (a membership document forged by
// anyone who may write the store, and kept changing; a replica whose
// workers hang while its document is renewed) would leave the keys it
// owns without a step for ever. So each periodic resync is a round: a
// client queues, besides the keys it owns, the keys of the resync (the
// resource groups, the clusters, the pending, active and cleaning-up
// runs) that it does not own and whose stored version is the one it saw
// at the round before (or that its own adopted step wrote): nobody moved
// them for a round. Each is taken one step (process runs it once, though
// it is not this client's). A step that wrote the store (the key, or
// another object for it: a resource group's admission, a cluster's
// release of its hold) is a strike against the key's owner: the key
// needed a step that its owner left undone. The writes are told by the
// step itself (noteWrite, through its context), not read back from the
// cache, which may lag them. A member struck at two rounds in a row is
// reported (the log and dlc_replica_stalled_total) and left out of the
// live members on this client for stallRounds rounds (doubled at each
// exclusion, up to stallRounds<<maxStallShift), or until its document
// goes; then it is counted again, and watched.
//
// While a member is left out, this client owns its whole share (owner):
// the share is not divided again by rendezvous among the rest, since
// another client that still counts the member would drop the keys given
// to it, and they would wait again, with nobody struck for them. Usually
// one client leaves a stalled member out, the first to be struck by it,
// and after that finds nothing left undone; when several do, they only
// conflict on its keys.
//
// A member that does its share but was slow to (its queue long, a Ray
// change it had not yet looked at) may be struck; twice in a row, it is
// left out wrongly. That costs conflicts, never correctness: every
// decision is a compare-and-swap on a stored object, so two clients that
// both take a key's step only race, and one of them conflicts. What the
// adoption costs: at each periodic resync every client looks at every idle
// key once (most such steps read and write nothing), and a key whose owner
// does not do its share moves one step a round until that owner is left
// out. A member whose share needs a step only now and then (not at two
// rounds in a row) is never left out: its keys move a step a round or
// two.

// periodicResync is the resync at start and on WithResync's schedule.
// With the work shared, each is a round of the adoption: it lets back in
// the members whose exclusion is over, queues the keys this client owns,
// and adopts the idle ones it does not. What it remembers is bounded by
// the keys the resync walks: the versions are those of the last round,
// and the adopted keys those it queued.
func (w *workSharing) periodicResync() {
	rep := w.rep
	if rep == nil {
		w.resync()
		return
	}
	rep.mu.Lock()
	rep.round++
	var back []string
	for id, ex := range rep.excluded {
		if ex.until != 0 && ex.until <= rep.round {
			ex.until = 0
			rep.excluded[id] = ex
			back = append(back, id)
		}
	}
	rep.struck, rep.strikes = rep.strikes, map[string]int{}
	changed := rep.publish()
	rep.mu.Unlock()
	for _, id := range back {
		w.log.Info("a replica left out for leaving its share undone is counted again, and watched", "replica", rep.self, "member", id)
	}
	if changed {
		w.membersChanged()
		w.resync() // the keys that came to this client (a member counted after its probation)
	}
	type keySeen struct {
		key, version string
		owned        bool
	}
	var keys []keySeen
	w.walk(func(key, version string, owned bool) { keys = append(keys, keySeen{key, version, owned}) })
	next := make(map[string]string, len(keys))
	var adopt []string
	rep.mu.Lock()
	for _, k := range keys {
		next[k.key] = k.version
		if v, ok := rep.versions[k.key]; ok && v == k.version && !k.owned {
			adopt = append(adopt, k.key)
		}
	}
	rep.versions = next
	adopted := make(map[string]struct{}, len(adopt))
	for _, key := range adopt {
		adopted[key] = struct{}{}
	}
	rep.adopted = adopted
	rep.mu.Unlock()
	for _, key := range adopt {
		w.run.Add(key)
	}
	w.forgetFailures(adopt)
}

// forgetFailures drops the failure counts of the keys this client neither
// owns nor adopted: another's key counts the failures of the adopted steps
// of consecutive rounds only, and a key that moved to another member
// counts nothing here.
func (w *workSharing) forgetFailures(adopt []string) {
	adopted := make(map[string]bool, len(adopt))
	for _, key := range adopt {
		adopted[key] = true
	}
	w.run.ForgetFailures(func(key string) bool { return adopted[key] || w.owns(key) })
}

// sharing is the work sharing as the runner asks it (package runner).
type sharing struct{ w *workSharing }

// Owner returns the member that reconciles key, and whether it is this
// client (workSharing.owner).
func (s sharing) Owner(key string) (string, bool) { return s.w.owner(key) }

// Adopt takes an adopted key one step, whose writes (stepWrites) tell
// whether its owner left it undone (adoptedStep).
func (s sharing) Adopt(ctx context.Context, key, owner string) (context.Context, func(), bool) {
	if !s.w.rep.takeAdopted(key) {
		return nil, nil, false
	}
	w := &stepWrites{key: key}
	return context.WithValue(ctx, stepWritesKey{}, w), func() { s.w.adoptedStep(owner, w) }, true
}

// takeAdopted reports whether key was adopted at the last periodic
// resync, and forgets it: an adopted key is taken one step.
func (rep *replicas) takeAdopted(key string) bool {
	if rep == nil {
		return false
	}
	rep.mu.Lock()
	defer rep.mu.Unlock()
	_, ok := rep.adopted[key]
	delete(rep.adopted, key)
	return ok
}

// forget drops what the adoption keeps of key, deleted from the store. It
// runs inside the store's write (onChange) and only touches memory.
func (rep *replicas) forget(key string) {
	if rep == nil {
		return
	}
	rep.mu.Lock()
	delete(rep.versions, key)
	delete(rep.adopted, key)
	rep.mu.Unlock()
}

// errShareUndone is logged with a member left out of the live ones.
var errShareUndone = errors.New("keys of its share needed a step at two periodic resyncs in a row")

// adoptedStep takes the end of an adopted step that w watched, of a key
// owner owns: a step that wrote the store is a strike against owner, and
// the version it wrote of the key is what the next round compares the key
// with. Strikes at two rounds in a row leave owner out of the live
// members (see exclusion).
func (sh *workSharing) adoptedStep(owner string, w *stepWrites) {
	w.mu.Lock()
	wrote, own, version := w.wrote, w.own, w.version
	w.mu.Unlock()
	if !wrote {
		return
	}
	rep := sh.rep
	rep.mu.Lock()
	switch {
	case own && version == "":
		delete(rep.versions, w.key)
	case own:
		rep.versions[w.key] = version
	}
	rep.strikes[owner]++
	keys := rep.strikes[owner] + rep.struck[owner]
	_, member := rep.seen[owner]
	ex := rep.excluded[owner]
	out := member && rep.struck[owner] > 0 && ex.until <= rep.round
	var rounds uint64
	changed := false
	if out {
		ex.offenses++
		rounds = stallRounds << min(ex.offenses-1, maxStallShift)
		ex.until = rep.round + rounds
		rep.excluded[owner] = ex
		changed = rep.publish()
	}
	rep.mu.Unlock()
	if !out {
		return
	}
	sh.metrics.replicaStalled(owner)
	sh.log.Error(errShareUndone, "a replica leaves its share of the work undone: left out of the live members, this client takes its share over",
		"replica", rep.self, "stalled", owner, "keys", keys, "resyncs", rounds)
	if changed {
		sh.membersChanged()
		sh.resync()
	}
}

// membersChanged logs the live members, which just changed.
func (w *workSharing) membersChanged() {
	v := w.rep.view.Load()
	w.log.Info("the replicas sharing the work changed", "replica", w.rep.self, "live", v.live, "leftOut", v.out)
}

// stepWrites is what an adopted step wrote, as the writes it makes report
// it (noteWrite).
type stepWrites struct {
	key     string
	mu      sync.Mutex
	wrote   bool   // the step wrote the store
	own     bool   // it wrote key
	version string // the version of key written; "" once deleted
}

// stepWritesKey is the context key of an adopted step's stepWrites.
type stepWritesKey struct{}

// noteWrite tells the adopted step of ctx, if any, that it wrote kind/id
// at version ("": deleted it). The reconcilers write through create and
// update, and delete a cluster in reconcileDelete, which call it; a batch
// of account changes (writeAccount) tells each change's step apart.
func noteWrite(ctx context.Context, kind, id, version string) {
	w, _ := ctx.Value(stepWritesKey{}).(*stepWrites)
	if w == nil {
		return
	}
	w.mu.Lock()
	w.wrote = true
	if w.key == kind+"/"+id {
		w.own, w.version = true, version
	}
	w.mu.Unlock()
}

// inAdoptedStep reports whether ctx is the context of a step adopted from
// another client (its owner's to decide what only the owner decides).
func inAdoptedStep(ctx context.Context) bool {
	w, _ := ctx.Value(stepWritesKey{}).(*stepWrites)
	return w != nil
}

// withoutStepWrites returns ctx with no adopted step to tell of its
// writes: for a write made for several callers (a batch of account
// changes), each of whose steps is told apart.
func withoutStepWrites(ctx context.Context) context.Context {
	if ctx.Value(stepWritesKey{}) == nil {
		return ctx
	}
	return context.WithValue(ctx, stepWritesKey{}, (*stepWrites)(nil))
}
