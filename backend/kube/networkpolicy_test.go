package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// podLabelsOf returns the labels of every pod template a RayCluster or a
// RayJob renders (head and worker groups).
func podLabelsOf(heads corev1.PodTemplateSpec, workers []corev1.PodTemplateSpec) []map[string]string {
	out := []map[string]string{heads.Labels}
	for _, w := range workers {
		out = append(out, w.Labels)
	}
	return out
}

// A resource group's NetworkPolicy selects the Ray pods of its clusters
// and of its on-demand runs and admits connections from them and from the
// peers given, not from another resource group's pods. Envtest runs no
// network plugin, so what is tested here is the selectors the API server
// would hand one (a plugin that enforces NetworkPolicy does the rest).
func TestNetworkPolicySelectors(t *testing.T) {
	pods := map[string][]map[string]string{}
	for _, rg := range []string{"rg-a", "rg-b"} {
		cl := running("cls-"+rg+"00001", "集群", cpuEnv())
		cl.Spec.ResourceGroup, cl.Live.ResourceGroup = rg, rg
		rc, err := kube.RenderRayCluster(cl, kube.RenderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var ws []corev1.PodTemplateSpec
		for _, w := range rc.Spec.WorkerGroupSpecs {
			ws = append(ws, w.Template)
		}
		pods[rg] = append(pods[rg], podLabelsOf(rc.Spec.HeadGroupSpec.Template, ws)...)
		r := onDemandRun()
		r.Config.OnDemand.ResourceGroup = rg
		rj, err := kube.RenderRayJob(r, jobOpts())
		if err != nil {
			t.Fatal(err)
		}
		ws = nil
		for _, w := range rj.Spec.RayClusterSpec.WorkerGroupSpecs {
			ws = append(ws, w.Template)
		}
		pods[rg] = append(pods[rg], podLabelsOf(rj.Spec.RayClusterSpec.HeadGroupSpec.Template, ws)...)
	}
	operator := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "ray-system"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "kuberay-operator"}}}
	np, err := kube.RenderNetworkPolicy("rg-a", "dlc-system", kube.NetworkPolicyOptions{From: []networkingv1.NetworkPolicyPeer{operator}})
	if err != nil {
		t.Fatal(err)
	}
	if np.Name != "dlc-rg-rg-a" || np.Namespace != "dlc-system" || len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Fatalf("policy %s/%s types %v", np.Namespace, np.Name, np.Spec.PolicyTypes)
	}
	selects := func(sel *metav1.LabelSelector, l map[string]string) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		return s.Matches(labels.Set(l))
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 2 {
		t.Fatalf("ingress %+v", np.Spec.Ingress)
	}
	own := np.Spec.Ingress[0].From[0]
	if own.NamespaceSelector != nil || own.IPBlock != nil {
		t.Fatalf("the own peer reaches past the namespace: %+v", own)
	}
	for rg, ls := range pods {
		for _, l := range ls {
			if got, want := selects(&np.Spec.PodSelector, l), rg == "rg-a"; got != want {
				t.Errorf("a pod of %s (%v): selected by rg-a's policy %v, want %v", rg, l, got, want)
			}
			if got, want := selects(own.PodSelector, l), rg == "rg-a"; got != want {
				t.Errorf("a pod of %s (%v): admitted by rg-a's policy %v, want %v", rg, l, got, want)
			}
		}
	}
	if np.Spec.Ingress[0].From[1].PodSelector.MatchLabels["app.kubernetes.io/name"] != "kuberay-operator" {
		t.Errorf("the peer given: %+v", np.Spec.Ingress[0].From[1])
	}
	if _, err := kube.RenderNetworkPolicy("RG_A", "dlc-system", kube.NetworkPolicyOptions{}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("a bad resource group: %v", err)
	}
}

// With Options.NetworkPolicy the backend applies a resource group's
// NetworkPolicy before it asks for its first Ray pods, as the backend's
// own RBAC user (its Role grants create and patch).
func TestNetworkPolicyApplied(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	cfg := cp.BindRBAC(t, ns, rbacDir)
	be, err := kube.New(t.Context(), cfg, kube.Options{Namespace: ns, NetworkPolicy: &kube.NetworkPolicyOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	c, err := dlc.New(dlc.WithBackend(be))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := dlc.WithUser(t.Context(), "alice")
	if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-net", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	g, err := c.Groups().Create(ctx, "net")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := dlc.NewCluster("网络").Groups(g.ID).Resources("pkg-1", "rg-net").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := c.Clusters().Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	// Created needs KubeRay in the loop; the policy is applied before
	// the RayCluster, whatever comes of it.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var np networkingv1.NetworkPolicy
	key := types.NamespacedName{Namespace: ns, Name: kube.NetworkPolicyName("rg-net")}
	for {
		err := cp.Client().Get(wctx, key, &np)
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			evs, _ := c.Clusters().Events(ctx, cl.ID)
			t.Fatalf("the resource group's NetworkPolicy: %v (the cluster's events: %+v)", err, evs)
		}
		select {
		case <-wctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if np.Spec.PodSelector.MatchLabels[kube.KeyResourceGroup] != "rg-net" {
		t.Errorf("selector %+v", np.Spec.PodSelector)
	}
}

// With RenderOptions.RedisFor each resource group's high-availability
// heads keep their GCS state in their own Redis (or as their own ACL
// user), clusters and on-demand runs alike; a group with none does not
// render, saying why.
func TestRedisPerResourceGroup(t *testing.T) {
	o := jobOpts()
	o.RedisFor = func(rg string) (*kube.Redis, error) {
		if rg == "rg-none" {
			return nil, nil
		}
		return &kube.Redis{Address: "redis-" + rg + ".dlc-system.svc:6379",
			Username: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "dlc-redis-" + rg}, Key: "user"},
			Password: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "dlc-redis-" + rg}, Key: "password"}}, nil
	}
	for _, rg := range []string{"rg-a", "rg-b"} {
		env := cpuEnv()
		env.Head.HighAvailability = true
		cl := running("cls-"+rg+"00001", "高可用", env)
		cl.Spec.ResourceGroup, cl.Live.ResourceGroup = rg, rg
		rc, err := kube.RenderRayCluster(cl, o)
		if err != nil {
			t.Fatal(err)
		}
		ft := rc.Spec.GcsFaultToleranceOptions
		if ft == nil || ft.RedisAddress != "redis-"+rg+".dlc-system.svc:6379" ||
			ft.RedisUsername.ValueFrom.SecretKeyRef.Name != "dlc-redis-"+rg || ft.RedisPassword.ValueFrom.SecretKeyRef.Name != "dlc-redis-"+rg {
			t.Errorf("%s's cluster: %+v", rg, ft)
		}
		r := onDemandRun()
		r.Config.OnDemand.ResourceGroup = rg
		r.Config.OnDemand.Environment.Head.HighAvailability = true
		rj, err := kube.RenderRayJob(r, o)
		if err != nil {
			t.Fatal(err)
		}
		if ft := rj.Spec.RayClusterSpec.GcsFaultToleranceOptions; ft == nil || ft.RedisAddress != "redis-"+rg+".dlc-system.svc:6379" {
			t.Errorf("%s's on-demand run: %+v", rg, ft)
		}
	}
	env := cpuEnv()
	env.Head.HighAvailability = true
	cl := running("cls-none000001", "无", env)
	cl.Spec.ResourceGroup, cl.Live.ResourceGroup = "rg-none", "rg-none"
	if _, err := kube.RenderRayCluster(cl, o); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("a resource group with no Redis: %v", err)
	}
}
