package job

import "time"

// SaveOptions modify Jobs().Create.
type SaveOptions struct {
	// RequestID makes the call idempotent: the config's id derives from
	// the request id, so a retry after a lost reply returns the record the
	// first attempt saved instead of saving another.
	RequestID string
}

// RunOptions modify Runs().Create.
type RunOptions struct {
	// RequestID makes the call idempotent: the run's id derives from the
	// job and the request id, so a retry after a lost reply returns the
	// run the first attempt made instead of starting another.
	RequestID string
}

// RunListOptions select the runs Runs().List and ListPage return. Every
// filter set must hold; the zero value selects every run.
type RunListOptions struct {
	JobID          string     // only this job config's runs
	ClusterID      string     // only the runs placed on this cluster
	States         []RunState // only runs in one of these states
	Creator        string     // only runs this user created
	SubmittedAfter time.Time  // only runs submitted after this instant
	// Tags, when set, selects only runs whose config (as the run was
	// made from it) has every one of these tags, key and value.
	Tags map[string]string
	// Limit is the most runs ListPage returns (0: every one); List
	// ignores it and Continue.
	Limit int
	// Continue is the previous page's RunPage.Continue: the page after it.
	Continue string
}

// RunPage is one page of runs (Runs().ListPage), in submission order.
type RunPage struct {
	Items []*Run `json:"items"`
	// Continue, when not "", is the token that returns the next page
	// (RunListOptions.Continue); "" after the last page.
	Continue string `json:"continue,omitempty"`
}

// ListOptions select the job configs Jobs().List and ListPage return.
// Every filter set must hold; the zero value selects every config.
type ListOptions struct {
	Creator      string    // only configs this user created
	Mode         Mode      // only configs of this run mode
	Resource     string    // only configs on this cluster, cluster group or resource group (ListEntry.Resource)
	NameContains string    // only configs whose name contains this
	CreatedAfter time.Time // only configs created after this instant
	// Tags, when set, selects only configs that have every one of these
	// tags, key and value.
	Tags map[string]string
	// Limit is the most entries ListPage returns (0: every one); List
	// ignores it and Continue.
	Limit int
	// Continue is the previous page's ListPage.Continue: the page after it.
	Continue string
}

// ListPage is one page of the job list (Jobs().ListPage), by id.
type ListPage struct {
	Items []ListEntry `json:"items"`
	// Continue, when not "", is the token that returns the next page
	// (ListOptions.Continue); "" after the last page.
	Continue string `json:"continue,omitempty"`
}
