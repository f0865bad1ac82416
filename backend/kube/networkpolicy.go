package kube

import (
	"context"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
)

// KeyResourceGroup is a label of every Ray pod (and of its RayCluster or
// RayJob) naming the resource group it draws on: what a resource group's
// NetworkPolicy selects.
const KeyResourceGroup = "dlc.aidlc.io/resource-group"

// NetworkPolicyOptions has the backend keep a NetworkPolicy per resource
// group (Options.NetworkPolicy): the Ray pods of a resource group admit
// connections from the Ray pods of the same group and from From only,
// so that one team's code cannot reach another team's heads and workers
// (GCS, the dashboard, the object store, the workers' ports).
type NetworkPolicyOptions struct {
	// From are the peers besides the group's own Ray pods that must reach
	// Ray pods: the API server, whose service proxy carries the Ray Jobs
	// API (an ipBlock of the control plane's addresses, as the cluster's
	// network plugin sees them); KubeRay's operator, which reads an
	// on-demand run's head (a namespaceSelector and podSelector of its
	// pods); Prometheus. A plugin that enforces NetworkPolicy refuses all
	// else, the backend's own calls included when they do not go through
	// the API server.
	From []networkingv1.NetworkPolicyPeer
}

// NetworkPolicyName is the name of resource group rg's NetworkPolicy.
func NetworkPolicyName(rg string) string { return "dlc-rg-" + rg }

// RenderNetworkPolicy renders resource group rg's NetworkPolicy in
// namespace: every pod labelled KeyResourceGroup=rg admits ingress from
// the pods labelled so, and from o.From; nothing else. Egress is left as
// it is (a run fetches its package and its dependencies).
func RenderNetworkPolicy(rg, namespace string, o NetworkPolicyOptions) (*networkingv1.NetworkPolicy, error) {
	if l := check.ID(errs.NewPath("resourceGroup"), "C4", "resource group", rg); len(l) > 0 {
		return nil, l.ToError()
	}
	own := metav1.LabelSelector{MatchLabels: map[string]string{KeyResourceGroup: rg}}
	from := append([]networkingv1.NetworkPolicyPeer{{PodSelector: &own}}, o.From...)
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: NetworkPolicyName(rg), Namespace: namespace,
			Labels: withManagedBy(map[string]string{KeyResourceGroup: rg})},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *own.DeepCopy(),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: slices.Clone(from)}},
		},
	}, nil
}

// ensureNetworkPolicy applies resource group rg's NetworkPolicy once per
// process (and again after a failure), before its first Ray pods are
// asked for; nothing when the backend keeps none.
func (p *Provisioner) ensureNetworkPolicy(ctx context.Context, rg string) error {
	if p.netpol == nil || rg == "" {
		return nil
	}
	if _, done := p.netpolDone.Load(rg); done {
		return nil
	}
	np, err := RenderNetworkPolicy(rg, p.nsFor(rg), *p.netpol)
	if err != nil {
		return err
	}
	// Applied, not waited for in a cache: the backend watches no
	// NetworkPolicy (its Role may create and patch them, not list them).
	if _, err := p.applyOnly(ctx, np); err != nil {
		return err
	}
	p.netpolDone.Store(rg, true)
	return nil
}
