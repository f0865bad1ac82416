// Package quota models compute resources: the Resources value and its
// arithmetic, the node specs a node group is sized by (the CU/GU catalog),
// and the account of each resource group (its reservations, changed as a whole).
//
// It does no I/O.
package quota

import (
	"fmt"
	"math"

	"github.com/aidlc/dlc/errs"
)

// GiB is 2^30 bytes.
const GiB int64 = 1 << 30

// Resources is an amount of compute: CPU in millicores, memory in bytes
// and whole GPUs. The zero value is nothing. Resources is a value: its
// methods return new values and never change the receiver.
//
// The arithmetic never wraps: Add, Sub and Mul saturate a component at
// the int64 bounds (math.MaxInt64, math.MinInt64), so a sum too large to
// hold stays too large to fit any capacity; AddChecked and MulChecked
// report the overflow instead.
type Resources struct {
	MilliCPU int64 `json:"milliCPU"`
	Memory   int64 `json:"memory"` // bytes
	GPU      int64 `json:"gpu"`
}

// Add returns r + o, each component saturated at the int64 bounds.
func (r Resources) Add(o Resources) Resources {
	s, _ := r.AddChecked(o)
	return s
}

// AddChecked returns r + o, or, when a component overflows int64, the
// saturated sum and an error that is errors.Is errs.ErrInvalid.
func (r Resources) AddChecked(o Resources) (Resources, error) {
	c, okC := add64(r.MilliCPU, o.MilliCPU)
	m, okM := add64(r.Memory, o.Memory)
	g, okG := add64(r.GPU, o.GPU)
	s := Resources{c, m, g}
	if okC && okM && okG {
		return s, nil
	}
	return s, overflow(fmt.Sprintf("%v + %v", r, o))
}

// Sub returns r − o, each component saturated at the int64 bounds; a
// component may become negative.
func (r Resources) Sub(o Resources) Resources {
	c, _ := sub64(r.MilliCPU, o.MilliCPU)
	m, _ := sub64(r.Memory, o.Memory)
	g, _ := sub64(r.GPU, o.GPU)
	return Resources{c, m, g}
}

// Mul returns r × n, each component saturated at the int64 bounds.
func (r Resources) Mul(n int64) Resources {
	p, _ := r.MulChecked(n)
	return p
}

// MulChecked returns r × n, or, when a component overflows int64, the
// saturated product and an error that is errors.Is errs.ErrInvalid.
func (r Resources) MulChecked(n int64) (Resources, error) {
	c, okC := mul64(r.MilliCPU, n)
	m, okM := mul64(r.Memory, n)
	g, okG := mul64(r.GPU, n)
	p := Resources{c, m, g}
	if okC && okM && okG {
		return p, nil
	}
	return p, overflow(fmt.Sprintf("%v × %d", r, n))
}

func overflow(expr string) error {
	return errs.List{errs.Invalid("", "", expr, "the amount of resources is too large to count (it overflows int64)")}.ToError()
}

// add64 returns a + b saturated at the int64 bounds, and whether it fit.
func add64(a, b int64) (int64, bool) {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64, false
	case b < 0 && s > a:
		return math.MinInt64, false
	}
	return s, true
}

// sub64 returns a − b saturated at the int64 bounds, and whether it fit.
func sub64(a, b int64) (int64, bool) {
	d := a - b
	switch {
	case b < 0 && d < a:
		return math.MaxInt64, false
	case b > 0 && d > a:
		return math.MinInt64, false
	}
	return d, true
}

// mul64 returns a × b saturated at the int64 bounds, and whether it fit.
func mul64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	if p/b == a && !(b == -1 && a == math.MinInt64) { // MinInt64 / -1 wraps to MinInt64
		return p, true
	}
	if (a < 0) != (b < 0) {
		return math.MinInt64, false
	}
	return math.MaxInt64, false
}

// Fits reports whether r fits within capacity c, component by component.
func (r Resources) Fits(c Resources) bool {
	return r.MilliCPU <= c.MilliCPU && r.Memory <= c.Memory && r.GPU <= c.GPU
}

// IsZero reports whether r is nothing.
func (r Resources) IsZero() bool { return r == Resources{} }

// AnyNegative reports whether a component is below zero.
func (r Resources) AnyNegative() bool { return r.MilliCPU < 0 || r.Memory < 0 || r.GPU < 0 }

// Min returns the component-wise minimum of r and o.
func (r Resources) Min(o Resources) Resources {
	return Resources{min(r.MilliCPU, o.MilliCPU), min(r.Memory, o.Memory), min(r.GPU, o.GPU)}
}

// Max returns the component-wise maximum of r and o.
func (r Resources) Max(o Resources) Resources {
	return Resources{max(r.MilliCPU, o.MilliCPU), max(r.Memory, o.Memory), max(r.GPU, o.GPU)}
}

// CountFits returns how many times unit fits within r (the largest n with
// unit×n ≤ r); a zero unit fits any number of times (math.MaxInt64).
func (r Resources) CountFits(unit Resources) int64 {
	n := int64(math.MaxInt64)
	for _, p := range [][2]int64{{r.MilliCPU, unit.MilliCPU}, {r.Memory, unit.Memory}, {r.GPU, unit.GPU}} {
		if p[1] > 0 {
			n = min(n, max(p[0], 0)/p[1])
		}
	}
	return n
}

// String writes r as "cpu=4 memory=16Gi gpu=1".
func (r Resources) String() string {
	cpu := fmt.Sprintf("%d", r.MilliCPU/1000)
	if r.MilliCPU%1000 != 0 {
		cpu = fmt.Sprintf("%dm", r.MilliCPU)
	}
	mem := fmt.Sprintf("%d", r.Memory)
	if r.Memory%GiB == 0 {
		mem = fmt.Sprintf("%dGi", r.Memory/GiB)
	} else if r.Memory%(1<<20) == 0 {
		mem = fmt.Sprintf("%dMi", r.Memory>>20)
	}
	return fmt.Sprintf("cpu=%s memory=%s gpu=%d", cpu, mem, r.GPU)
}

// Cores returns n whole CPU cores.
func Cores(n int64) Resources { return Resources{MilliCPU: n * 1000} }
