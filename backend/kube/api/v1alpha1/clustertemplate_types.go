package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ClusterTemplateSpec is a saved compute environment, as cluster.Template.
type ClusterTemplateSpec struct {
	// Name is the display name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// +optional
	Description string `json:"description,omitempty"`
	// Environment is the image and node groups, inline as in cluster.Template.
	Environment `json:",inline"`
	// Bookkeeping is the creator and creation time.
	Bookkeeping `json:",inline"`
}

// ClusterTemplateStatus is what the platform records of a template.
type ClusterTemplateStatus struct {
	// Record is the last change and the operation log.
	Record `json:",inline"`
}

// ClusterTemplate is a named, reusable compute environment that a cluster
// or an on-demand job starts from (a copy: later changes do not reach it).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ct,categories=dlc
// +kubebuilder:printcolumn:name="Display",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterTemplateSpec   `json:"spec"`
	Status ClusterTemplateStatus `json:"status,omitempty"`
}

// ClusterTemplateList is a list of ClusterTemplate.
//
// +kubebuilder:object:root=true
type ClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterTemplate `json:"items"`
}

func init() { SchemeBuilder.Register(&ClusterTemplate{}, &ClusterTemplateList{}) }
