package scale_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
)

// tracker follows the store through a watch (every version of every
// document, as a replica's cache sees them) and keeps what the phases wait
// on: how many clusters (the platform's own, on-demand ones apart) and runs
// are in each state, which clusters were ever abnormal and why, how runs
// that did not succeed ended, and how large each kind's documents are.
// Waiting on it is waiting on a condition: each change wakes the waiters.
type tracker struct {
	mu       sync.Mutex
	state    map[string]map[string]string // kind → id → state (clusters: not on-demand ones)
	byState  map[string]map[string]int    // kind → state → how many
	size     map[string]map[string]int    // kind → id → bytes of the last version
	maxSize  map[string]int               // kind → the largest version seen
	abnormal map[string]string            // cluster id → its reason when first seen abnormal
	ended    map[string]string            // run id → "state: message" of a run that did not succeed
	onDemand map[string]bool              // on-demand runs' clusters stored now
	changes  int
	last     time.Time     // of the last change, membership renewals aside
	changed  chan struct{} // closed at the next change
}

func newTracker() *tracker {
	return &tracker{state: map[string]map[string]string{}, byState: map[string]map[string]int{},
		size: map[string]map[string]int{}, maxSize: map[string]int{}, abnormal: map[string]string{},
		ended: map[string]string{}, onDemand: map[string]bool{}, changed: make(chan struct{})}
}

// on takes one change of the store.
func (tr *tracker) on(ch backend.Change) {
	d := ch.Doc
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.changes++
	if d.Kind != "replica" {
		tr.last = time.Now() // a membership renewal is no work being done
	}
	close(tr.changed)
	tr.changed = make(chan struct{})

	if tr.size[d.Kind] == nil {
		tr.size[d.Kind] = map[string]int{}
	}
	if ch.Deleted {
		delete(tr.size[d.Kind], d.ID)
	} else {
		tr.size[d.Kind][d.ID] = len(d.Data)
		tr.maxSize[d.Kind] = max(tr.maxSize[d.Kind], len(d.Data))
	}

	if d.Kind != "cluster" && d.Kind != "run" {
		return
	}
	if d.Kind == "cluster" && d.Labels["temporary"] != "" {
		// An on-demand run's cluster: counted apart.
		if ch.Deleted {
			delete(tr.onDemand, d.ID)
		} else {
			tr.onDemand[d.ID] = true
		}
		return
	}
	st := d.Labels["state"]
	if ch.Deleted {
		st = ""
	}
	if tr.state[d.Kind] == nil {
		tr.state[d.Kind], tr.byState[d.Kind] = map[string]string{}, map[string]int{}
	}
	if old, ok := tr.state[d.Kind][d.ID]; ok {
		tr.byState[d.Kind][old]--
	}
	if st == "" {
		delete(tr.state[d.Kind], d.ID)
	} else {
		tr.state[d.Kind][d.ID] = st
		tr.byState[d.Kind][st]++
	}
	switch {
	case d.Kind == "cluster" && st == string(cluster.Abnormal):
		if _, seen := tr.abnormal[d.ID]; !seen {
			var cl cluster.Cluster
			_ = json.Unmarshal(d.Data, &cl)
			tr.abnormal[d.ID] = cl.Reason
		}
	case d.Kind == "run" && job.RunState(st).Terminal() && st != string(job.Succeeded):
		var r job.Run
		_ = json.Unmarshal(d.Data, &r)
		tr.ended[d.ID] = st + ": " + r.Message
	}
}

// count returns how many of kind are in state.
func (tr *tracker) count(kind, state string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.byState[kind][state]
}

// terminalRuns returns how many runs have ended.
func (tr *tracker) terminalRuns() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for st, k := range tr.byState["run"] {
		if job.RunState(st).Terminal() {
			n += k
		}
	}
	return n
}

// onDemandClusters returns how many on-demand runs' clusters are stored.
func (tr *tracker) onDemandClusters() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.onDemand)
}

// states says how many of kind are in each state: "running 190, starting 10".
func (tr *tracker) states(kind string) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return stateList(tr.byState[kind])
}

func stateList(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	var parts []string
	for _, k := range keys {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// abnormalEver returns the clusters ever seen abnormal, with the first
// reasons (at most five, each once).
func (tr *tracker) abnormalEver() (int, []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.abnormal), firstReasons(tr.abnormal)
}

// notSucceeded returns how many runs ended otherwise than succeeded, with
// the first reasons.
func (tr *tracker) notSucceeded() (int, []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.ended), firstReasons(tr.ended)
}

func firstReasons(m map[string]string) []string {
	seen := map[string]int{}
	for _, why := range m {
		seen[why]++
	}
	keys := slices.Sorted(maps.Keys(seen))
	var out []string
	for _, why := range keys {
		if len(out) == 5 {
			break
		}
		out = append(out, fmt.Sprintf("%d× %q", seen[why], why))
	}
	return out
}

// sizes reports each kind's stored documents: how many, their mean and
// the largest version seen, in bytes of JSON.
func (tr *tracker) sizes() [][]string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var rows [][]string
	for _, kind := range slices.Sorted(maps.Keys(tr.size)) {
		n, sum := 0, 0
		for _, b := range tr.size[kind] {
			n++
			sum += b
		}
		mean := "—"
		if n > 0 {
			mean = fmt.Sprintf("%d", sum/n)
		}
		rows = append(rows, []string{kind, fmt.Sprintf("%d", n), mean, fmt.Sprintf("%d", tr.maxSize[kind])})
	}
	return rows
}

// wait waits until cond holds, checking it at every change of the store,
// until ctx ends. Every progressEvery it logs what cond reports. It
// returns how long it waited and whether cond held. more adds to the log.
func (tr *tracker) wait(ctx context.Context, logf func(string, ...any), what string, cond func() (bool, string), more func() string) (time.Duration, bool) {
	began := time.Now()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		tr.mu.Lock()
		changed := tr.changed
		tr.mu.Unlock()
		ok, state := cond()
		if ok {
			return time.Since(began), true
		}
		select {
		case <-changed:
		case <-tick.C:
			logf("waiting %v for %s: %s; %s", time.Since(began).Round(time.Second), what, state, more())
		case <-ctx.Done():
			logf("gave up after %v waiting for %s: %s; %s", time.Since(began).Round(time.Second), what, state, more())
			return time.Since(began), false
		}
	}
}

// quiet waits until the store has not changed for d (membership renewals
// aside), for at most limit; it reports whether it was quiet.
func (tr *tracker) quiet(ctx context.Context, d, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		tr.mu.Lock()
		last, changed := tr.last, tr.changed
		tr.mu.Unlock()
		left := d - time.Since(last)
		if left <= 0 {
			return true
		}
		timer := time.NewTimer(left)
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return false
		}
		timer.Stop()
	}
}

// progressEvery is how often a wait logs where it is.
const progressEvery = 15 * time.Second
