package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

func runIDs(runs []*job.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// Runs in pages: every filter, pages that join up to the whole list in
// its order (submission, then id: runs made at one instant of the fake
// clock are ordered by id), a run made between two pages found on a later
// page and none twice, and bad input refused.
func TestRunListPages(t *testing.T) {
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	defer m.Close()
	c := m.Client
	alice, bob := dlc.WithUser(context.Background(), "alice"), dlc.WithUser(context.Background(), "bob")
	if _, err := c.ResourceGroups().Register(alice, quota.Group{ID: "rg", Package: "p",
		Capacity: quota.Resources{MilliCPU: 1 << 20, Memory: 1 << 40}}); err != nil {
		t.Fatal(err)
	}
	save := func(name string) *job.Record {
		cfg, err := dlc.NewJob(name).OnDemand("p", "rg").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
			WorkerGroup("w", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").
			Tag("team", name).Build()
		if err != nil {
			t.Fatal(err)
		}
		rec, err := c.Jobs().Create(alice, cfg, dlc.SaveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	a, b := save("a"), save("b")
	t0 := m.Clock.Now()
	for i := range 30 {
		ctx, rec := alice, a
		if i%3 == 0 {
			ctx, rec = bob, b
		}
		if _, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{}); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			m.Clock.Advance(time.Second) // some share an instant
		}
	}
	m.Settle(100*time.Millisecond, 10000) // they all succeed
	mid := t0.Add(4 * time.Second)

	all, err := c.Runs().List(alice, dlc.RunListOptions{})
	if err != nil || len(all) != 30 {
		t.Fatalf("%d runs, %v", len(all), err)
	}
	if !slices.IsSortedFunc(all, func(x, y *job.Run) int {
		if c := x.SubmittedAt.Compare(y.SubmittedAt); c != 0 {
			return c
		}
		if x.ID < y.ID {
			return -1
		}
		return 1
	}) {
		t.Fatal("not in submission order, then id")
	}
	for _, tc := range []struct {
		name string
		opts dlc.RunListOptions
		want func(*job.Run) bool
	}{
		{"every run", dlc.RunListOptions{}, func(*job.Run) bool { return true }},
		{"one job", dlc.RunListOptions{JobID: b.ID}, func(r *job.Run) bool { return r.JobID == b.ID }},
		{"creator", dlc.RunListOptions{Creator: "alice"}, func(r *job.Run) bool { return r.Creator == "alice" }},
		{"state", dlc.RunListOptions{States: []job.RunState{job.Succeeded}}, func(r *job.Run) bool { return r.State == job.Succeeded }},
		{"states", dlc.RunListOptions{States: []job.RunState{job.Failed, job.Running}}, func(*job.Run) bool { return false }},
		{"submitted after", dlc.RunListOptions{SubmittedAfter: mid}, func(r *job.Run) bool { return r.SubmittedAt.After(mid) }},
		{"job and creator", dlc.RunListOptions{JobID: a.ID, Creator: "bob"}, func(*job.Run) bool { return false }},
		{"job, state and time", dlc.RunListOptions{JobID: a.ID, States: []job.RunState{job.Succeeded}, SubmittedAfter: mid},
			func(r *job.Run) bool { return r.JobID == a.ID && r.SubmittedAt.After(mid) }},
		{"cluster", dlc.RunListOptions{ClusterID: all[0].ClusterID}, func(r *job.Run) bool { return r.ClusterID == all[0].ClusterID }},
		{"tag", dlc.RunListOptions{Tags: map[string]string{"team": "b"}}, func(r *job.Run) bool { return r.JobID == b.ID }},
		{"tag and job", dlc.RunListOptions{JobID: a.ID, Tags: map[string]string{"team": "b"}}, func(*job.Run) bool { return false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for _, r := range all {
				if tc.want(r) {
					want = append(want, r.ID)
				}
			}
			got, err := c.Runs().List(alice, tc.opts)
			if err != nil || !slices.Equal(runIDs(got), want) {
				t.Fatalf("List: %v %v, want %v", runIDs(got), err, want)
			}
			for _, limit := range []int{1, 7, 100} {
				opts := tc.opts
				opts.Limit = limit
				var paged []string
				for pages := 0; ; pages++ {
					p, err := c.Runs().ListPage(alice, opts)
					if err != nil || len(p.Items) > limit || pages > 40 {
						t.Fatalf("limit %d: page of %d, %v", limit, len(p.Items), err)
					}
					paged = append(paged, runIDs(p.Items)...)
					if p.Continue == "" {
						break
					}
					opts.Continue = p.Continue
				}
				if !slices.Equal(paged, want) {
					t.Errorf("limit %d: pages %v, want %v", limit, paged, want)
				}
			}
		})
	}

	// A run made between two pages is on a later one; none is told twice.
	p1, err := c.Runs().ListPage(alice, dlc.RunListOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	m.Clock.Advance(time.Second)
	late, err := c.Runs().Create(alice, a.ID, dlc.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rest, err := c.Runs().List(alice, dlc.RunListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := slices.Clone(runIDs(p1.Items))
	opts := dlc.RunListOptions{Limit: 10, Continue: p1.Continue}
	for opts.Continue != "" {
		p, err := c.Runs().ListPage(alice, opts)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, runIDs(p.Items)...)
		opts.Continue = p.Continue
	}
	if !slices.Equal(seen, runIDs(rest)) || seen[len(seen)-1] != late.ID {
		t.Errorf("pages across a create: %v, want %v", seen, runIDs(rest))
	}

	for _, bad := range []dlc.RunListOptions{{Limit: -1}, {Continue: "not-a-token"}, {Continue: "e30"}} {
		if _, err := c.Runs().ListPage(alice, bad); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
}

// Clusters in pages, by id, with their filters.
func TestClusterListPages(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	var standing []string
	for i := range 9 {
		cl, err := f.c.Clusters().Create(f.ctx, f.spec(fmt.Sprintf("c%d", i), 1, 1))
		f.must(err)
		standing = append(standing, cl.ID)
	}
	f.settle()
	started := standing[0]
	_, err := f.c.Clusters().Start(f.ctx, started)
	f.must(err)
	f.settle()
	bob := dlc.WithUser(context.Background(), "bob")
	bobsSpec := f.spec("bobs", 1, 1)
	bobsSpec.Tags = map[string]string{"team": "nlp", "env": ""}
	other, err := f.c.Clusters().Create(bob, bobsSpec)
	f.must(err)
	f.settle()
	slices.Sort(standing)
	withBob := slices.Sorted(slices.Values(append(slices.Clone(standing), other.ID)))
	for _, tc := range []struct {
		name string
		opts dlc.ClusterListOptions
		want []string
	}{
		{"every cluster", dlc.ClusterListOptions{}, withBob},
		{"standing", dlc.ClusterListOptions{Kind: cluster.KindStanding}, withBob},
		{"on-demand", dlc.ClusterListOptions{Kind: cluster.KindOnDemand}, nil},
		{"running", dlc.ClusterListOptions{States: []cluster.State{cluster.Running}}, []string{started}},
		{"creator", dlc.ClusterListOptions{Creator: "bob"}, []string{other.ID}},
		{"group", dlc.ClusterListOptions{Group: f.grp}, withBob},
		{"resource group", dlc.ClusterListOptions{ResourceGroup: "rg-9"}, nil},
		{"tag", dlc.ClusterListOptions{Tags: map[string]string{"team": "nlp"}}, []string{other.ID}},
		{"tags, one empty", dlc.ClusterListOptions{Tags: map[string]string{"team": "nlp", "env": ""}}, []string{other.ID}},
		{"a tag's other value", dlc.ClusterListOptions{Tags: map[string]string{"team": "cv"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Limit = 4
			var got []string
			for {
				p, err := f.c.Clusters().ListPage(f.ctx, opts)
				if err != nil || len(p.Items) > 4 {
					t.Fatalf("%d %v", len(p.Items), err)
				}
				for _, cl := range p.Items {
					got = append(got, cl.ID)
				}
				if opts.Continue = p.Continue; p.Continue == "" {
					break
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := f.c.Clusters().ListPage(f.ctx, dlc.ClusterListOptions{Kind: "temporary"}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("bad kind: %v", err)
	}
}

// The job list in pages, by id, with its filters.
func TestJobListPages(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	bob := dlc.WithUser(context.Background(), "bob")
	var all, bobs, onDemand []string
	for i := range 11 {
		ctx, b := f.ctx, dlc.NewJob(fmt.Sprintf("job-%02d", i)).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py")
		if i%2 == 0 {
			b.OnGroup(f.grp)
		} else {
			b.OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1)
		}
		if i%3 == 0 {
			ctx = bob
			b.Tag("team", "nlp")
		}
		cfg, err := b.Build()
		f.must(err)
		rec, err := f.c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
		f.must(err)
		all = append(all, rec.ID)
		if i%3 == 0 {
			bobs = append(bobs, rec.ID)
		}
		if i%2 == 1 {
			onDemand = append(onDemand, rec.ID)
		}
	}
	slices.Sort(all)
	slices.Sort(bobs)
	slices.Sort(onDemand)
	for _, tc := range []struct {
		name string
		opts dlc.JobListOptions
		want []string
	}{
		{"every config", dlc.JobListOptions{}, all},
		{"creator", dlc.JobListOptions{Creator: "bob"}, bobs},
		{"mode", dlc.JobListOptions{Mode: job.OnDemandMode}, onDemand},
		{"resource", dlc.JobListOptions{Resource: "rg-1"}, onDemand},
		{"tag", dlc.JobListOptions{Tags: map[string]string{"team": "nlp"}}, bobs},
		{"name", dlc.JobListOptions{NameContains: "job-1"}, nil}, // filled below
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "name" {
				for _, e := range mustList(t, f.c, dlc.JobListOptions{}) {
					if strings.Contains(e.Name, "job-1") {
						tc.want = append(tc.want, e.ID)
					}
				}
			}
			opts := tc.opts
			opts.Limit = 3
			var got []string
			for {
				p, err := f.c.Jobs().ListPage(f.ctx, opts)
				if err != nil || len(p.Items) > 3 {
					t.Fatalf("%d %v", len(p.Items), err)
				}
				for _, e := range p.Items {
					got = append(got, e.ID)
				}
				if opts.Continue = p.Continue; p.Continue == "" {
					break
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func mustList(t *testing.T, c *dlc.Client, opts dlc.JobListOptions) []job.ListEntry {
	t.Helper()
	out, err := c.Jobs().List(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestListsTakeOneShape: every service's List takes the context and at
// most one options value (none lists everything); two are refused, not
// merged, and the options' Limit is ListPage's.
func TestListsTakeOneShape(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	for i := range 3 {
		_, err := f.c.Clusters().Create(f.ctx, f.spec(fmt.Sprintf("c%d", i), 1, 1))
		f.must(err)
	}
	f.settle()
	for _, tc := range []struct {
		name string
		list func() (int, error)
		want int
		bad  bool
	}{
		{"clusters, no options", func() (int, error) { l, err := f.c.Clusters().List(f.ctx); return len(l), err }, 3, false},
		{"clusters, a limit is ListPage's", func() (int, error) {
			l, err := f.c.Clusters().List(f.ctx, dlc.ClusterListOptions{Limit: 1})
			return len(l), err
		}, 3, false},
		{"clusters, two options", func() (int, error) {
			l, err := f.c.Clusters().List(f.ctx, dlc.ClusterListOptions{}, dlc.ClusterListOptions{})
			return len(l), err
		}, 0, true},
		{"runs, no options", func() (int, error) { l, err := f.c.Runs().List(f.ctx); return len(l), err }, 0, false},
		{"runs, two options", func() (int, error) {
			l, err := f.c.Runs().List(f.ctx, dlc.RunListOptions{}, dlc.RunListOptions{})
			return len(l), err
		}, 0, true},
		{"jobs, two options", func() (int, error) {
			l, err := f.c.Jobs().List(f.ctx, dlc.JobListOptions{}, dlc.JobListOptions{})
			return len(l), err
		}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := tc.list()
			if tc.bad {
				if !errors.Is(err, dlc.ErrInvalid) {
					t.Fatalf("two options: got %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil || n != tc.want {
				t.Fatalf("got %d items, %v; want %d", n, err, tc.want)
			}
		})
	}
}
