package quota

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

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
		n, bad, err := wholeQuantity(s, scale)
		switch {
		case err != nil:
			l = append(l, errs.Invalid(errs.NewPath(field), "C4", s, "not a quantity ("+err.Error()+")"))
		case bad == badNegative:
			l = append(l, errs.Invalid(errs.NewPath(field), "C4", s, "must not be negative"))
		case bad == badNotWhole:
			l = append(l, errs.Invalid(errs.NewPath(field), "C4", s, fmt.Sprintf("not a whole number of %s, or too large", unit)))
		default:
			*into = n
		}
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

// What wholeQuantity finds wrong with a quantity that parses.
const (
	badNegative = iota + 1
	badNotWhole // finer than the scale, or more than int64 holds
)

// wholeQuantity reads s as a Kubernetes quantity and returns it in units
// of scale (resource.Milli: millicores; 0: bytes or cores), rounded up and
// kept only when exact; err when it does not parse, else bad (0: none).
// MaxInt64 is where ParseQuantity caps what it cannot hold ("100Ei"): too
// large.
func wholeQuantity(s string, scale resource.Scale) (n int64, bad int, err error) {
	q, err := resource.ParseQuantity(s)
	switch {
	case err != nil:
		return 0, 0, err
	case q.Sign() < 0:
		return 0, badNegative, nil
	}
	n = q.ScaledValue(scale)
	if back := resource.NewScaledQuantity(n, scale); n < 0 || n == math.MaxInt64 || back.Cmp(q) != 0 {
		return 0, badNotWhole, nil
	}
	return n, 0, nil
}

// Quantities returns r as Kubernetes quantities: cpu in cores (in
// millicores where not whole: "500m"), memory in bytes (binary SI:
// "96Gi"), and the GPUs.
func (r Resources) Quantities() (cpu, memory resource.Quantity, gpu int64) {
	return *resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI), *resource.NewQuantity(r.Memory, resource.BinarySI), r.GPU
}

// UnmarshalJSON reads r as the platform stores it, {"milliCPU": 64000,
// "memory": 274877906944, "gpu": 8}, or in Kubernetes quantities, as a
// user writes it in YAML or JSON: {"cpu": "64", "memory": "256Gi", "gpu":
// 8}, where cpu is in cores ("500m", "1.5", or a number) and memory a
// quantity or a number of bytes. Naming cpu and milliCPU both, a key of
// neither form, or a quantity ParseResources refuses is an error
// (ErrInvalid, rule C4), as is a negative milliCPU given with quantities
// (the stored form is read as stored: an account edited from outside is
// CheckQuota's to report). MarshalJSON is encoding/json's: the stored form
// (String and Quantities print quantities).
func (r *Resources) UnmarshalJSON(data []byte) error {
	// The stored form first, with encoding/json's own decoding (stored has
	// no methods); it would ignore a key "cpu".
	type stored Resources
	if !bytes.Contains(data, []byte(`"cpu"`)) {
		var s stored
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields() // a key of neither form is refused below
		if err := dec.Decode(&s); err == nil {
			*r = Resources(s)
			return nil
		}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	var l errs.List
	var cpu, memory string
	var out Resources
	for k, v := range fields {
		switch k {
		case "milliCPU":
			if err := json.Unmarshal(v, &out.MilliCPU); err != nil || out.MilliCPU < 0 {
				l = append(l, errs.Invalid(errs.NewPath(k), "C4", string(v), "a whole number of millicores, not negative"))
			}
		case "cpu":
			cpu = quantityText(v)
		case "memory":
			memory = quantityText(v)
		case "gpu":
			n, err := strconv.ParseInt(quantityText(v), 10, 64)
			if err != nil {
				l = append(l, errs.Invalid(errs.NewPath(k), "C4", string(v), "a whole number of GPUs"))
			}
			out.GPU = n
		default:
			l = append(l, errs.NotSupported(errs.NewPath(k), "C4", k, []string{"cpu", "milliCPU", "memory", "gpu"}))
		}
	}
	if _, both := fields["milliCPU"]; both && cpu != "" {
		l = append(l, errs.Invalid(errs.NewPath("cpu"), "C4", cpu, "give cpu (in cores) or milliCPU, not both"))
	}
	if len(l) > 0 {
		return l.ToError()
	}
	q, err := ParseResources(cpu, memory, out.GPU)
	if err != nil {
		return err
	}
	if cpu != "" {
		out.MilliCPU = q.MilliCPU
	}
	out.Memory, out.GPU = q.Memory, q.GPU
	*r = out
	return nil
}

// quantityText returns a JSON value as the text of a quantity: a string's
// content, or a number as written.
func quantityText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(v))
}

// UnmarshalJSON reads a node spec as stored, {"cpu": 4, "memoryGB": 16},
// or with Kubernetes quantities: cpu "4" or "4000m" (whole cores) and
// "memory": "16Gi" (whole GiB) in place of memoryGB. Naming memory and
// memoryGB both, or a quantity that is not a whole number of cores or
// GiB, is an error (ErrInvalid, rule C7). MarshalJSON writes the stored
// form.
func (s *NodeSpec) UnmarshalJSON(data []byte) error {
	type stored NodeSpec
	var in struct {
		stored
		CPU    json.RawMessage `json:"cpu"`
		Memory json.RawMessage `json:"memory"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return errs.List{errs.Invalid(errs.NewPath(""), "C7", string(data), "not a node spec: "+err.Error())}.ToError()
	}
	out := NodeSpec(in.stored)
	var l errs.List
	whole := func(field string, v json.RawMessage, scale resource.Scale, unit string, into *int64) {
		text := quantityText(v)
		n, bad, err := wholeQuantity(text, scale)
		if err != nil || bad != 0 {
			l = append(l, errs.Invalid(errs.NewPath(field), "C7", text, "not a whole number of "+unit))
			return
		}
		*into = n
	}
	if len(in.CPU) > 0 {
		whole("cpu", in.CPU, 0, "cores", &out.CPU)
	}
	if len(in.Memory) > 0 {
		if out.MemoryGB != 0 {
			l = append(l, errs.Invalid(errs.NewPath("memory"), "C7", quantityText(in.Memory), "give memory (a quantity) or memoryGB, not both"))
		} else {
			var bytes int64
			if whole("memory", in.Memory, 0, "GiB", &bytes); bytes%GiB != 0 {
				l = append(l, errs.Invalid(errs.NewPath("memory"), "C7", quantityText(in.Memory), "not a whole number of GiB"))
			}
			out.MemoryGB = bytes / GiB
		}
	}
	if len(l) > 0 {
		return l.ToError()
	}
	*s = out
	return nil
}
