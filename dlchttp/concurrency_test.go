package dlchttp

import (
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
)

// TestIfMatch: a PUT is made against the version If-Match names: the
// current one succeeds and returns the next ETag; a stale one, a weak one
// or none fails and changes nothing; "*" and a list that holds the
// current one succeed; of two PUTs racing on one ETag exactly one wins;
// a rename to a taken name is a conflict, not a failed precondition.
func TestIfMatch(t *testing.T) {
	e := newEnv(t, dlctest.MemoryOptions{}, Options{})
	e.register(64000)
	var g struct{ ID string }
	e.must(req{method: "POST", path: "/v1/groups", body: groupBody{Name: "g"}}, 201, &g)
	var cl, other cluster.Cluster
	e.must(req{method: "POST", path: "/v1/clusters", body: clusterSpec(t, "c1", g.ID)}, 201, &cl)
	e.must(req{method: "POST", path: "/v1/clusters", body: clusterSpec(t, "c2", g.ID)}, 201, &other)
	e.settle()
	path := "/v1/clusters/" + cl.ID
	get := func() (*cluster.Cluster, string) {
		var c cluster.Cluster
		a := e.must(req{method: "GET", path: path}, 200, &c)
		return &c, a.header.Get("ETag")
	}
	put := func(team, ifMatch string) resp {
		spec := clusterSpec(t, "c1", g.ID)
		spec.Tags = map[string]string{"team": team}
		h := map[string]string{}
		if ifMatch != "" {
			h["If-Match"] = ifMatch
		}
		return e.do(req{method: "PUT", path: path, body: spec, header: h})
	}

	_, v1 := get()
	a := put("a", v1)
	if a.status != 200 || a.header.Get("ETag") == v1 {
		t.Fatalf("conditional update: %d %s, ETag %q (was %q)", a.status, a.body, a.header.Get("ETag"), v1)
	}
	cur, v2 := get()
	if v2 != a.header.Get("ETag") || cur.Spec.Tags["team"] != "a" {
		t.Fatalf("after the update: ETag %s (PUT said %s), tags %v", v2, a.header.Get("ETag"), cur.Spec.Tags)
	}
	for _, c := range []struct {
		name, ifMatch string
		status        int
		code          string
	}{
		{"stale", v1, 412, CodePreconditionFailed},
		{"weak", "W/" + v2, 412, CodePreconditionFailed},
		{"garbage", `"~!!"`, 412, CodePreconditionFailed},
		{"stale list", v1 + `, "nope"`, 412, CodePreconditionFailed},
		{"none", "", 428, CodePreconditionRequired},
	} {
		a := put("b", c.ifMatch)
		if a.status != c.status || a.err(t).Code != c.code {
			t.Errorf("%s If-Match: %d %s, want %d %s", c.name, a.status, a.body, c.status, c.code)
		}
	}
	if cur, v := get(); v != v2 || cur.Spec.Tags["team"] != "a" {
		t.Fatalf("failed preconditions changed the cluster: %s %v", v, cur.Spec.Tags)
	}
	if a := put("c", `"nope", `+v2); a.status != 200 {
		t.Fatalf("a list holding the current ETag: %d %s", a.status, a.body)
	}
	if a := put("d", "*"); a.status != 200 {
		t.Fatalf("If-Match *: %d %s", a.status, a.body)
	}

	// Two PUTs on one ETag: one wins, the other's precondition failed.
	_, v := get()
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i := range statuses {
		wg.Go(func() { statuses[i] = put(fmt.Sprint("race", i), v).status })
	}
	wg.Wait()
	slices.Sort(statuses)
	if !slices.Equal(statuses, []int{200, 412}) {
		t.Fatalf("racing PUTs answered %v, want one 200 and one 412", statuses)
	}

	// A rename to a taken name, on the current version: 409.
	_, v = get()
	spec := clusterSpec(t, "c2", g.ID)
	if a := e.do(req{method: "PUT", path: path, body: spec, header: map[string]string{"If-Match": v}}); a.status != 409 || a.err(t).Code != CodeConflict {
		t.Fatalf("rename to a taken name: %d %s", a.status, a.body)
	}

	// A job config the same way.
	var rec job.Record
	a = e.must(req{method: "POST", path: "/v1/jobs", body: onClusterJob(t, "j", cl.ID)}, 201, &rec)
	j1 := a.header.Get("ETag")
	cfg := rec.Config
	cfg.Entrypoint = "python b.py"
	a = e.must(req{method: "PUT", path: "/v1/jobs/" + rec.ID, body: cfg, header: map[string]string{"If-Match": j1}}, 200, &rec)
	if rec.Revision != 2 || a.header.Get("ETag") == j1 {
		t.Fatalf("revision %d, ETag %s", rec.Revision, a.header.Get("ETag"))
	}
	cfg.Entrypoint = "python c.py"
	if a := e.do(req{method: "PUT", path: "/v1/jobs/" + rec.ID, body: cfg, header: map[string]string{"If-Match": j1}}); a.status != 412 {
		t.Fatalf("stale job update: %d %s", a.status, a.body)
	}
}

