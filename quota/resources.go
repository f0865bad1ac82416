// Package quota models compute resources: the Resources value and its
// arithmetic, the node specs a node group is sized by (the CU/GU catalog),
// and the ledger of resource groups that reserves and releases them.
//
// It does no I/O.
package quota

import (
	"fmt"
	"math"
)

// GiB is 2^30 bytes.
const GiB int64 = 1 << 30

// Resources is an amount of compute: CPU in millicores, memory in bytes
// and whole GPUs. The zero value is nothing. Resources is a value: its
// methods return new values and never change the receiver.
type Resources struct {
	MilliCPU int64 `json:"milliCPU"`
	Memory   int64 `json:"memory"` // bytes
	GPU      int64 `json:"gpu"`
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	return Resources{r.MilliCPU + o.MilliCPU, r.Memory + o.Memory, r.GPU + o.GPU}
}

// Sub returns r − o; a component may become negative.
func (r Resources) Sub(o Resources) Resources {
	return Resources{r.MilliCPU - o.MilliCPU, r.Memory - o.Memory, r.GPU - o.GPU}
}

// Mul returns r × n.
func (r Resources) Mul(n int64) Resources {
	return Resources{r.MilliCPU * n, r.Memory * n, r.GPU * n}
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
