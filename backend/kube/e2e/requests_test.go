package e2e_test

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// counter is an http.RoundTripper that counts the API requests a backend
// makes, by verb and resource: "create computeclusters",
// "patch rayclusters", "update runs/status", "list pods", "watch …".
type counter struct {
	mu       sync.Mutex
	n        map[string]int
	last     time.Time
	inFlight int // requests sent and not yet answered, watches aside
}

// counted is one transport's requests, counted by c: client-go wraps a
// transport of its own for each client it builds (the backend builds some
// after its caches have started), so each has its own next.
type counted struct {
	c    *counter
	next http.RoundTripper
}

func (t counted) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.c.roundTrip(t.next, req)
}

func (c *counter) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	key := verbOf(req)
	// A watch stays open; any other request is in flight until answered:
	// on a loaded machine its answer can come after the change it made has
	// reached the caches through a watch.
	open := !strings.HasPrefix(key, "watch ")
	if open {
		c.mu.Lock()
		c.inFlight++
		c.last = time.Now()
		c.mu.Unlock()
	}
	resp, err := next.RoundTrip(req)
	if err == nil && resp.StatusCode >= 400 {
		key += fmt.Sprintf(" (%d)", resp.StatusCode)
	}
	c.mu.Lock()
	c.n[key]++
	c.last = time.Now()
	if open {
		c.inFlight--
	}
	c.mu.Unlock()
	return resp, err
}

// verbOf names a request as RBAC would: its verb and resource
// (with subresource).
func verbOf(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// api/v1/namespaces/ns/pods[/name[/sub]] or apis/g/v/namespaces/ns/res[/name[/sub]];
	// anything shorter is discovery.
	skip := map[string]int{"api": 2, "apis": 3}[parts[0]]
	if skip == 0 || len(parts) <= skip {
		return "discover " + req.URL.Path
	}
	parts = parts[skip:]
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource, named := "", false
	if len(parts) > 0 {
		resource = parts[0]
	}
	if len(parts) > 1 {
		named = true
	}
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	q, _ := url.ParseQuery(req.URL.RawQuery)
	switch req.Method {
	case http.MethodGet:
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			return "watch " + resource
		case named:
			return "get " + resource
		default:
			return "list " + resource
		}
	case http.MethodPost:
		return "create " + resource
	case http.MethodPut:
		return "update " + resource
	case http.MethodPatch:
		return "patch " + resource
	case http.MethodDelete:
		return "delete " + resource
	}
	return req.Method + " " + resource
}

// take returns the counts since the last take, once no request is in
// flight and none has been made for quiet, and starts counting anew. A
// client that never falls quiet for 2 minutes (a step that writes
// whenever it runs and is run again by its own write) fails t with what
// it sent.
func (c *counter) take(t *testing.T, quiet time.Duration) map[string]int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c.mu.Lock()
		idle := time.Since(c.last)
		if c.inFlight > 0 {
			idle = 0
		}
		if idle >= quiet {
			n := c.n
			c.n = map[string]int{}
			c.mu.Unlock()
			return n
		}
		if time.Now().After(deadline) {
			writes, total, _ := writesAndLists(c.n)
			c.mu.Unlock()
			t.Fatalf("the client was never quiet for %s in 2 minutes: %d writes %v", quiet, total, writes)
		}
		c.mu.Unlock()
		time.Sleep(quiet - idle) // waits for the quiet it measures, not for something to happen
	}
}

// writes returns the write requests, without Events (best effort, and not
// the operation's), and the list requests, each as "verb resource ×n".
func writesAndLists(n map[string]int) (writes []string, total int, lists []string) {
	for k, v := range n {
		verb, res, _ := strings.Cut(k, " ")
		switch {
		case res == "events" || verb == "discover":
		case verb == "list":
			lists = append(lists, fmt.Sprintf("%s ×%d", k, v))
		case verb == "delete" && strings.HasSuffix(res, " (404)"):
			// A delete of what is already gone changed nothing: on a loaded
			// machine the cache can lag KubeRay's own delete (of an
			// on-demand run's RayCluster once its RayJob ends), so the
			// platform's delete of it finds nothing. Shown, not counted.
			writes = append(writes, fmt.Sprintf("%s ×%d (not counted)", k, v))
		case verb != "get" && verb != "watch":
			writes = append(writes, fmt.Sprintf("%s ×%d", k, v))
			total += v
		}
	}
	sort.Strings(writes)
	sort.Strings(lists)
	return writes, total, lists
}

