package kube_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	dlc "github.com/aidlc/dlc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

var (
	_ dlc.LatestLister = (*kube.Store)(nil)
	_ dlc.LatestLister = (*kube.Backend)(nil)
)

func ids(docs []backend.Doc) []string {
	out := make([]string, 0, len(docs))
	for _, d := range docs {
		out = append(out, d.ID)
	}
	return out
}

// TestStoreListLatest: ListLatest lists what the API server has, past the
// cache: a run another replica created after this store's cache stopped
// (closed here, so that its cache is behind for certain) is listed by
// ListLatest and not by List. It selects on the store's labels, which
// most kinds keep in their status (and a created object in its
// initial-status annotation), reads in pages, and leaves out what is not
// the store's (or another kind's, among the ConfigMaps).
func TestStoreListLatest(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	var stores [2]*kube.Store
	for i := range stores {
		s, err := kube.NewStore(t.Context(), cp.Config(), ns, kube.StoreOptions{NoEvents: true})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	a, b := stores[0], stores[1]
	defer b.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	cfg := testConfig()
	run := func(id, jobID string, state job.RunState) (backend.Doc, *job.Run) {
		r := &job.Run{ID: id, JobID: jobID, Revision: 1, Config: cfg, State: state, Creator: "alice", SubmittedAt: t0, Priority: 7}
		phase := map[job.RunState]string{job.Queued: "pending", job.Running: "active", job.Succeeded: "done"}[state]
		return backend.Doc{Kind: "run", ID: id, Labels: map[string]string{"job": jobID, "phase": phase, "state": string(state)}, Data: mustJSON(t, r)}, r
	}
	create := func(s *kube.Store, d backend.Doc) string {
		t.Helper()
		v, err := s.Create(ctx, d)
		if err != nil {
			t.Fatalf("Create %s/%s: %v", d.Kind, d.ID, err)
		}
		return v
	}
	// Runs of job-1 queued, running (its status written: its labels are
	// in the status subresource, not the initial-status annotation), and
	// done; one of job-2.
	create(b, must2(run("run-1", "job-1", job.Queued)))
	d2, r2 := run("run-2", "job-1", job.Queued)
	d2.Version = create(b, d2)
	r2.State = job.Running
	d2.Labels = map[string]string{"job": "job-1", "phase": "active", "state": "running"}
	d2.Data = mustJSON(t, r2)
	if _, err := b.Update(ctx, d2); err != nil {
		t.Fatal(err)
	}
	create(b, must2(run("run-3", "job-1", job.Succeeded)))
	create(b, must2(run("run-4", "job-2", job.Queued)))
	// What is not the store's: a Run made by hand, without the id
	// annotation; a StoreEntry without the claims' kind label.
	hand := &v1alpha1.Run{ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: ns},
		Spec: v1alpha1.RunSpec{JobID: "job-1", Config: v1alpha1.JobConfigBody{Name: "by hand"}, SubmittedAt: t0.Format(time.RFC3339Nano)}}
	if err := cp.Client().Create(ctx, hand); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client().Create(ctx, &v1alpha1.StoreEntry{ObjectMeta: metav1.ObjectMeta{Name: "not-a-claim", Namespace: ns}, Data: "{}"}); err != nil {
		t.Fatal(err)
	}
	create(b, backend.Doc{Kind: "name", ID: "cluster:c1", Data: []byte(`{"owner":"cls-1"}`)})
	create(b, backend.Doc{Kind: "replica", ID: "client-1", Data: []byte(`{"id":"client-1"}`)}) // a StoreEntry of another kind
	acc := &quota.Account{Group: quota.Group{ID: "rg-1", Package: "pkg-1", Capacity: quota.Cores(8)}}
	create(b, backend.Doc{Kind: "resourcegroup", ID: acc.ID, Labels: map[string]string{"package": "pkg-1"}, Data: mustJSON(t, acc)})

	// Store a's cache stops here; b makes one more run of job-1.
	waitCached(t, a, "run", "run-4")
	a.Close()
	create(b, must2(run("run-5", "job-1", job.Queued)))
	if got, _ := a.List(ctx, "run", map[string]string{"job": "job-1"}); slices.Contains(ids(got), "run-5") {
		t.Fatal("the closed store's cache has run-5: the test cannot tell ListLatest from List")
	}

	kube.SetListPage(a, 2) // 5 runs and one by hand: 3 pages
	for _, c := range []struct {
		kind string
		sel  map[string]string
		want []string
	}{
		{"run", map[string]string{"job": "job-1"}, []string{"run-1", "run-2", "run-3", "run-5"}},
		{"run", map[string]string{"job": "job-1", "phase": "active"}, []string{"run-2"}},
		{"run", map[string]string{"job": "job-1", "phase": "pending"}, []string{"run-1", "run-5"}},
		{"run", nil, []string{"run-1", "run-2", "run-3", "run-4", "run-5"}},
		{"run", map[string]string{"job": "job-3"}, []string{}},
		{"name", nil, []string{"cluster:c1"}},
		{"replica", nil, []string{"client-1"}},
		{"resourcegroup", map[string]string{"package": "pkg-1"}, []string{"rg-1"}},
		{"resourcegroup", map[string]string{"package": "pkg-2"}, []string{}},
	} {
		t.Run(fmt.Sprintf("%s%v", c.kind, c.sel), func(t *testing.T) {
			got, err := a.ListLatest(ctx, c.kind, c.sel)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), c.want) {
				t.Fatalf("ListLatest(%s, %v) = %v, want %v", c.kind, c.sel, ids(got), c.want)
			}
			for _, d := range got {
				if d.Kind != c.kind || d.Version == "" || !backend.Matches(d.Labels, c.sel) {
					t.Errorf("%s/%s@%s labels %v", d.Kind, d.ID, d.Version, d.Labels)
				}
			}
		})
	}
	got, err := a.ListLatest(ctx, "run", map[string]string{"job": "job-1", "phase": "active"})
	if err != nil || len(got) != 1 {
		t.Fatalf("ListLatest: %v, %v", got, err)
	}
	if want, err := b.Get(ctx, "run", "run-2"); err != nil || string(got[0].Data) != string(want.Data) || got[0].Version != want.Version {
		t.Errorf("ListLatest's run-2 is %s@%s; Get says %s@%s (%v)", got[0].Data, got[0].Version, want.Data, want.Version, err)
	}
	if _, err := a.ListLatest(ctx, "planet", nil); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("ListLatest of an unknown kind: %v, want ErrInvalid", err)
	}
}

