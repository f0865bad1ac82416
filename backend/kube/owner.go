package kube

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SetOwner makes owner, of kind gvk, the controller of obj, so that
// deleting owner deletes obj (a RayCluster owned by its ComputeCluster
// object). An owner reference to the same owner is replaced; a different
// controller, or an owner in another namespace, is an error. owner needs
// its UID: pass it as the API server returned it.
func SetOwner(obj, owner metav1.Object, gvk schema.GroupVersionKind) error {
	if owner.GetUID() == "" || owner.GetName() == "" {
		return fmt.Errorf("kube: owner %s %q has no name or UID yet", gvk.Kind, owner.GetName())
	}
	if ns := owner.GetNamespace(); ns != "" && ns != obj.GetNamespace() {
		return fmt.Errorf("kube: owner %s %s/%s is in another namespace than %s/%s",
			gvk.Kind, ns, owner.GetName(), obj.GetNamespace(), obj.GetName())
	}
	ref := *metav1.NewControllerRef(owner, gvk)
	refs := obj.GetOwnerReferences()
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	for _, r := range refs {
		switch {
		case r.UID == ref.UID:
			continue // replaced below
		case r.Controller != nil && *r.Controller:
			return fmt.Errorf("kube: %s is already controlled by %s %s", obj.GetName(), r.Kind, r.Name)
		}
		out = append(out, r)
	}
	obj.SetOwnerReferences(append(out, ref))
	return nil
}
