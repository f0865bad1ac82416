package quota

import (
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aidlc/dlc/errs"
)

// ParseResources reads resources as Kubernetes writes them
// (resource.Quantity): cpu in cores ("32", "500m", "1.5"), memory in
// bytes ("96Gi", "512Mi", "128G"), and whole GPUs. An empty cpu or
// memory is 0. A quantity that does not parse, is negative, or is finer
// than a millicore (cpu) or a byte (memory) is an error (ErrInvalid)
// naming each problem at its field (cpu, memory, gpu), with rule C4 (a
// resource group's capacity).
func ParseResources(cpu, memory string, gpu int64) (Resources, error) {
	var r Resources
	var l errs.List
	parse := func(field, s string, scale resource.Scale, unit string, into *int64) {
		if s == "" {
			return
		}
		q, err := resource.ParseQuantity(s)
		switch {
		case err != nil:
			l = append(l, errs.Invalid(errs.NewPath(field), "C4", s, "not a quantity ("+err.Error()+")"))
			return
		case q.Sign() < 0:
			l = append(l, errs.Invalid(errs.NewPath(field), "C4", s, "must not be negative"))
			return
		}
		// Rounded up, kept only when exact; MaxInt64 is where ParseQuantity
		// caps what it cannot hold ("100Ei"): refused.
		n := q.ScaledValue(scale)
		if back := resource.NewScaledQuantity(n, scale); n < 0 || n == math.MaxInt64 || back.Cmp(q) != 0 {
			l = append(l, errs.Invalid(errs.NewPath(field), "C4", s, fmt.Sprintf("not a whole number of %s, or too large", unit)))
			return
		}
		*into = n
	}
	parse("cpu", cpu, resource.Milli, "millicores", &r.MilliCPU)
	parse("memory", memory, 0, "bytes", &r.Memory)
	if gpu < 0 {
		l = append(l, errs.Invalid(errs.NewPath("gpu"), "C4", gpu, "must not be negative"))
	}
	r.GPU = gpu
	if err := l.ToError(); err != nil {
		return Resources{}, err
	}
	return r, nil
}

// Quantities returns r as Kubernetes quantities: cpu in cores (in
// millicores where not whole: "500m"), memory in bytes (binary SI:
// "96Gi"), and the GPUs.
func (r Resources) Quantities() (cpu, memory resource.Quantity, gpu int64) {
	return *resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI), *resource.NewQuantity(r.Memory, resource.BinarySI), r.GPU
}