func must2[T any](d backend.Doc, _ T) backend.Doc { return d }

// waitCached waits until s's cache has kind/id.
func waitCached(t *testing.T, s *kube.Store, kind, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		docs, err := s.List(t.Context(), kind, nil)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(ids(docs), id) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache never had %s/%s", kind, id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStoreListLatestSelectsOnTheServer: a run's job config never changes,
// so the store writes it to the Run's metadata.labels too, and ListLatest
// by job has the API server select: it reads that config's runs only.
// While any cached Run lacks the label (written by a version before it
// was), ListLatest reads every Run, and finds that one; its next update
// labels it.
func TestStoreListLatestSelectsOnTheServer(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	s, err := kube.NewStore(t.Context(), cp.Config(), ns, kube.StoreOptions{NoEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cfg := testConfig()
	docs := map[string]backend.Doc{}
	for _, r := range []*job.Run{
		{ID: "run-1", JobID: "job-1"}, {ID: "run-2", JobID: "job-1"}, {ID: "run-3", JobID: "job-2"},
	} {
		r.Revision, r.Config, r.State, r.Creator, r.SubmittedAt = 1, cfg, job.Queued, "alice", t0
		d := backend.Doc{Kind: "run", ID: r.ID, Labels: map[string]string{"job": r.JobID, "phase": "pending"}, Data: mustJSON(t, r)}
		v, err := s.Create(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		d.Version = v
		docs[r.ID] = d
	}
	// found lists job-1's runs, and says how many objects it read and
	// whether it found both. (While the store's cache has not seen yet
	// that a Run lacks the label, the API server's selection misses it:
	// the window of a Run written by an older version, which the waits
	// below wait out.)
	found := func(n int64) bool {
		t.Helper()
		before := kube.Listed(s)
		got, err := s.ListLatest(ctx, "run", map[string]string{"job": "job-1"})
		if err != nil {
			t.Fatal(err)
		}
		return kube.Listed(s)-before == n && slices.Equal(ids(got), []string{"run-1", "run-2"})
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not within 20s: %s", what)
			}
		}
	}
	until("the server selects job-1's 2 runs", func() bool { return found(2) })

	// run-1 as an older version wrote it: no label in its metadata.
	var obj v1alpha1.Run
	if err := cp.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "run-1"}, &obj); err != nil {
		t.Fatal(err)
	}
	obj.Labels = nil
	if err := cp.Client().Update(ctx, &obj); err != nil {
		t.Fatal(err)
	}
	until("every Run read, and run-1 found, while it lacks the label", func() bool { return found(3) })

	d := docs["run-1"]
	d.Version = obj.ResourceVersion
	if _, err := s.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	until("the server selects again once the update labelled it", func() bool { return found(2) })
}

