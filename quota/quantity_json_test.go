package quota

import (
	"encoding/json"
	"errors"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/aidlc/dlc/errs"
)

func TestResourcesJSON(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Resources
		bad      bool
	}{
		{"stored", `{"milliCPU":64000,"memory":274877906944,"gpu":8}`, Resources{MilliCPU: 64000, Memory: 256 * GiB, GPU: 8}, false},
		{"quantities", `{"cpu":"64","memory":"256Gi","gpu":8}`, Resources{MilliCPU: 64000, Memory: 256 * GiB, GPU: 8}, false},
		{"millicores and a number of bytes", `{"cpu":"500m","memory":1024}`, Resources{MilliCPU: 500, Memory: 1024}, false},
		{"cores as a number", `{"cpu":1.5,"memory":"512Mi","gpu":"2"}`, Resources{MilliCPU: 1500, Memory: 512 << 20, GPU: 2}, false},
		{"memory quantity with stored cpu", `{"milliCPU":2000,"memory":"8Gi"}`, Resources{MilliCPU: 2000, Memory: 8 * GiB}, false},
		{"both cpu forms", `{"cpu":"1","milliCPU":1000}`, Resources{}, true},
		{"finer than a millicore", `{"cpu":"0.0001"}`, Resources{}, true},
		{"negative", `{"cpu":"-1"}`, Resources{}, true},
		{"too large", `{"memory":"8Ei"}`, Resources{}, true},
		{"unknown key", `{"cpu":"1","cores":2}`, Resources{}, true},
		{"not a quantity", `{"cpu":"lots"}`, Resources{}, true},
		{"fractional gpu", `{"cpu":"1","gpu":0.5}`, Resources{}, true},
		{"a misspelt key in the stored form", `{"milliCPU":64000,"gpus":8}`, Resources{}, true},
		{"an escaped cpu key", `{"\u0063pu":"4"}`, Resources{MilliCPU: 4000}, false},
		{"negative milliCPU with a quantity", `{"milliCPU":-5,"memory":"1Gi"}`, Resources{}, true},
	} {
		var got Resources
		err := json.Unmarshal([]byte(tc.in), &got)
		if tc.bad {
			if !errors.Is(err, errs.ErrInvalid) || len(errs.Fields(err)) == 0 {
				t.Errorf("%s: %v, want field errors (ErrInvalid)", tc.name, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	// In YAML, inside a resource group, and written back in the stored form.
	var g Group
	if err := yaml.UnmarshalStrict([]byte("id: rg-1\npackage: pkg-1\ncapacity:\n  cpu: 96\n  memory: 384Gi\n  gpu: 8\n"), &g); err != nil {
		t.Fatal(err)
	}
	if g.Capacity != (Resources{MilliCPU: 96000, Memory: 384 * GiB, GPU: 8}) || g.Capacity.String() != "cpu=96 memory=384Gi gpu=8" {
		t.Fatalf("capacity from YAML: %+v (%s)", g.Capacity, g.Capacity)
	}
	b, err := json.Marshal(g.Capacity)
	if err != nil || string(b) != `{"milliCPU":96000,"memory":412316860416,"gpu":8}` {
		t.Fatalf("written back: %s, %v", b, err)
	}
}

func TestNodeSpecJSON(t *testing.T) {
	want := NodeSpec{Name: "cu.4c16g", Kind: CU, CPU: 4, MemoryGB: 16}
	for _, tc := range []struct {
		name, in string
		bad      bool
	}{
		{"stored", `{"name":"cu.4c16g","kind":"CU","cpu":4,"memoryGB":16}`, false},
		{"quantities", `{"name":"cu.4c16g","kind":"CU","cpu":"4","memory":"16Gi"}`, false},
		{"millicores", `{"name":"cu.4c16g","kind":"CU","cpu":"4000m","memory":"16384Mi"}`, false},
		{"part of a core", `{"name":"x","kind":"CU","cpu":"500m","memory":"16Gi"}`, true},
		{"part of a GiB", `{"name":"x","kind":"CU","cpu":4,"memory":"1500Mi"}`, true},
		{"both memory forms", `{"name":"x","kind":"CU","cpu":4,"memory":"16Gi","memoryGB":16}`, true},
		{"not a quantity", `{"name":"x","kind":"CU","cpu":"four","memoryGB":16}`, true},
		{"an unknown key", `{"name":"x","kind":"CU","cpu":4,"memoryGB":16,"gpuz":1}`, true},
	} {
		var got NodeSpec
		err := json.Unmarshal([]byte(tc.in), &got)
		if tc.bad {
			if !errors.Is(err, errs.ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, want)
		}
		if b, _ := json.Marshal(got); string(b) != `{"name":"cu.4c16g","kind":"CU","cpu":4,"memoryGB":16}` {
			t.Errorf("%s: written back as %s", tc.name, b)
		}
	}
}
