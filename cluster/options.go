package cluster

import "time"

// CreateOptions modify Clusters().Create.
type CreateOptions struct {
	// RequestID makes the call idempotent: the cluster's id derives from
	// the request id, so a retry after a lost reply (or a timeout) returns
	// the cluster the first attempt stored, whatever became of it since,
	// instead of failing on its own name.
	RequestID string
}

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
	Cluster      *Cluster `json:"cluster"`
	Applied      []string `json:"applied,omitempty"`      // settings in effect now
	NeedsRestart []string `json:"needsRestart,omitempty"` // settings that take effect at the next start
}

// AutoscaleResult is the answer to a scale request of Ray's autoscaler.
type AutoscaleResult struct {
	Asked   int `json:"asked"`   // the count asked for
	Granted int `json:"granted"` // the count the worker group now has
	// QuotaRefused is true when the grant is below what was asked (within
	// the group's instance range) because the resource group cannot
	// allocate more; Reason then says what was missing.
	QuotaRefused bool   `json:"quotaRefused,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// Queued is true when what was refused waits in the resource group's
	// queue (Cluster.Growth), to be granted in the queue's order as quota
	// frees, without asking again; false when nothing waits (granted in
	// full, or more than the group's whole capacity could ever hold).
	Queued bool `json:"queued,omitempty"`
}

// ListOptions select the clusters Clusters().List and ListPage return.
// Every filter set must hold; the zero value selects every cluster,
// on-demand ones included.
type ListOptions struct {
	States        []State // only clusters in one of these states
	Creator       string  // only clusters this user created
	ResourceGroup string  // only clusters whose spec names this resource group
	Group         string  // only members of this cluster group
	// Kind: "" every cluster, KindStanding only standing ones (made by
	// Create or Clone), KindOnDemand only the temporary clusters of
	// on-demand runs.
	Kind         string
	CreatedAfter time.Time // only clusters created after this instant
	// Tags, when set, selects only clusters that have every one of these
	// tags, key and value ("" matches only an empty value).
	Tags map[string]string
	// Limit is the most clusters ListPage returns (0: every one); List
	// ignores it and Continue.
	Limit int
	// Continue is the previous page's Page.Continue: the page after it.
	Continue string
}

// The kinds of cluster ListOptions.Kind selects.
const (
	KindStanding = "standing"
	KindOnDemand = "on-demand"
)

// Page is one page of clusters (Clusters().ListPage), by id.
type Page struct {
	Items []*Cluster `json:"items"`
	// Continue, when not "", is the token that returns the next page
	// (ListOptions.Continue); "" after the last page.
	Continue string `json:"continue,omitempty"`
}

// HasTags reports whether have holds every tag of want, key and value.
func HasTags(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
