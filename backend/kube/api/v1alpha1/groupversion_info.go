package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
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
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds and their lists to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
