package kube_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/dlctest/kubetest"
)

// Labels KubeRay puts on the pods and services of a RayCluster.
const (
	labelCluster  = "ray.io/cluster"
	labelNodeType = "ray.io/node-type"
	labelGroup    = "ray.io/group"
)

// loop is one namespace with KubeRay's RayCluster reconciler and the kubelet
// stand-in working in it.
type loop struct {
	t       *testing.T
	cp      *kubetest.ControlPlane
	ns      string
	kubelet *kubetest.Kubelet
}

func newLoop(t *testing.T) *loop {
	t.Helper()
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	cp.StartKubeRay(t, kubetest.KubeRayOptions{Namespaces: []string{ns}})
	return &loop{t: t, cp: cp, ns: ns, kubelet: cp.StartKubelet(t, ns)}
}

// eventually polls cond every 20 ms for up to 30 s and returns how long it
// took to hold.
func (l *loop) eventually(what string, cond func() (bool, string)) time.Duration {
	l.t.Helper()
	began := time.Now()
	for {
		ok, state := cond()
		if ok {
			return time.Since(began)
		}
		if time.Since(began) > 30*time.Second {
			l.t.Fatalf("after 30s, still waiting for %s: %s", what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *loop) get(name string) *rayv1.RayCluster {
	l.t.Helper()
	var rc rayv1.RayCluster
	if err := l.cp.Client().Get(l.t.Context(), types.NamespacedName{Namespace: l.ns, Name: name}, &rc); err != nil {
		l.t.Fatalf("Get RayCluster %s: %v", name, err)
	}
	return &rc
}

func (l *loop) pods(cluster string) []corev1.Pod {
	l.t.Helper()
	var pods corev1.PodList
	if err := l.cp.Client().List(l.t.Context(), &pods, client.InNamespace(l.ns),
		client.MatchingLabels{labelCluster: cluster}); err != nil {
		l.t.Fatalf("List pods: %v", err)
	}
	return pods.Items
}

// conditions renders a RayCluster's state and conditions for a failure
// message.
func conditions(rc *rayv1.RayCluster) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state %q;", rc.Status.State) //lint:ignore SA1019 KubeRay still sets State; the test reads both
	for _, c := range rc.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s(%s)", c.Type, c.Status, c.Reason)
	}
	return b.String()
}

func isTrue(rc *rayv1.RayCluster, c rayv1.RayClusterConditionType) bool {
	return meta.IsStatusConditionTrue(rc.Status.Conditions, string(c))
}

// ready waits for the cluster to be ready: HeadPodReady and
// RayClusterProvisioned true, state ready.
func (l *loop) ready(name string) time.Duration {
	l.t.Helper()
	return l.eventually(name+" ready", func() (bool, string) {
		rc := l.get(name)
		//lint:ignore SA1019 KubeRay still sets State; the test checks it agrees with the conditions
		return rc.Status.State == rayv1.Ready && isTrue(rc, rayv1.HeadPodReady) &&
			isTrue(rc, rayv1.RayClusterProvisioned), conditions(rc)
	})
}

// wantPods is the number of pods KubeRay should run for rc: one head and
// each group's replicas (clamped to its range) times its hosts.
func wantPods(rc *rayv1.RayCluster) (workers map[string]int) {
	workers = map[string]int{}
	for _, g := range rc.Spec.WorkerGroupSpecs {
		n := ptr.Deref(g.Replicas, ptr.Deref(g.MinReplicas, 0))
		n = max(n, ptr.Deref(g.MinReplicas, 0))
		if g.MaxReplicas != nil {
			n = min(n, *g.MaxReplicas)
		}
		workers[g.GroupName] = int(n * max(g.NumOfHosts, 1))
	}
	return workers
}

// warnings returns the warning Events in the namespace, one line each,
// but KubeRay's own transient ones (kubetest.KubeRaySelfHealing), logged.
func (l *loop) warnings() []string {
	l.t.Helper()
	var events corev1.EventList
	if err := l.cp.Client().List(l.t.Context(), &events, client.InNamespace(l.ns)); err != nil {
		l.t.Fatalf("List events: %v", err)
	}
	var out []string
	for _, e := range events.Items {
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		w := fmt.Sprintf("%s %s/%s: %s: %s", e.Source.Component, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		if kubetest.KubeRaySelfHealing(e.Reason, e.Message) {
			l.t.Logf("KubeRay's own transient warning (it retries): %s", w)
			continue
		}
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

// events returns the reasons of the Events about the object, in order.
func (l *loop) events(name string) []string {
	l.t.Helper()
	var events corev1.EventList
	if err := l.cp.Client().List(l.t.Context(), &events, client.InNamespace(l.ns)); err != nil {
		l.t.Fatalf("List events: %v", err)
	}
	sort.Slice(events.Items, func(i, j int) bool {
		return events.Items[i].CreationTimestamp.Before(&events.Items[j].CreationTimestamp)
	})
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Type+"/"+e.Reason)
		}
	}
	return out
}

// TestKubeRayInTheLoop runs every rendered cluster through KubeRay's
// RayCluster reconciler, with the kubelet stand-in running its pods: the
// head and worker pods and the head service appear with KubeRay's labels,
// the cluster becomes ready, and suspending it removes its pods. KubeRay
// writes no warning Event about any of them.
func TestKubeRayInTheLoop(t *testing.T) {
	kubetest.StartControlPlane(t) // started (or skipped) once, before the subtests
	for _, rc := range renderCases() {
		if rc.cluster == nil {
			continue
		}
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			l := newLoop(t)
			obj := rc.render(t, l.ns).(*rayv1.RayCluster)
			name := obj.Name
			c := l.cp.Client()
			hibernated := ptr.Deref(obj.Spec.Suspend, false)

			began := time.Now()
			if err := c.Create(t.Context(), obj); err != nil {
				t.Fatalf("Create: %v", err)
			}
			if hibernated {
				took := l.eventually("suspended", func() (bool, string) {
					rc := l.get(name)
					return isTrue(rc, rayv1.RayClusterSuspended), conditions(rc)
				})
				if pods := l.pods(name); len(pods) != 0 {
					t.Errorf("a cluster created suspended has %d pods", len(pods))
				}
				t.Logf("timing: created suspended → RayClusterSuspended in %v", took.Round(time.Millisecond))
				l.noWarnings()
				return
			}

			workers := wantPods(obj)
			total := 1
			for _, n := range workers {
				total += n
			}
			podsTook := l.eventually("the cluster's pods", func() (bool, string) {
				n := len(l.pods(name))
				return n == total, fmt.Sprintf("%d pods of %d", n, total)
			})
			readyTook := l.ready(name)
			t.Logf("timing: create → %d pods in %v, → ready in %v (total %v)",
				total, podsTook.Round(time.Millisecond), readyTook.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))

			groups := map[string]int{}
			for _, p := range l.pods(name) {
				if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
					t.Errorf("pod %s: phase %s, podIP %q", p.Name, p.Status.Phase, p.Status.PodIP)
				}
				switch p.Labels[labelNodeType] {
				case string(rayv1.HeadNode):
					groups["head"]++
					if p.Labels[labelGroup] != "headgroup" {
						t.Errorf("head pod %s: %s=%q", p.Name, labelGroup, p.Labels[labelGroup])
					}
				case string(rayv1.WorkerNode):
					groups[p.Labels[labelGroup]]++
				default:
					t.Errorf("pod %s: %s=%q", p.Name, labelNodeType, p.Labels[labelNodeType])
				}
			}
			if groups["head"] != 1 {
				t.Errorf("%d head pods, want 1", groups["head"])
			}
			for g, n := range workers {
				if groups[g] != n {
					t.Errorf("group %s: %d worker pods, want %d", g, groups[g], n)
				}
			}
			var svcs corev1.ServiceList
			if err := c.List(t.Context(), &svcs, client.InNamespace(l.ns),
				client.MatchingLabels{labelCluster: name, labelNodeType: string(rayv1.HeadNode)}); err != nil {
				t.Fatal(err)
			}
			if len(svcs.Items) != 1 {
				t.Errorf("%d head services, want 1", len(svcs.Items))
			}

			// Suspend: KubeRay deletes every pod, then reports it suspended.
			rc := l.get(name)
			rc.Spec.Suspend = ptr.To(true)
			if err := c.Update(t.Context(), rc); err != nil {
				t.Fatalf("Update suspend: %v", err)
			}
			goneTook := l.eventually("no pods", func() (bool, string) {
				n := len(l.pods(name))
				return n == 0, fmt.Sprintf("%d pods", n)
			})
			suspendedTook := l.eventually("suspended", func() (bool, string) {
				rc := l.get(name)
				return isTrue(rc, rayv1.RayClusterSuspended), conditions(rc)
			})
			t.Logf("timing: suspend → pods gone in %v, → RayClusterSuspended in %v",
				goneTook.Round(time.Millisecond), suspendedTook.Round(time.Millisecond))
			l.noWarnings()
		})
	}
}

