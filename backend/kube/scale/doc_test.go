package scale_test

import (
	"testing"

	"github.com/aidlc/dlc/backend/kube/internal/loadtest"
)

// TestParametersDocumented fails when the test reads an environment
// variable that the package documentation's parameter list does not name.
func TestParametersDocumented(t *testing.T) { loadtest.ParametersDocumented(t, "DLC_SCALE") }
