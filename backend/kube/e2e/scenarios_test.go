package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/storage"
)

// scene is one scenario's platform: a namespace of its own, a client on
// the kube backend there, a resource group and a cluster group.
type scene struct {
	t   *testing.T
	w   *world
	ns  string
	o   kube.Options
	be  *kube.Backend
	c   *dlc.Client
	ctx context.Context
	grp *group.Group
}

func newScene(t *testing.T, o kube.Options) *scene {
	t.Helper()
	w := getWorld(t)
	o.Namespace = w.cp.NewNamespace(t)
	s := &scene{t: t, w: w, ns: o.Namespace, o: o, ctx: dlc.WithUser(t.Context(), "scenario")}
	s.be = w.backend(t, o)
	s.c = newClient(t, s.be)
	if _, err := s.c.ResourceGroups().Register(s.ctx, quota.Group{ID: "rg", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	grp, err := s.c.Groups().Create(s.ctx, "场景组")
	if err != nil {
		t.Fatal(err)
	}
	s.grp = grp
	return s
}

// cluster creates a cluster of the scene's group (a head and two
// workers) and, if start, starts it and waits until it runs.
func (s *scene) cluster(name string, start bool) *cluster.Cluster {
	s.t.Helper()
	spec, err := dlc.NewCluster(name).Groups(s.grp.ID).Resources("pkg-1", "rg").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 2, 2).Build()
	if err != nil {
		s.t.Fatal(err)
	}
	if !start {
		cl, err := s.c.Clusters().Create(s.ctx, spec)
		if err != nil {
			s.t.Fatal(err)
		}
		s.clusterState(cl.ID, cluster.Created)
		return cl
	}
	return s.started(spec)
}

// started creates a cluster of spec, starts it and waits until it runs.
func (s *scene) started(spec *cluster.Spec) *cluster.Cluster {
	s.t.Helper()
	cl, err := s.c.Clusters().Create(s.ctx, spec)
	if err != nil {
		s.t.Fatal(err)
	}
	s.clusterState(cl.ID, cluster.Created)
	if _, err := s.c.Clusters().Start(s.ctx, cl.ID); err != nil {
		s.t.Fatal(err)
	}
	s.clusterState(cl.ID, cluster.Running)
	return cl
}

func (s *scene) clusterState(id string, want cluster.State) *cluster.Cluster {
	s.t.Helper()
	var cl *cluster.Cluster
	waitFor(s.t, "cluster "+id+" "+string(want), func() (bool, string) {
		var err error
		if cl, err = s.c.Clusters().Get(s.ctx, id); err != nil {
			return false, err.Error()
		}
		return cl.State == want, string(cl.State) + " " + cl.Reason
	})
	return cl
}

// run saves b and runs it once, returning the run as it was created.
func (s *scene) run(b *job.Builder) *job.Run {
	s.t.Helper()
	cfg, err := b.Build()
	if err != nil {
		s.t.Fatal(err)
	}
	_, r, err := job.Submit(s.ctx, s.c, cfg, "")
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

// ended waits until run id ends, and returns it.
func (s *scene) ended(c *dlc.Client, id string) *job.Run {
	s.t.Helper()
	var r *job.Run
	waitFor(s.t, "run "+id+" ended", func() (bool, string) {
		var err error
		if r, err = c.Runs().Get(s.ctx, id); err != nil {
			return false, err.Error()
		}
		return r.State.Terminal(), string(r.State) + " " + string(r.WaitReason)
	})
	return r
}

// reserved is what the resource group reserves now.
func (s *scene) reserved() quota.Resources {
	s.t.Helper()
	u, err := s.c.ResourceGroups().Get(s.ctx, "rg")
	if err != nil {
		s.t.Fatal(err)
	}
	return u.Reserved
}

// rayClusters lists the RayClusters of cluster id, as the operator sees them.
func (s *scene) rayClusters(id string) []rayv1.RayCluster {
	s.t.Helper()
	return s.rayClustersIn(s.ns, id)
}

// noWarnings fails the test if any Warning event is about a RayCluster or
// RayJob of the scene: what the operator refuses is a bug in our
// rendering.
func (s *scene) noWarnings() {
	s.t.Helper()
	var evs corev1.EventList
	if err := s.w.cp.Client().List(context.WithoutCancel(s.ctx), &evs, client.InNamespace(s.ns)); err != nil {
		s.t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Type != corev1.EventTypeWarning || (e.InvolvedObject.Kind != "RayCluster" && e.InvolvedObject.Kind != "RayJob") {
			continue
		}
		if kubetest.KubeRaySelfHealing(e.Reason, e.Message) {
			s.t.Logf("KubeRay's own transient warning about %s %s (it retries): %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			continue
		}
		s.t.Errorf("warning event about %s %s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
}

func timed(t *testing.T, name string, f func(t *testing.T)) {
	t.Run(name, func(t *testing.T) {
		start := time.Now()
		f(t)
		t.Logf("timing: scenario %q took %v", name, time.Since(start).Round(time.Millisecond))
	})
}

// The scenarios of Ray in the loop, through the SDK's public API on the
// kube backend, with KubeRay's reconcilers, the kubelet stand-in and a
// Ray head stand-in per cluster.
func TestScenarios(t *testing.T) {
	timed(t, "cluster up, hibernate, start again", func(t *testing.T) {
		s := newScene(t, kube.Options{})
		cl := s.cluster("场景_一", true)
		// Running is KubeRay's word (provisioned, head ready); the pods are
		// read from the backend's own pod informer, which may be a moment
		// behind: wait for it to show them running.
		var d *cluster.Details
		waitFor(t, "the pods running in the backend's view", func() (bool, string) {
			var err error
			d, err = s.c.Clusters().Details(s.ctx, cl.ID)
			if err != nil {
				return false, err.Error()
			}
			running := 0
			for _, p := range d.Pods {
				if p.Status == "Running" && p.IP != "" {
					running++
				}
			}
			return running == len(d.Pods) && len(d.Pods) == 3, fmt.Sprint(running, " of ", len(d.Pods), " pods running")
		})
		roles := map[string]int{}
		for _, p := range d.Pods {
			roles[p.Role]++
			if p.IP == "" || p.Status != "Running" || p.Requests.MilliCPU != 4000 || p.Limits != p.Requests {
				t.Errorf("pod %+v", p)
			}
		}
		if roles["head"] != 1 || roles["worker"] != 2 || !strings.HasPrefix(d.Dashboard, "http://127.0.0.1:") {
			t.Errorf("pods by role %v, dashboard %q", roles, d.Dashboard)
		}
		if d.Resources.MilliCPU != 12000 || s.reserved().MilliCPU != 12000 {
			t.Errorf("reserving %s (group: %s), want 12 cores", d.Resources, s.reserved())
		}

		if _, err := s.c.Clusters().Hibernate(s.ctx, cl.ID, dlc.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		s.clusterState(cl.ID, cluster.Hibernated)
		// The reservation is released once Ray has let the compute go.
		waitFor(t, "the pods gone and the quota released", func() (bool, string) {
			d, err := s.c.Clusters().Details(s.ctx, cl.ID)
			return err == nil && len(d.Pods) == 0 && d.Dashboard == "" && s.reserved().IsZero(),
				fmt.Sprint(len(d.Pods), " pods, reserving ", s.reserved(), err)
		})

		if _, err := s.c.Clusters().Start(s.ctx, cl.ID); err != nil {
			t.Fatal(err)
		}
		s.clusterState(cl.ID, cluster.Running)
		waitFor(t, "started again: 3 pods in the backend's view", func() (bool, string) {
			d, err := s.c.Clusters().Details(s.ctx, cl.ID)
			if err != nil {
				return false, err.Error()
			}
			return len(d.Pods) == 3, fmt.Sprint(len(d.Pods), " pods")
		})
		s.noWarnings()
	})

	timed(t, "an uploaded package on a cluster and a group", func(t *testing.T) {
		// Uploaded to the world's COS server, which the backend presigns
		// https URLs of (kube.COSWorkingDir) and the heads fetch from.
		s := newScene(t, kube.Options{})
		srv := s.w.cos
		cos, err := storage.NewCOSClient(storage.COSOptions{Region: cosfake.DefaultRegion, Endpoint: srv.URL, HTTPClient: srv.Client(),
			Credentials: storage.Credentials{SecretID: "AKIDscenario", SecretKey: "scenario-secret"}})
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "job.zip")
		writeZIP(t, file, map[string]string{
			"main.py": "import os\nprint('first line from', os.environ.get('STAGE'))\nprint('second line')\n",
			"fail.py": "import sys\nprint('about to fail', file=sys.stderr)\nsys.exit(1)\n",
		})
		up, err := cos.UploadPackage(t.Context(), file, storage.UploadOptions{Bucket: cosfake.DefaultBucket,
			Inspect: storage.InspectOptions{Entrypoint: "python main.py"}})
		if err != nil {
			t.Fatal(err)
		}
		gets := srv.Count(cosfake.OpGetObject)
		cl := s.cluster("场景_二", true)
		for _, on := range []string{"cluster", "group"} {
			b := dlc.NewJob("pkg-"+on).COSPackage(up.URI()).Entrypoint("python main.py").Env("STAGE", on)
			if on == "cluster" {
				b.OnCluster(cl.ID)
			} else {
				b.OnGroup(s.grp.ID)
			}
			r := s.ended(s.c, s.run(b).ID)
			if r.State != job.Succeeded || r.ClusterID != cl.ID {
				t.Errorf("on the %s: %s on %s: %s", on, r.State, r.ClusterID, r.Message)
			}
			lines, err := s.c.Runs().Logs(s.ctx, r.ID)
			if err != nil || !slices.Contains(lines, "first line from "+on) || !slices.Contains(lines, "second line") {
				t.Errorf("on the %s: logs %q, %v", on, lines, err)
			}
			t.Logf("on the %s: %s, logs %q", on, r.State, lines)
		}
		r := s.ended(s.c, s.run(dlc.NewJob("pkg-fails").OnCluster(cl.ID).COSPackage(up.URI()).Entrypoint("python fail.py")).ID)
		if r.State != job.Failed || !strings.Contains(r.Message, "about to fail") {
			t.Errorf("a script that exits 1: %s: %q", r.State, r.Message)
		}
		t.Logf("a script that exits 1: %s: %q", r.State, r.Message)
		// Ray keeps a package per node by its URL without the query
		// (packaging.py, parse_uri): the three runs on the one head fetch
		// it once.
		if n := srv.Count(cosfake.OpGetObject) - gets; n < 1 {
			t.Errorf("the head fetched the package %d times from the S3-compatible server, want it fetched", n)
		}
		s.noWarnings()
	})

	timed(t, "an on-demand run", func(t *testing.T) {
		s := newScene(t, kube.Options{})
		r := s.run(dlc.NewJob("od").OnDemand("pkg-1", "rg").Priority(5).Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
			COSPackage("cos://jobs-1250000000/ticks.zip").Entrypoint("python ticks.py"))
		// Its logs followed as it runs: the first tick comes while the run
		// is live, every tick once.
		follow, err := s.c.Runs().Follow(s.ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		followed := make(chan []string, 1)
		liveAtFirst := make(chan bool, 1)
		go func() {
			var got []string
			for l := range follow {
				if len(got) == 0 {
					cur, err := s.c.Runs().Get(s.ctx, r.ID)
					liveAtFirst <- err == nil && cur.State.Live()
				}
				got = append(got, l)
			}
			followed <- got
		}()
		var clusterID string
		waitFor(t, "the run running on its RayJob's cluster", func() (bool, string) {
			cur, err := s.c.Runs().Get(s.ctx, r.ID)
			if err != nil || cur.State != job.Running {
				return false, fmt.Sprint(cur.State, err)
			}
			clusterID = cur.ClusterID
			return true, ""
		})
		var jobs rayv1.RayJobList
		if err := s.w.cp.Client().List(s.ctx, &jobs, client.InNamespace(s.ns)); err != nil || len(jobs.Items) != 1 ||
			!jobs.Items[0].Spec.ShutdownAfterJobFinishes || len(s.rayClusters(clusterID)) != 1 {
			t.Errorf("while it runs: %d RayJobs (%v), %d RayClusters of %s", len(jobs.Items), err, len(s.rayClusters(clusterID)), clusterID)
		}
		if s.reserved().IsZero() {
			t.Error("while it runs, the group reserves nothing")
		}
		if done := s.ended(s.c, r.ID); done.State != job.Succeeded {
			t.Fatalf("%s: %s", done.State, done.Message)
		}
		waitFor(t, "the cluster released", func() (bool, string) {
			_, err := s.c.Clusters().Get(s.ctx, clusterID)
			var left rayv1.RayJobList
			lerr := s.w.cp.Client().List(s.ctx, &left, client.InNamespace(s.ns))
			return err != nil && lerr == nil && len(left.Items) == 0 && len(s.rayClusters(clusterID)) == 0 && s.reserved().IsZero(),
				fmt.Sprint(err, len(left.Items), s.reserved())
		})
		var ticks []string
		for i := range 10 {
			ticks = append(ticks, fmt.Sprint("tick ", i))
		}
		got := <-followed
		if !<-liveAtFirst || !containsInOrder(got, ticks) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Errorf("followed: %q", got)
		}
		// Its cluster and head are gone: the logs are the tail kept when it ended.
		lines, err := s.c.Runs().Logs(s.ctx, r.ID)
		if err != nil || !containsInOrder(lines, ticks) {
			t.Errorf("logs once its cluster is deleted: %q, %v", lines, err)
		}
		s.noWarnings()
	})

	timed(t, "a failing head, an abnormal group, a healthy member", func(t *testing.T) {
		s := newScene(t, kube.Options{})
		sick := s.cluster("场景_病", true)
		undo := s.w.loop.Kubelet.FailMatching(s.ns, labels.SelectorFromSet(labels.Set{
			kube.KeyClusterID: sick.ID, "ray.io/node-type": "head"}), "OOMKilled")
		defer undo()
		if cl := s.clusterState(sick.ID, cluster.Abnormal); cl.Reason == "" {
			t.Error("abnormal with no reason")
		} else {
			t.Logf("the sick member: %s: %s", cl.State, cl.Reason)
		}
		r := s.run(dlc.NewJob("waits").OnGroup(s.grp.ID).COSPackage("cos://jobs-1250000000/wc.zip").Entrypoint("python main.py"))
		waitFor(t, "the run waiting for a healthy member", func() (bool, string) {
			cur, err := s.c.Runs().Get(s.ctx, r.ID)
			if err == nil && cur.WaitReason == job.AllMembersAbnormal {
				t.Logf("the run: %s (%s) %s", cur.State, cur.WaitReason, cur.Message)
				return true, ""
			}
			return false, fmt.Sprint(cur.State, cur.WaitReason, err)
		})
		healthy := s.cluster("场景_好", true)
		if done := s.ended(s.c, r.ID); done.State != job.Succeeded || done.ClusterID != healthy.ID {
			t.Errorf("with a healthy member: %s on %s: %s", done.State, done.ClusterID, done.Message)
		}
		if cl, err := s.c.Clusters().Get(s.ctx, sick.ID); err != nil || cl.State != cluster.Abnormal {
			t.Errorf("the sick member: %v %v", cl.State, err)
		}
	})

	timed(t, "a client replaced mid-run", func(t *testing.T) {
		s := newScene(t, kube.Options{})
		cl := s.cluster("场景_换", true)
		r := s.run(dlc.NewJob("survives").OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/slow.zip").Entrypoint("python slow.py"))
		waitFor(t, "the run running", func() (bool, string) {
			cur, err := s.c.Runs().Get(s.ctx, r.ID)
			return err == nil && cur.State == job.Running, fmt.Sprint(cur.State, err)
		})
		// The process goes: its client and backend stop.
		if err := s.c.Close(); err != nil {
			t.Fatal(err)
		}
		s.be.Close()
		next := newClient(t, s.w.backend(t, kube.Options{Namespace: s.ns}))
		done := s.ended(next, r.ID)
		if done.State != job.Succeeded {
			t.Fatalf("%s: %s", done.State, done.Message)
		}
		ended := 0
		for _, e := range done.Events {
			if e.Action == string(job.Succeeded) {
				ended++
			}
		}
		rcs := s.rayClusters(cl.ID)
		if len(rcs) != 1 {
			t.Fatalf("%d RayClusters", len(rcs))
		}
		head := s.w.loop.Head(&rcs[0])
		if ended != 1 || head == nil || !slices.Equal(head.Jobs(), []string{r.ID}) {
			t.Errorf("recorded %d times as succeeded; the head ran %v (%d submits)", ended, head.Jobs(), head.Submits(r.ID))
		}
		t.Logf("recorded %d times as succeeded; the head ran %v (%d submits)", ended, head.Jobs(), head.Submits(r.ID))
		runs, err := next.Runs().List(s.ctx, dlc.RunListOptions{})
		if err != nil || len(runs) != 1 {
			t.Errorf("runs after the replacement: %d, %v", len(runs), err)
		}
	})
}

func writeZIP(t *testing.T, path string, files map[string]string) {
	t.Helper()
	if err := os.WriteFile(path, zipOf(files), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSelfHealing(t *testing.T) {
	for _, tc := range []struct {
		reason, message string
		want            bool
	}{
		{"FailedToCreateService", `Failed to create head service "ns/rc-head-svc": services "rc-head-svc" already exists`, true},
		{"FailedToCreateHeadPod", `Failed to create head Pod ns/rc-head-x, pods "rc-head-x" already exists`, true},
		{"FailedToUpdateRayCluster", `Operation cannot be fulfilled on rayclusters.ray.io "rc": the object has been modified; please apply your changes to the latest version and try again`, true},
		{"FailedToCreateHeadPod", `pods "rc-head-x" is forbidden: violates PodSecurity "restricted:latest"`, false},
		{"InvalidRayClusterSpec", `The RayCluster spec is invalid: headGroupSpec should have at least one container`, false},
		{"FailedToCreateService", `Service "x" is invalid: spec.ports: Required value`, false},
	} {
		if got := kubetest.KubeRaySelfHealing(tc.reason, tc.message); got != tc.want {
			t.Errorf("kubetest.KubeRaySelfHealing(%q, %q) = %v, want %v", tc.reason, tc.message, got, tc.want)
		}
	}
}

// containsInOrder reports whether want are lines of got, in that order.
func containsInOrder(got, want []string) bool {
	i := 0
	for _, l := range got {
		if i < len(want) && l == want[i] {
			i++
		}
	}
	return i == len(want)
}