// noWarnings fails the test with each warning Event in the namespace: a
// warning about a rendered object is a bug in the rendering.
func (l *loop) noWarnings() {
	l.t.Helper()
	for _, w := range l.warnings() {
		l.t.Errorf("warning Event: %s", w)
	}
}

// TestKubeRayReplacesFailedPod fails a running cluster's pods through the
// kubelet stand-in and records what KubeRay does: it deletes a failed pod
// (its restart policy cannot bring it back) and creates a new one, and the
// cluster is ready again.
func TestKubeRayReplacesFailedPod(t *testing.T) {
	kubetest.StartControlPlane(t)
	for _, tc := range []struct {
		node      rayv1.RayNodeType
		reason    string
		wantEvent string // the Normal Event KubeRay writes when it deletes the pod
	}{
		{node: rayv1.HeadNode, reason: "OOMKilled", wantEvent: "Normal/DeletedHeadPod"},
		{node: rayv1.WorkerNode, reason: "Error", wantEvent: "Normal/DeletedWorkerPod"},
	} {
		t.Run(string(tc.node), func(t *testing.T) {
			t.Parallel()
			l := newLoop(t)
			var rc renderCase
			for _, c := range renderCases() {
				if c.name == "cluster-cpu" {
					rc = c
				}
			}
			obj := rc.render(t, l.ns).(*rayv1.RayCluster)
			name := obj.Name
			if err := l.cp.Client().Create(t.Context(), obj); err != nil {
				t.Fatalf("Create: %v", err)
			}
			l.ready(name)
			total := len(l.pods(name))

			var victim corev1.Pod
			for _, p := range l.pods(name) {
				if p.Labels[labelNodeType] == string(tc.node) {
					victim = p
					break
				}
			}
			began := time.Now()
			if err := l.kubelet.Fail(l.ns, victim.Name, tc.reason); err != nil {
				t.Fatalf("Fail: %v", err)
			}
			// What the cluster says while the pod is down: polled until a
			// replacement runs.
			seen := map[string]bool{}
			replaced := l.eventually("a replacement pod", func() (bool, string) {
				rc := l.get(name)
				seen[conditions(rc)] = true
				pods := l.pods(name)
				running, old := 0, false
				for _, p := range pods {
					if p.UID == victim.UID {
						old = true
					} else if p.Status.Phase == corev1.PodRunning && p.Labels[labelNodeType] == string(tc.node) {
						running++
					}
				}
				return !old && len(pods) == total && running > 0, fmt.Sprintf("%d pods, old one there: %v", len(pods), old)
			})
			readyTook := l.ready(name)
			var states []string
			for s := range seen {
				states = append(states, s)
			}
			sort.Strings(states)
			t.Logf("timing: %s pod failed (%s) → replaced in %v, → ready in %v (total %v); states seen meanwhile: %q",
				tc.node, tc.reason, replaced.Round(time.Millisecond), readyTook.Round(time.Millisecond),
				time.Since(began).Round(time.Millisecond), states)
			events := l.events(name)
			t.Logf("events about the RayCluster: %v", events)
			found := false
			for _, e := range events {
				found = found || e == tc.wantEvent
			}
			if !found {
				t.Errorf("no %s Event about %s; got %v", tc.wantEvent, name, events)
			}
			l.noWarnings()
		})
	}
}

