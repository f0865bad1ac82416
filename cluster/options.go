package cluster

// DeleteOptions modify a delete or a hibernate.
type DeleteOptions struct {
	// Force goes ahead while runs are active on the cluster, stopping them
	// with the reason, and deletes a cluster in any state, a transitional
	// or an on-demand one included.
	Force bool
}

// EditResult says what an edit changed at once and what waits for the
// cluster's next start.
type EditResult struct {
	Cluster      *Cluster
	Applied      []string // settings in effect now
	NeedsRestart []string // settings that take effect at the next start
}

// AutoscaleResult is the answer to a scale request of Ray's autoscaler.
type AutoscaleResult struct {
	Asked   int // the count asked for
	Granted int // the count the worker group now has
	// QuotaRefused is true when the grant is below what was asked (within
	// the group's instance range) because the resource group cannot
	// allocate more; Reason then says what was missing.
	QuotaRefused bool
	Reason       string
}
