package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version name the API.
const (
	Group   = "dlc.aidlc.io"
	Version = "v1alpha1"
)

var (
	// GroupVersion is the group and version of every kind here.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

	// SchemeBuilder registers the kinds and their lists with a scheme.
	SchemeBuilder = &Builder{}

	// AddToScheme adds the kinds and their lists to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Builder collects the kinds of this API version (each kind's file
// registers itself in init) and adds them to a scheme. It keeps the API
// package free of controller-runtime: it needs only apimachinery.
// +kubebuilder:object:generate=false
type Builder struct {
	objs []runtime.Object
}

// Register adds kinds to the builder.
func (b *Builder) Register(objs ...runtime.Object) { b.objs = append(b.objs, objs...) }

// AddToScheme adds every registered kind, and the meta types of the group
// version, to s.
func (b *Builder) AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, b.objs...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
