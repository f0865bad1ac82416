package v1alpha1

// Resources is an amount of compute, as quota.Resources: milli-CPUs, bytes of
// memory and GPUs, each a non-negative integer.
type Resources struct {
	// +kubebuilder:validation:Minimum=0
	MilliCPU int64 `json:"milliCPU"`
	// +kubebuilder:validation:Minimum=0
	Memory int64 `json:"memory"`
	// +kubebuilder:validation:Minimum=0
	GPU int64 `json:"gpu"`
}

// EventSource says who caused an event.
// +kubebuilder:validation:Enum=user;system
type EventSource string

// The event sources.
const (
	EventSourceUser   EventSource = "user"
	EventSourceSystem EventSource = "system"
)

// Event is one entry of an object's operation and event log, as
// event.Event.
type Event struct {
	// Time is when it happened, RFC 3339 with nanoseconds.
	// +kubebuilder:validation:Format=date-time
	Time   string      `json:"time"`
	Source EventSource `json:"source"`
	// +optional
	Actor string `json:"actor,omitempty"`
	// +kubebuilder:validation:MinLength=1
	Action string `json:"action"`
	// +optional
	Message string `json:"message,omitempty"`
	// Count is how many times the entry happened, when more than once (a
	// repeated system entry is folded into the one before it); Time is
	// the latest.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Count int64 `json:"count,omitempty"`
	// First is when a folded entry first happened, RFC 3339 with
	// nanoseconds; absent when it happened once, or all its times at Time.
	// +kubebuilder:validation:Format=date-time
	// +optional
	First string `json:"first,omitempty"`
}

// MaxEvents bounds an operation log, as event.MaxEntries.
const MaxEvents = 100

// Bookkeeping is what every kind's spec carries from its creation.
type Bookkeeping struct {
	// Creator is the identity that created the object.
	// +optional
	Creator string `json:"creator,omitempty"`
	// CreatedAt is when the platform created it (its clock, not the API
	// server's), RFC 3339 with nanoseconds.
	// +kubebuilder:validation:Format=date-time
	// +optional
	CreatedAt string `json:"createdAt,omitempty"`
}

// Record is what every kind's status carries: the last change and the
// operation log.
type Record struct {
	// UpdatedAt is when the platform last changed the object.
	// +kubebuilder:validation:Format=date-time
	// +optional
	UpdatedAt string `json:"updatedAt,omitempty"`
	// Events is the operation and event log, newest last.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	Events []Event `json:"events,omitempty"`
	// StoreLabels are the labels the SDK's store lists the object by (its
	// state, its groups, …). They are kept in the status, not in
	// metadata.labels, so that a change of state is one write of the
	// status subresource.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	StoreLabels map[string]string `json:"storeLabels,omitempty"`
}

// Deletion marks an object whose delete is in progress, as job.Deletion
// and group.Deletion: what a create of something that depends on the
// object (a run of a job config, a cluster in a group) checks after it is
// stored.
type Deletion struct {
	// At is when the delete began, on the deleting client's clock.
	// +kubebuilder:validation:Format=date-time
	// +optional
	At string `json:"at,omitempty"`
	// By is who asked for it.
	// +optional
	By string `json:"by,omitempty"`
	// Replica is the membership id of the replica whose delete made the
	// mark.
	// +optional
	Replica string `json:"replica,omitempty"`
	// Target is the group a cluster group's members move into (G6).
	// +optional
	Target string `json:"target,omitempty"`
}