// TestRequestsPerOperation counts the API requests of one client's backend
// for each operation, from the call until the platform has settled, with
// the caches synced: each operation makes at most the writes below (a
// refused write, a 409 say, counts too) and no list call. Each is a step
// the platform must record or a Ray object it must change, and none is
// written twice: a state change is one write of the status subresource
// (the store keeps its labels there), an unchanged apply or a second
// delete is skipped from the cache, Events aside (best effort, and not the
// operation's):
//
//   - create (4): the name claim (a StoreEntry: names are unique), the
//     ComputeCluster (its initial status in the create), the suspended
//     RayCluster (apply), the status to created;
//   - start (4): the status to starting, the reservation on the resource
//     group, the RayCluster's spec.suspend flipped (apply), the status to
//     running;
//   - a run on the cluster, or on its group (5): the run's create, its
//     placement, the record that Ray accepted its job (skipped when Ray
//     already runs it when first asked after the submit), running,
//     succeeded (Ray's part done in the same write) — the submit goes to
//     the Jobs API, not to the API server;
//   - hibernate (5): the mark (the fence against a run placed while the
//     hibernate looks for active runs in the store: one list of the Runs,
//     the cache showing none, the only list allowed after the sync), the
//     status to hibernating, the apply, the status to hibernated, the
//     reservation released;
//   - delete (5): the mark and the look (as above), the status to
//     deleting, the RayCluster's delete, the
//     ComputeCluster's and the name claim's deletes (a hibernated cluster
//     holds no reservation);
//   - an on-demand run (15): the run's create, its admission (the
//     reservation), the on-demand cluster's create, the run placed, the
//     RayJob (apply), the cluster running, Ray's acceptance of the job, the
//     run running, succeeded (its log tail kept in the same write), the
//     cluster deleting, the run's Ray part done, the RayJob's delete and
//     its RayCluster's (KubeRay keeps that cluster a minute after the job,
//     ttlSecondsAfterFinished, so that the platform reads the job's logs
//     from its head first: it used to delete it at once), the reservation
//     released, the cluster's delete.
//
// The backend runs as the user the shipped RBAC makes of it (config/rbac
// bound in its namespace), in a namespace held to what config/ ships
// besides (the admission policies, Pod Security restricted on the pods
// KubeRay makes): that is all it needs, and the same user's backend on
// another namespace does not start.
func TestRequestsPerOperation(t *testing.T) {
	w := getWorld(t)
	ns := w.cp.NewNamespace(t)
	cfg := w.cp.BindRBAC(t, ns, filepath.Join("..", "..", "..", "config", "rbac"))
	w.cp.BindAdmission(t, ns, filepath.Join("..", "..", "..", "config"))
	elsewhere := rest.CopyConfig(cfg)
	cnt := &counter{n: map[string]int{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counted{cnt, rt} })
	be, err := kube.New(t.Context(), cfg, kube.Options{Namespace: ns, Dashboard: w.loop.Dashboard, PollInterval: 50 * time.Millisecond,
		Render: kube.RenderOptions{WorkingDir: w.presign}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.Close)
	// Alone, and not sharing the work: a renewal of its membership (a
	// StoreEntry write every 5 s) is no operation's.
	c := newClient(t, be, dlc.WithWorkSharing(0))
	ctx := dlc.WithUser(t.Context(), "counting")
	if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: "rg", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	grp, err := c.Groups().Create(ctx, "counted")
	if err != nil {
		t.Fatal(err)
	}
	const quiet = 700 * time.Millisecond
	cnt.take(t, quiet)

	clusterState := func(id string, want cluster.State) {
		t.Helper()
		waitFor(t, "cluster "+string(want), func() (bool, string) {
			cl, err := c.Clusters().Get(ctx, id)
			if err != nil {
				return false, err.Error()
			}
			return cl.State == want, string(cl.State)
		})
	}
	runEnds := func(id string) {
		t.Helper()
		waitFor(t, "run "+id+" succeeded", func() (bool, string) {
			r, err := c.Runs().Get(ctx, id)
			if err != nil {
				return false, err.Error()
			}
			if r.State.Terminal() && r.State != job.Succeeded {
				t.Fatalf("run %s: %s %s", id, r.State, r.Message)
			}
			return r.State == job.Succeeded, string(r.State)
		})
	}
	// runOnce saves jc, starts counting and runs it once to success.
	runOnce := func(jc *job.Config) {
		t.Helper()
		rec, err := c.Jobs().Create(ctx, jc, dlc.SaveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cnt.take(t, quiet)
		r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		runEnds(r.ID)
	}
	var figures []string
	check := func(op string, most int, allowed ...string) {
		t.Helper()
		writes, total, lists := writesAndLists(cnt.take(t, quiet))
		figures = append(figures, fmt.Sprintf("%s: %d writes %v", op, total, writes))
		if lists = slices.DeleteFunc(lists, func(l string) bool { return slices.Contains(allowed, l) }); len(lists) > 0 {
			t.Errorf("%s listed after the caches synced: %v", op, lists)
		}
		if total > most {
			t.Errorf("%s: %d writes, want at most %d: %v", op, total, most, writes)
			// What wrote: the event logs of the runs and clusters.
			runs, _ := c.Runs().List(ctx, dlc.RunListOptions{})
			for _, r := range runs {
				t.Logf("run %s %s: %+v", r.ID, r.State, r.Events)
			}
			clusters, _ := c.Clusters().List(ctx)
			for _, cl := range clusters {
				t.Logf("cluster %s %s: %+v", cl.ID, cl.State, cl.Events)
			}
		}
	}

	spec, err := dlc.NewCluster("counted").Groups(grp.ID).Resources("pkg-1", "rg").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 3).Build()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := c.Clusters().Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	clusterState(cl.ID, cluster.Created)
	check("create a cluster", 4)

	if _, err := c.Clusters().Start(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	clusterState(cl.ID, cluster.Running)
	// 4 for the start; 3 more as the platform gives Ray's autoscaler a
	// worker of room above the group's minimum (the resource group, the
	// cluster, the RayCluster's maximum). Metering (StoreEntries): 1 to
	// open the cluster's interval, then 2 (the closed record, the meter's
	// move) for each change of the running pods it sees: the workers
	// coming up after the head, the worker the autoscaler adds.
	const metered = 2
	check("start it", 7+1+2*metered)

	for _, tc := range []struct{ name, clusterID, groupID string }{
		{"a run on the cluster", cl.ID, ""},
		{"a run on its group", "", grp.ID},
	} {
		b := dlc.NewJob(tc.name).COSPackage("cos://jobs-1250000000/wc.zip").Entrypoint("python main.py")
		if tc.clusterID != "" {
			b.OnCluster(tc.clusterID)
		} else {
			b.OnGroup(tc.groupID)
		}
		jc, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		runOnce(jc)
		check(tc.name, 5)
	}

	if _, err := c.Clusters().Hibernate(ctx, cl.ID, dlc.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clusterState(cl.ID, cluster.Hibernated)
	check("hibernate it", 5+2*3, "list runs ×1") // metering: each of the 3 pods may be seen go apart

	if err := c.Clusters().Delete(ctx, cl.ID, dlc.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cluster gone", func() (bool, string) {
		_, err := c.Clusters().Get(ctx, cl.ID)
		return err != nil, fmt.Sprint(err)
	})
	check("delete it", 5+1, "list runs ×1") // metering: the idle meter dropped

	od, err := dlc.NewJob("counted-od").OnDemand("pkg-1", "rg").Priority(5).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
	if err != nil {
		t.Fatal(err)
	}
	runOnce(od)
	waitFor(t, "the on-demand cluster gone", func() (bool, string) {
		cls, err := c.Clusters().List(ctx)
		return err == nil && len(cls) == 0, fmt.Sprint(len(cls), err)
	})
	check("an on-demand run", 15+1+2*3+1) // metering: open, the worker up after the head, 2 pods going, drop

	// A config scheduled a year ahead is saved once, and then nothing: no
	// tick is due (a schedule's step once wrote the config whenever it
	// ran, and ran again on its own write).
	yearly, err := dlc.NewJob("counted-yearly").OnDemand("pkg-1", "rg").Priority(5).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Schedule("0 0 1 1 *").Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Jobs().Create(ctx, yearly, dlc.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	check("save a scheduled config", 1)
	for _, f := range figures {
		t.Log("requests: " + f)
	}

	other := w.cp.NewNamespace(t)
	if b, err := kube.New(t.Context(), elsewhere, kube.Options{Namespace: other, Store: kube.StoreOptions{SyncTimeout: time.Second}}); err == nil {
		b.Close()
		t.Errorf("the backend's user started a backend on namespace %s, outside its Role", other)
	} else if !apierrors.IsForbidden(err) {
		t.Errorf("the backend's user on another namespace: %v, want the API server's forbidden", err)
	} else {
		t.Logf("the backend's user on another namespace: %v", err)
	}
}

func TestWritesAndLists(t *testing.T) {
	writes, total, lists := writesAndLists(map[string]int{
		"create runs": 1, "update runs/status": 3, "delete rayclusters (404)": 1, "patch rayjobs (409)": 1,
		"get runs": 5, "watch runs": 1, "list pods": 1, "create events": 2,
	})
	if total != 5 {
		t.Errorf("total %d, want 5 (a 404 delete is not counted, a refused patch is): %v", total, writes)
	}
	if len(writes) != 4 || len(lists) != 1 {
		t.Errorf("writes %v, lists %v", writes, lists)
	}
}
