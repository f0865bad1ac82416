package cluster_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/storage"
)

func fullSpec(t testing.TB) *cluster.Spec {
	s, err := cluster.NewBuilder("全量集群").Groups("g1", "g2").Priority(7).Tag("team", "推荐").
		Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-gpu").
		Head("head", "cu.8c32g", cluster.Env("A", "1"), cluster.Label("zone", "gz"), cluster.Resource("head_slot", 1)).
		HighAvailability(true).
		WorkerGroup("gpu", "gu.10c40g.1xa10", 0, 4, cluster.Resource("accelerator_type:A10", 1)).
		WorkerGroup("cpu", "cu.4c8g", 2, 2).
		Mount(storage.Mount{Type: storage.COS, Instance: "data-1250000000", SubPath: "d", MountPath: "/data", ReadOnly: true}).
		Mount(storage.Mount{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPathKind: storage.DynamicSubPath, MountPath: "/ckpt"}).
		Advanced("object-store-memory", "2000000000").
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestYAMLRoundTrip(t *testing.T) {
	s := fullSpec(t)
	y, err := s.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := cluster.UnmarshalYAML(y)
	if err != nil {
		t.Fatalf("decode own YAML: %v\n%s", err, y)
	}
	if !reflect.DeepEqual(s, back) {
		t.Fatalf("round trip changed the spec:\n%+v\n%+v", s, back)
	}
	y2, _ := back.MarshalYAML()
	if string(y) != string(y2) {
		t.Fatalf("YAML differs after a round trip:\n%s\n---\n%s", y, y2)
	}
	// JSON is YAML too: the same decoder reads it.
	j := []byte(`{"name":"j","groups":["g"],"resourcePackage":"p","resourceGroup":"r","image":"ray-2.46.0-py310-cpu",
		"headGroup":{"name":"head","nodeSpec":"cu.4c8g"},"workerGroups":[{"name":"w","nodeSpec":"cu.4c8g","instances":{"min":0,"max":1}}]}`)
	js, err := cluster.UnmarshalYAML(j)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestYAMLUnknownFieldsNameFieldAndLine(t *testing.T) {
	cases := []struct {
		name, doc string
		wants     []string
	}{
		{"top-level typo", "name: a\ngroup: [g]\n", []string{`groups`, `line 2`, `unknown field "group"`}},
		{"nested typo", "name: a\nheadGroup:\n  name: head\n  nodespec: cu.4c8g\n", []string{`headGroup.nodespec`, `line 4`}},
		{"in a list", "workerGroups:\n- name: w\n  instances: {min: 1, maks: 2}\n", []string{`workerGroups[0].instances.maks`, `line 3`}},
		{"two at once", "nam: a\nimage: x\nimag: y\n", []string{`line 1`, `line 3`, `"nam"`, `"imag"`}},
		{"duplicate key", "name: a\nname: b\n", []string{`line 2`, `appears twice`}},
		{"wrong shape", "groups: g\n", []string{`groups`, `expected a list`}},
		{"alias", "a: &x [1]\ngroups: *x\n", []string{`aliases`}},
		{"wrong scalar type", "priority: high\n", []string{`priority`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cluster.UnmarshalYAML([]byte(tc.doc))
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("want ErrInvalid, got %v", err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) && !(w == "groups" && strings.Contains(err.Error(), "group")) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// YAML 1.1 readings never change a value: a string field, a map value
// and a map key get the text exactly as written (C1, C3, C7, C9, C10).
func TestYAMLKeepsScalarText(t *testing.T) {
	const doc = `name: X
groups: [X]
resourcePackage: X
resourceGroup: X
image: X
tags: {X: X}
headGroup:
  name: X
  nodeSpec: X
  envVars: {A: X}
  labels: {X: X}
workerGroups:
- name: X
  nodeSpec: X
  envVars:
    B: X
  labels:
    X: X
  instances: {min: 1, max: 2}
mounts:
- {type: COS, instance: X, subPath: X, mountPath: X}
advanced: {X: X}
`
	fields := func(s *cluster.Spec, x string) map[string]string {
		w := s.Workers[0]
		return map[string]string{
			"name": s.Name, "groups[0]": s.Groups[0], "resourcePackage": s.ResourcePackage, "resourceGroup": s.ResourceGroup,
			"image": s.Image, "tags[X]": s.Tags[x], "headGroup.name": s.Head.Name, "headGroup.nodeSpec": s.Head.NodeSpec,
			"headGroup.envVars[A]": s.Head.Env["A"], "headGroup.labels[X]": s.Head.Labels[x],
			"workerGroups[0].name": w.Name, "workerGroups[0].nodeSpec": w.NodeSpec, "workerGroups[0].envVars[B]": w.Env["B"],
			"workerGroups[0].labels[X]": w.Labels[x], "mounts[0].instance": s.Mounts[0].Instance,
			"mounts[0].subPath": s.Mounts[0].SubPath, "mounts[0].mountPath": s.Mounts[0].MountPath, "advanced[X]": s.Advanced[x],
		}
	}
	for _, x := range []string{"no", "yes", "off", "1.10", "0777", "0x1F", "0o17", "1_000", "+12", "1e3", ".inf", "2001-12-14", "1:20"} {
		t.Run(x, func(t *testing.T) {
			s, err := cluster.UnmarshalYAML([]byte(strings.ReplaceAll(doc, "X", x)))
			if err != nil {
				t.Fatal(err)
			}
			for path, got := range fields(s, x) {
				if got != x {
					t.Errorf("%s = %q, want %q as written", path, got, x)
				}
			}
			if len(s.Tags) != 1 || len(s.Head.Labels) != 1 || len(s.Advanced) != 1 {
				t.Errorf("a key changed: tags %v, labels %v, advanced %v", s.Tags, s.Head.Labels, s.Advanced)
			}
		})
	}
}

// Number and boolean fields take decimal numbers and true or false only:
// a spelling YAML readers disagree on is an error, never another value.
func TestYAMLNumbersAndBooleansAreUnambiguous(t *testing.T) {
	cases := []struct {
		name, doc string
		wants     []want
	}{
		{"priority 7", "priority: 7", nil},
		{"priority 07", "priority: 07", []want{{"priority", ""}}},
		{"priority 0x7", "priority: 0x7", []want{{"priority", ""}}},
		{"priority 0o7", "priority: 0o7", []want{{"priority", ""}}},
		{"priority quoted", `priority: "7"`, []want{{"priority", ""}}},
		{"max 1_000", "workerGroups: [{instances: {min: 1, max: 1_000}}]", []want{{"workerGroups[0].instances.max", ""}}},
		{"min 010", "workerGroups: [{instances: {min: 010, max: 20}}]", []want{{"workerGroups[0].instances.min", ""}}},
		{"highAvailability true", "headGroup: {highAvailability: true}", nil},
		{"highAvailability yes", "headGroup: {highAvailability: yes}", []want{{"headGroup.highAvailability", ""}}},
		{"highAvailability on", "headGroup: {highAvailability: on}", []want{{"headGroup.highAvailability", ""}}},
		{"readOnly no", "mounts: [{readOnly: no}]", []want{{"mounts[0].readOnly", ""}}},
		{"resource 1.10", "headGroup: {resources: {slot: 1.10}}", nil},
		{"resource 010", "headGroup: {resources: {slot: 010}}", []want{{"headGroup.resources[slot]", ""}}},
		{"resource .nan", "headGroup: {resources: {slot: .nan}}", []want{{"headGroup.resources[slot]", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cluster.UnmarshalYAML([]byte(tc.doc))
			checkProblems(t, err, tc.wants) // decoding problems have no rule ID
		})
	}
	s, err := cluster.UnmarshalYAML([]byte("priority: 7\nheadGroup: {highAvailability: True, resources: {slot: 1.10}}"))
	if err != nil || *s.Priority != 7 || !s.Head.HighAvailability || s.Head.Resources["slot"] != 1.1 {
		t.Fatalf("decoded %+v, %v", s, err)
	}
}

// A hostile document is refused for its size or its node count before it
// is parsed, with an error that names the limit.
func TestYAMLLimits(t *testing.T) {
	y, _ := fullSpec(t).MarshalYAML()
	cases := []struct {
		name, doc, want string // want: a part of the error; "" for none
	}{
		{"32 MiB flat list", "groups:\n" + strings.Repeat("- g\n", 8<<20), "at most 1048576 (1 MiB)"},
		{"64 MiB string", "name: " + strings.Repeat("a", 64<<20), "at most 1048576 (1 MiB)"},
		{"at the size limit", string(y) + "#" + strings.Repeat("x", cluster.MaxDocumentSize-len(y)-1), ""},
		{"one byte over", string(y) + "#" + strings.Repeat("x", cluster.MaxDocumentSize-len(y)), "at most 1048576 (1 MiB)"},
		{"over the node limit", "groups: [" + strings.Repeat("g,", cluster.MaxDocumentNodes) + "g]", "more than 20000 YAML nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, decode := range []func([]byte) error{
				func(b []byte) error { _, err := cluster.UnmarshalYAML(b); return err },
				func(b []byte) error { _, err := cluster.UnmarshalTemplateYAML(b); return err },
			} {
				err := decode([]byte(tc.doc))
				if tc.want == "" {
					if err != nil && !strings.Contains(err.Error(), "unknown field") {
						t.Fatal(err)
					}
					continue
				}
				if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want ErrInvalid saying %q", err, tc.want)
				}
			}
		})
	}
}

// FuzzDecodeValidate feeds arbitrary YAML to decode and Validate: neither
// may panic or hang. Its seeds run in the normal test suite.
func FuzzDecodeValidate(f *testing.F) {
	y, _ := fullSpec(f).MarshalYAML()
	for _, seed := range []string{string(y), "", "name: [", "a: &a [*a]", "workerGroups: [{instances: {max: -1}}]",
		"{}", "null", "- 1\n- 2", "headGroup: {envVars: {\"\": x}}", "name: " + strings.Repeat("集", 100),
		"a: &a [1,2]\nb: &b [*a,*a,*a]\nc: [*b,*b,*b]",
		string(y) + "#" + strings.Repeat("x", cluster.MaxDocumentSize-len(y)), // one byte over
		"groups: [" + strings.Repeat("g,", cluster.MaxDocumentNodes) + "g]"} { // over the node limit
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := cluster.UnmarshalYAML(data)
		if len(data) > cluster.MaxDocumentSize && (err == nil || !strings.Contains(err.Error(), "at most 1048576")) {
			t.Fatalf("a document of %d bytes was not refused for its size: %v", len(data), err)
		}
		if err != nil {
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("decode error is not ErrInvalid: %v", err)
			}
			return
		}
		if err := s.Validate(); err != nil && !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("validate error is not ErrInvalid: %v", err)
		}
		// Whatever decodes re-encodes and decodes to the same spec.
		out, err := s.MarshalYAML()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cluster.UnmarshalYAML(out); err != nil {
			t.Fatalf("re-decoding own output: %v\n%s", err, out)
		}
	})
}

// BenchmarkUnmarshalYAML measures decoding a full spec, and refusing
// hostile documents: a 32 MiB list, a 64 MiB string, a list at the node
// limit.
func BenchmarkUnmarshalYAML(b *testing.B) {
	y, _ := fullSpec(b).MarshalYAML()
	cases := []struct {
		name  string
		doc   []byte
		valid bool
	}{
		{"full spec", y, true},
		{"flat list 32 MiB", []byte("groups:\n" + strings.Repeat("- g\n", 8<<20)), false},
		{"string 64 MiB", []byte("name: " + strings.Repeat("a", 64<<20)), false},
		{"list at the node limit", []byte("groups: [" + strings.Repeat("g,", cluster.MaxDocumentNodes-2) + "g]"), false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cluster.UnmarshalYAML(tc.doc); (err == nil) != tc.valid {
					b.Fatal(err)
				}
			}
		})
	}
}
