package quota

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aidlc/dlc/errs"
)

// Kind is a node spec's family: CU for CPU nodes, GU for GPU nodes (C7).
type Kind string

// The node spec families.
const (
	CU Kind = "CU"
	GU Kind = "GU"
)

// Node limits from the product (J7): every node has at least one CPU core
// and 2 GB of memory; a GPU node has at least one GPU.
const (
	MinNodeCPU    = 1
	MinNodeMemory = 2 // GB (GiB)
	MinNodeGPU    = 1
)

// Node maxima: no machine is larger, and they keep a node's resources,
// times any instance count validation allows, well inside int64.
const (
	MaxNodeCPU    = 4096  // cores
	MaxNodeMemory = 65536 // GB (GiB), 64 TiB
	MaxNodeGPU    = 64
)

// NodeSpec is one entry of the CU/GU catalog: the size of one node.
type NodeSpec struct {
	Name     string `json:"name"`              // e.g. "cu.4c16g"
	Kind     Kind   `json:"kind"`              // CU or GU
	CPU      int64  `json:"cpu"`               // cores
	MemoryGB int64  `json:"memoryGB"`          // GiB
	GPU      int64  `json:"gpu,omitempty"`     // whole GPUs; GU only
	GPUType  string `json:"gpuType,omitempty"` // e.g. "A10"; GU only
}

// Resources returns what one node of this spec takes from quota.
func (s NodeSpec) Resources() Resources {
	return Resources{MilliCPU: s.CPU * 1000, Memory: s.MemoryGB * GiB, GPU: s.GPU}
}

// Validate checks the spec against the node limits (J7) and maxima.
func (s NodeSpec) Validate(p errs.Path) errs.List {
	var l errs.List
	if s.Name == "" {
		l = append(l, errs.Required(p.Child("name"), "C7", "a node spec needs a name"))
	}
	switch s.Kind {
	case CU:
		if s.GPU != 0 || s.GPUType != "" {
			l = append(l, errs.Invalid(p.Child("gpu"), "C7", s.GPU, "a CU (CPU) spec has no GPU; use a GU spec"))
		}
	case GU:
		switch {
		case s.GPU < MinNodeGPU:
			l = append(l, errs.Invalid(p.Child("gpu"), "J7", s.GPU, "a GPU node has at least 1 GPU"))
		case s.GPU > MaxNodeGPU:
			l = append(l, errs.Invalid(p.Child("gpu"), "C7", s.GPU, fmt.Sprintf("a node has at most %d GPUs", MaxNodeGPU)))
		}
		if s.GPUType == "" {
			l = append(l, errs.Required(p.Child("gpuType"), "C7", "a GU spec names its GPU type"))
		}
	default:
		l = append(l, errs.NotSupported(p.Child("kind"), "C7", string(s.Kind), []string{string(CU), string(GU)}))
	}
	switch {
	case s.CPU < MinNodeCPU:
		l = append(l, errs.Invalid(p.Child("cpu"), "J7", s.CPU, "every node has at least 1 CPU core"))
	case s.CPU > MaxNodeCPU:
		l = append(l, errs.Invalid(p.Child("cpu"), "C7", s.CPU, fmt.Sprintf("a node has at most %d CPU cores", MaxNodeCPU)))
	}
	switch {
	case s.MemoryGB < MinNodeMemory:
		l = append(l, errs.Invalid(p.Child("memoryGB"), "J7", s.MemoryGB, "every node has at least 2 GB of memory"))
	case s.MemoryGB > MaxNodeMemory:
		l = append(l, errs.Invalid(p.Child("memoryGB"), "C7", s.MemoryGB, fmt.Sprintf("a node has at most %d GB of memory", MaxNodeMemory)))
	}
	return l
}

// Catalog is a set of node specs by name. Make one with NewCatalog; the
// zero Catalog is empty. A Catalog is immutable and safe to share.
type Catalog struct {
	specs map[string]NodeSpec
	names []string
}