// TestStoreUsageRecordsUncached: usage records are StoreEntries the
// store does not cache (a replica's memory does not grow with them): a
// create returns at once (no cache to wait for), Get reads one from the
// API server, List and Watch never tell of them, ListLatest lists them
// with their labels; a second create of one id is a conflict (metering's
// exactly once). Meters, the open intervals, are cached as the other
// entry kinds are.
func TestStoreUsageRecordsUncached(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	s, err := kube.NewStore(t.Context(), cp.Config(), ns, kube.StoreOptions{NoEvents: true, WriteWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	watched := make(chan backend.Change, 16)
	if _, err := s.Watch(ctx, func(ch backend.Change) { watched <- ch }); err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"id":"cls-1.abc","cluster":"cls-1","start":"2026-01-01T00:00:00Z","end":"2026-01-01T01:00:00Z"}`)
	start := time.Now()
	if _, err := s.Create(ctx, backend.Doc{Kind: "usage", ID: "cls-1.abc", Labels: map[string]string{"on": "cls-1"}, Data: data}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("a usage record's create waited %v for a cache that does not have it", took)
	}
	if _, err := s.Create(ctx, backend.Doc{Kind: "usage", ID: "cls-1.abc", Data: data}); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("the same record again: %v, want a conflict", err)
	}
	if d, err := s.Get(ctx, "usage", "cls-1.abc"); err != nil || string(d.Data) != string(data) {
		t.Fatalf("Get: %v %s", err, d.Data)
	}
	if docs, err := s.List(ctx, "usage", nil); err != nil || len(docs) != 0 {
		t.Fatalf("List of an uncached kind: %v %v", ids(docs), err)
	}
	docs, err := s.ListLatest(ctx, "usage", map[string]string{"on": "cls-1"})
	if err != nil || len(docs) != 1 || docs[0].ID != "cls-1.abc" {
		t.Fatalf("ListLatest: %v %v", ids(docs), err)
	}
	// A meter is cached: its change is watched.
	if _, err := s.Create(ctx, backend.Doc{Kind: "meter", ID: "cls-1", Data: data}); err != nil {
		t.Fatal(err)
	}
	for ch := range watched {
		if ch.Doc.Kind == "usage" {
			t.Fatalf("a usage record was watched: %s", ch.Doc.ID)
		}
		if ch.Doc.Kind == "meter" {
			break
		}
	}
	if docs, err := s.List(ctx, "meter", nil); err != nil || len(docs) != 1 {
		t.Fatalf("List of meters: %v %v", ids(docs), err)
	}
}