// TestTagsSelectATeamsPods: under KubeRay's own reconciler, the pods of a
// cluster carry its tags as labels, so a label selector built from a
// team's tag (kube.TagSelector) finds that team's pods and no other's,
// whatever the tag's value holds (here one a label cannot: "推荐").
func TestTagsSelectATeamsPods(t *testing.T) {
	l := newLoop(t)
	c := l.cp.Client()
	teams := map[string]string{"cls-teamnlp001": "nlp", "cls-teamrec001": "推荐"}
	total := map[string]int{}
	for id, team := range teams {
		cl := running(id, "team-"+id, cpuEnv())
		cl.Spec.Tags = map[string]string{"team": team, "cost-center": "cc-" + id[4:8]}
		obj, err := kube.RenderRayCluster(cl, kube.RenderOptions{Namespace: l.ns})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Create(t.Context(), obj); err != nil {
			t.Fatalf("Create %s: %v", id, err)
		}
		total[obj.Name] = 1
		for _, n := range wantPods(obj) {
			total[obj.Name] += n
		}
	}
	for name, n := range total {
		l.eventually("the pods of "+name, func() (bool, string) {
			got := len(l.pods(name))
			return got == n, fmt.Sprintf("%d pods of %d", got, n)
		})
	}
	for id, team := range teams {
		var pods corev1.PodList
		sel := kube.TagSelector(map[string]string{"team": team})
		if err := c.List(t.Context(), &pods, client.InNamespace(l.ns), client.MatchingLabels(sel)); err != nil {
			t.Fatal(err)
		}
		name := kube.RayClusterName(id)
		if len(pods.Items) != total[name] {
			t.Errorf("team %q (%v): %d pods, want its cluster's %d", team, sel, len(pods.Items), total[name])
		}
		for _, p := range pods.Items {
			if p.Labels[labelCluster] != name {
				t.Errorf("team %q's selector found pod %s of %s", team, p.Name, p.Labels[labelCluster])
			}
		}
	}
	l.noWarnings()
}
