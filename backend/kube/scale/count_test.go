package scale_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
)

// counts is a bag of named counters; phases are told apart by taking the
// difference of two snapshots.
type counts map[string]int64

// sub returns c − before, leaving out what did not change.
func (c counts) sub(before counts) counts {
	d := counts{}
	for k, v := range c {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// sum adds the counters whose key f accepts.
func (c counts) sum(f func(key string) bool) int64 {
	var n int64
	for k, v := range c {
		if f(k) {
			n += v
		}
	}
	return n
}

// per lists the counters whose key f accepts, each divided by ops, largest
// first: "update cluster 2.00, create name 1.00".
func (c counts) per(ops int, f func(key string) bool) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		if f(k) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if c[keys[i]] != c[keys[j]] {
			return c[keys[i]] > c[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", k, ratio(c[k], ops)))
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

// counter is a set of counts safe for concurrent use.
type counter struct {
	mu sync.Mutex
	n  counts
}

func newCounter() *counter { return &counter{n: counts{}} }

func (c *counter) add(key string) {
	c.mu.Lock()
	c.n[key]++
	c.mu.Unlock()
}

func (c *counter) snapshot() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// Keys of the counting backend: "<class> <op> <kind>", with " conflict" or
// " error" after a call that failed so (a missing object is an answer, not
// an error). Class "store" or "ray".
func isStoreWrite(k string) bool {
	return strings.HasPrefix(k, "store create ") || strings.HasPrefix(k, "store update ") || strings.HasPrefix(k, "store delete ")
}
func isConflict(k string) bool  { return strings.HasSuffix(k, " conflict") }
func isCallError(k string) bool { return strings.HasSuffix(k, " error") }
func isStoreRead(k string) bool {
	return strings.HasPrefix(k, "store get") || strings.HasPrefix(k, "store list")
}
func isRayWrite(k string) bool {
	for _, op := range []string{"ray apply ", "ray delete ", "ray submit ", "ray stop "} {
		if strings.HasPrefix(k, op) {
			return true
		}
	}
	return false
}

// countingBackend is a replica's kube.Backend with every store and Ray
// call the client makes counted by operation, kind and outcome. It embeds
// the *kube.Backend, so what the client finds by type assertion
// (backend.LatestReader's GetLatest, backend.LatestLister's ListLatest,
// backend.AwaitingCreator's CreateStored) stays there, and counted: each
// must be wrapped here, or the client's calls of it go uncounted.
type countingBackend struct {
	*kube.Backend
	c *counter
}

func (b countingBackend) done(class, op, kind string, err error) {
	key := class + " " + op + " " + kind
	switch {
	case err == nil || errors.Is(err, dlc.ErrNotFound):
	case errors.Is(err, dlc.ErrConflict):
		key += " conflict"
	default:
		key += " error"
	}
	b.c.add(key)
}

func (b countingBackend) Get(ctx context.Context, kind, id string) (backend.Doc, error) {
	d, err := b.Backend.Get(ctx, kind, id)
	b.done("store", "get", kind, err)
	return d, err
}

func (b countingBackend) GetLatest(ctx context.Context, kind, id string) (backend.Doc, error) {
	d, err := b.Backend.GetLatest(ctx, kind, id)
	b.done("store", "get-latest", kind, err)
	return d, err
}

func (b countingBackend) CreateStored(ctx context.Context, d backend.Doc) (string, func(context.Context), error) {
	v, await, err := b.Backend.CreateStored(ctx, d)
	b.done("store", "create", d.Kind, err)
	return v, await, err
}

func (b countingBackend) List(ctx context.Context, kind string, sel map[string]string) ([]backend.Doc, error) {
	d, err := b.Backend.List(ctx, kind, sel)
	b.done("store", "list", kind, err)
	return d, err
}

func (b countingBackend) ListLatest(ctx context.Context, kind string, sel map[string]string) ([]backend.Doc, error) {
	d, err := b.Backend.ListLatest(ctx, kind, sel)
	b.done("store", "list-latest", kind, err)
	return d, err
}

func (b countingBackend) Create(ctx context.Context, d backend.Doc) (string, error) {
	v, err := b.Backend.Create(ctx, d)
	b.done("store", "create", d.Kind, err)
	return v, err
}

func (b countingBackend) Update(ctx context.Context, d backend.Doc) (string, error) {
	v, err := b.Backend.Update(ctx, d)
	b.done("store", "update", d.Kind, err)
	return v, err
}

func (b countingBackend) Delete(ctx context.Context, kind, id, version string) error {
	err := b.Backend.Delete(ctx, kind, id, version)
	b.done("store", "delete", kind, err)
	return err
}

func (b countingBackend) ApplyCluster(ctx context.Context, cl *cluster.Cluster) error {
	err := b.Backend.ApplyCluster(ctx, cl)
	b.done("ray", "apply", "cluster", err)
	return err
}

func (b countingBackend) DeleteCluster(ctx context.Context, id string) error {
	err := b.Backend.DeleteCluster(ctx, id)
	b.done("ray", "delete", "cluster", err)
	return err
}

func (b countingBackend) ClusterStatus(ctx context.Context, id string) (cluster.Observation, error) {
	o, err := b.Backend.ClusterStatus(ctx, id)
	b.done("ray", "status", "cluster", err)
	return o, err
}

func (b countingBackend) SubmitRun(ctx context.Context, r *job.Run, cl *cluster.Cluster) error {
	err := b.Backend.SubmitRun(ctx, r, cl)
	b.done("ray", "submit", "run", err)
	return err
}

func (b countingBackend) StopRun(ctx context.Context, id string) error {
	err := b.Backend.StopRun(ctx, id)
	b.done("ray", "stop", "run", err)
	return err
}

func (b countingBackend) RunStatus(ctx context.Context, id string) (job.Observation, error) {
	o, err := b.Backend.RunStatus(ctx, id)
	b.done("ray", "status", "run", err)
	return o, err
}

// apiCounter is an http.RoundTripper that counts a replica's requests to
// the API server by class ("write", "read", "watch"), verb and resource,
// with the status code of a refusal: "write PATCH rayclusters",
// "write PUT computeclusters/status 409", "write POST events".
type apiCounter struct {
	next http.RoundTripper
	c    *counter
}

func (a *apiCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	key := requestKey(req)
	resp, err := a.next.RoundTrip(req)
	switch {
	case err != nil:
		key += " error"
	case resp.StatusCode >= 400:
		key += fmt.Sprintf(" %d", resp.StatusCode)
	}
	a.c.add(key)
	return resp, err
}

// requestKey names a request by class, verb and resource (with its
// subresource).
func requestKey(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// api/v1/... or apis/<group>/<version>/...; then namespaces/<ns>/<resource>[/<name>[/<sub>]].
	skip := map[string]int{"api": 2, "apis": 3}[parts[0]]
	if skip == 0 || len(parts) <= skip {
		return "read discovery"
	}
	parts = parts[skip:]
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	res := parts[0]
	if len(parts) >= 3 {
		res += "/" + parts[2]
	}
	switch {
	case req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true":
		return "watch " + res
	case req.Method == http.MethodGet:
		return "read GET " + res
	default:
		return "write " + req.Method + " " + res
	}
}

func isAPIWrite(k string) bool { return strings.HasPrefix(k, "write ") }
func isAPIEvent(k string) bool {
	return strings.HasPrefix(k, "write ") && strings.Contains(k, " events")
}

// statusOf is the status code a key ends with (0: none), or -1 for a
// request that got no answer.
func statusOf(k string) int {
	last := k[strings.LastIndexByte(k, ' ')+1:]
	if last == "error" {
		return -1
	}
	code, err := strconv.Atoi(last)
	if err != nil {
		return 0
	}
	return code
}

func isAPIConflict(k string) bool { return isAPIWrite(k) && statusOf(k) == 409 }

// isAPIFailure: throttled (429), a server error, or no answer at all.
func isAPIFailure(k string) bool { s := statusOf(k); return s == -1 || s == 429 || s >= 500 }

// reconcileCounts sums the clients' own counters of failed and retried
// reconcile steps (dlc_reconcile_errors_total, dlc_reconcile_retries_total)
// over their registries, by kind: "retries cluster", "errors run".
func reconcileCounts(regs []*prometheus.Registry) counts {
	n := counts{}
	for _, reg := range regs {
		mfs, err := reg.Gather()
		if err != nil {
			continue
		}
		for _, mf := range mfs {
			var what string
			switch mf.GetName() {
			case "dlc_reconcile_retries_total":
				what = "retries"
			case "dlc_reconcile_errors_total":
				what = "errors"
			default:
				continue
			}
			for _, m := range mf.GetMetric() {
				kind := "?"
				for _, l := range m.GetLabel() {
					if l.GetName() == "kind" {
						kind = l.GetValue()
					}
				}
				n[what+" "+kind] += int64(m.GetCounter().GetValue())
			}
		}
	}
	return n
}
