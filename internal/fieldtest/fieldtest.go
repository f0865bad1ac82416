// Package fieldtest checks validation results in tests: that an error
// holds exactly the expected problems, each at its path with its rule.
package fieldtest

import (
	"errors"
	"testing"

	"github.com/aidlc/dlc/errs"
)

// Want is one expected problem: its field path and its rule ID, written
// {"workerGroups[0].instances.max", "C8"}.
type Want [2]string

// Check fails t unless err holds exactly the problems in wants (none: err
// is nil), and works with errors.Is(ErrInvalid) and errors.As(*FieldError).
func Check(t testing.TB, err error, wants []Want) {
	t.Helper()
	if len(wants) == 0 {
		if err != nil {
			t.Fatalf("want valid, got %v", err)
		}
		return
	}
	if !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("error %v is not ErrInvalid", err)
	}
	var fe *errs.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("errors.As(*FieldError) failed on %v", err)
	}
	got := errs.Fields(err)
	for _, w := range wants {
		found := false
		for _, g := range got {
			found = found || (string(g.Path) == w[0] && g.Rule == w[1])
		}
		if !found {
			t.Errorf("missing problem %s [%s] in:\n%v", w[0], w[1], err)
		}
	}
	if len(got) != len(wants) {
		t.Errorf("got %d problems, want %d:\n%v", len(got), len(wants), err)
	}
}