// TestPaging: a list of five objects read two at a time, following
// continue to the end, gives each object once, in order.
func TestPaging(t *testing.T) {
	e := newEnv(t, dlctest.MemoryOptions{}, Options{})
	e.register(64000)
	var g struct{ ID string }
	e.must(req{method: "POST", path: "/v1/groups", body: groupBody{Name: "g"}}, 201, &g)
	var clusters, jobs []string
	for i := range 5 {
		var cl cluster.Cluster
		e.must(req{method: "POST", path: "/v1/clusters", body: clusterSpec(t, fmt.Sprint("c", i), g.ID)}, 201, &cl)
		clusters = append(clusters, cl.ID)
	}
	e.settle()
	for i := range 5 {
		var rec job.Record
		e.must(req{method: "POST", path: "/v1/jobs", body: onClusterJob(t, fmt.Sprint("j", i), clusters[0])}, 201, &rec)
		jobs = append(jobs, rec.ID)
	}
	for _, c := range []struct {
		path string
		want []string
	}{{"/v1/clusters", clusters}, {"/v1/jobs", jobs}} {
		t.Run(c.path, func(t *testing.T) {
			var got []string
			var sizes []int
			cont := ""
			for range 10 {
				q := url.Values{"limit": {"2"}}
				if cont != "" {
					q.Set("continue", cont)
				}
				var p page[struct{ ID string }]
				e.must(req{method: "GET", path: c.path + "?" + q.Encode()}, 200, &p)
				sizes = append(sizes, len(p.Items))
				for _, it := range p.Items {
					got = append(got, it.ID)
				}
				if cont = p.Continue; cont == "" {
					break
				}
			}
			want := slices.Sorted(slices.Values(c.want))
			if !slices.Equal(got, want) || !slices.Equal(sizes, []int{2, 2, 1}) {
				t.Fatalf("pages of %v: %v, want %v", sizes, got, want)
			}
		})
	}
}

// An Idempotency-Key is the caller's: two users' creates with one key make
// two clusters, each user's retry returns their own.
func TestIdempotencyKeyPerUser(t *testing.T) {
	e := newEnv(t, dlctest.MemoryOptions{}, Options{})
	e.register(64000)
	var g struct{ ID string }
	e.must(req{method: "POST", path: "/v1/groups", body: `{"name":"g"}`}, 201, &g)
	made := map[string]string{}
	for _, user := range []string{"alice", "bob", "alice", "bob"} {
		var cl cluster.Cluster
		e.must(req{method: "POST", path: "/v1/clusters", user: user, body: clusterSpec(t, user+"_c", g.ID),
			header: map[string]string{"Idempotency-Key": "nightly"}}, 201, &cl)
		if cl.Creator != user || cl.Spec.Name != user+"_c" {
			t.Fatalf("%s's create with the key got %s's %s", user, cl.Creator, cl.Spec.Name)
		}
		if id, ok := made[user]; ok && id != cl.ID {
			t.Fatalf("%s's retry made %s, not %s again", user, cl.ID, id)
		}
		made[user] = cl.ID
	}
	if made["alice"] == made["bob"] {
		t.Fatal("two users' keys named one cluster")
	}
}

// If-Match on a DELETE or an action of an object with an ETag: a stale
// tag is 412 and nothing happens; the current one, or "*", lets it go on.
func TestIfMatchOnActions(t *testing.T) {
	e := newEnv(t, dlctest.MemoryOptions{}, Options{})
	e.register(64000)
	var g struct{ ID string }
	e.must(req{method: "POST", path: "/v1/groups", body: `{"name":"g"}`}, 201, &g)
	var cl cluster.Cluster
	e.must(req{method: "POST", path: "/v1/clusters", body: clusterSpec(t, "c", g.ID)}, 201, &cl)
	e.settle()
	stale := map[string]string{"If-Match": `"stale"`}
	e.must(req{method: "POST", path: "/v1/clusters/" + cl.ID + "/start", header: stale}, 412, nil)
	e.must(req{method: "DELETE", path: "/v1/clusters/" + cl.ID, header: stale}, 412, nil)
	if s := e.clusterState(cl.ID); s != cluster.Created {
		t.Fatalf("after refused actions the cluster is %s", s)
	}
	now := e.must(req{method: "GET", path: "/v1/clusters/" + cl.ID}, 200, nil).header.Get("ETag")
	e.must(req{method: "POST", path: "/v1/clusters/" + cl.ID + "/start", header: map[string]string{"If-Match": now}}, 200, nil)
	e.must(req{method: "DELETE", path: "/v1/clusters/cls-nosuch", header: map[string]string{"If-Match": "*"}}, 404, nil)
	e.must(req{method: "DELETE", path: "/v1/clusters/" + cl.ID + "?force=true", header: map[string]string{"If-Match": "*"}}, 202, nil)
}
