package job

import "time"

// Deletion marks a job config whose delete is in progress (J17): the
// delete writes it on the config by compare-and-swap before it looks in
// the store for the config's runs that have not ended, and deletes the
// config on the version it marked. A run created meanwhile, through any
// client, reads the config again once it is stored and ends at once when
// it finds it marked or gone, so a delete and a new run of one config
// never both succeed. The zero value is no mark. While a mark is held (it
// is less than two minutes old, and the replica that made it is not seen
// gone) a new run or an edit of the config is
// refused; a mark left by a delete that died is then ignored, and taken
// off by the next run or edit.
type Deletion struct {
	// At is when the delete began, on the deleting client's clock.
	At time.Time `json:"at,omitzero"`
	// By is who asked for it.
	By string `json:"by,omitempty"`
	// Replica is the membership id of the replica whose delete made the
	// mark ("" when it shares no work, or for a mark made by a release
	// before this field): once that replica is seen gone, the mark no
	// longer holds, however young.
	Replica string `json:"replica,omitempty"`
}

// IsZero reports whether d is no mark.
func (d Deletion) IsZero() bool { return d.At.IsZero() }
