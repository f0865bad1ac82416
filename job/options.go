package job

// SaveOptions modify Jobs().Save.
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

// RunListOptions select the runs List returns.
type RunListOptions struct {
	JobID string // only this job config's runs; "" for every run
}