// NewCatalog returns a catalog of specs, after checking each against the
// node limits and that names are unique.
func NewCatalog(specs ...NodeSpec) (Catalog, error) {
	var l errs.List
	c := Catalog{specs: make(map[string]NodeSpec, len(specs))}
	for i, s := range specs {
		p := errs.NewPath("nodeSpecs").Index(i)
		l = append(l, s.Validate(p)...)
		if _, dup := c.specs[s.Name]; dup {
			l = append(l, errs.Duplicate(p.Child("name"), "C7", s.Name))
		}
		c.specs[s.Name] = s
		c.names = append(c.names, s.Name)
	}
	if err := l.ToError(); err != nil {
		return Catalog{}, err
	}
	sort.Strings(c.names)
	return c, nil
}

// Lookup returns the spec called name.
func (c Catalog) Lookup(name string) (NodeSpec, bool) {
	s, ok := c.specs[name]
	return s, ok
}

// Names returns the spec names in order.
func (c Catalog) Names() []string { return append([]string(nil), c.names...) }

// Specs returns the specs in name order.
func (c Catalog) Specs() []NodeSpec {
	out := make([]NodeSpec, 0, len(c.names))
	for _, n := range c.names {
		out = append(out, c.specs[n])
	}
	return out
}

// Len returns the number of specs.
func (c Catalog) Len() int { return len(c.names) }

// UnknownDetail explains an unknown spec name, listing a few known ones.
func (c Catalog) UnknownDetail(name string) string {
	names := c.names
	more := ""
	if len(names) > 12 {
		names, more = names[:12], ", ..."
	}
	return fmt.Sprintf("no node spec %q in the catalog; known: %s%s", name, strings.Join(names, ", "), more)
}

var defaultCatalog = func() Catalog {
	c, err := NewCatalog(
		NodeSpec{Name: "cu.2c4g", Kind: CU, CPU: 2, MemoryGB: 4},
		NodeSpec{Name: "cu.4c8g", Kind: CU, CPU: 4, MemoryGB: 8},
		NodeSpec{Name: "cu.4c16g", Kind: CU, CPU: 4, MemoryGB: 16},
		NodeSpec{Name: "cu.8c16g", Kind: CU, CPU: 8, MemoryGB: 16},
		NodeSpec{Name: "cu.8c32g", Kind: CU, CPU: 8, MemoryGB: 32},
		NodeSpec{Name: "cu.16c32g", Kind: CU, CPU: 16, MemoryGB: 32},
		NodeSpec{Name: "cu.16c64g", Kind: CU, CPU: 16, MemoryGB: 64},
		NodeSpec{Name: "cu.32c128g", Kind: CU, CPU: 32, MemoryGB: 128},
		NodeSpec{Name: "cu.64c256g", Kind: CU, CPU: 64, MemoryGB: 256},
		NodeSpec{Name: "gu.8c32g.1xt4", Kind: GU, CPU: 8, MemoryGB: 32, GPU: 1, GPUType: "T4"},
		NodeSpec{Name: "gu.10c40g.1xa10", Kind: GU, CPU: 10, MemoryGB: 40, GPU: 1, GPUType: "A10"},
		NodeSpec{Name: "gu.20c80g.2xa10", Kind: GU, CPU: 20, MemoryGB: 80, GPU: 2, GPUType: "A10"},
		NodeSpec{Name: "gu.12c96g.1xa100", Kind: GU, CPU: 12, MemoryGB: 96, GPU: 1, GPUType: "A100"},
		NodeSpec{Name: "gu.48c384g.4xa100", Kind: GU, CPU: 48, MemoryGB: 384, GPU: 4, GPUType: "A100"},
		NodeSpec{Name: "gu.96c768g.8xa100", Kind: GU, CPU: 96, MemoryGB: 768, GPU: 8, GPUType: "A100"},
		NodeSpec{Name: "gu.96c960g.8xh800", Kind: GU, CPU: 96, MemoryGB: 960, GPU: 8, GPUType: "H800"},
	)
	if err != nil {
		panic(err) // the built-in catalog is fixed; a test covers it
	}
	return c
}()

// DefaultCatalog returns the built-in CU/GU catalog.
func DefaultCatalog() Catalog { return defaultCatalog }
