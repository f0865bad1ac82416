package job_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/storage"
)

func TestConfigYAMLRoundTrip(t *testing.T) {
	c := onDemandConfig()
	c.Tags = map[string]string{"team": "cv"}
	c.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/ckpt"}}
	c.Runtime = job.RuntimeEnv{Pip: []string{"torch>=2.0"}, EnvVars: map[string]string{"A": "1"}}
	c.Advanced = map[string]string{"ttl-seconds-after-finished": "60"}
	y, err := c.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := job.UnmarshalYAML(y)
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	if !reflect.DeepEqual(c, back) {
		t.Fatalf("round trip changed the config:\n%+v\n%+v", c, back)
	}
	if y2, _ := back.MarshalYAML(); string(y2) != string(y) {
		t.Fatalf("YAML differs:\n%s\n---\n%s", y, y2)
	}
	_, err = job.UnmarshalYAML([]byte("name: a\nonDemand:\n  resourceGroup: rg\n  priorty: 3\n"))
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "onDemand.priorty") || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("unknown field error = %v", err)
	}
}

// YAML 1.1 readings never change a value: a string field, a map value
// and a map key get the text exactly as written (J1, J4, J5, J7, J9–J11).
func TestYAMLKeepsScalarText(t *testing.T) {
	const doc = `name: X
cluster: X
tags: {X: X}
package: {cos: X}
entrypoint: X
onDemand:
  resourcePackage: X
  resourceGroup: X
  environment:
    image: X
    headGroup: {name: X, nodeSpec: X, envVars: {A: X}, labels: {X: X}}
    workerGroups:
    - name: X
      nodeSpec: X
      envVars:
        B: X
      instances: {min: 1, max: 2}
mounts:
- {type: CFS, instance: X, subPath: X, mountPath: X}
runtimeEnv:
  pip: [X]
  envVars: {C: X}
  container: X
advanced:
  X: X
`
	fields := func(c *job.Config, x string) map[string]string {
		od := c.OnDemand
		return map[string]string{
			"name": c.Name, "cluster": c.Cluster, "tags[X]": c.Tags[x], "package.cos": c.Package.COS, "entrypoint": c.Entrypoint,
			"onDemand.resourcePackage": od.ResourcePackage, "onDemand.resourceGroup": od.ResourceGroup,
			"onDemand.environment.image": od.Environment.Image, "onDemand.environment.headGroup.name": od.Environment.Head.Name,
			"onDemand.environment.headGroup.envVars[A]":       od.Environment.Head.Env["A"],
			"onDemand.environment.headGroup.labels[X]":        od.Environment.Head.Labels[x],
			"onDemand.environment.workerGroups[0].name":       od.Environment.Workers[0].Name,
			"onDemand.environment.workerGroups[0].envVars[B]": od.Environment.Workers[0].Env["B"],
			"mounts[0].instance":                              c.Mounts[0].Instance, "mounts[0].subPath": c.Mounts[0].SubPath,
			"runtimeEnv.pip[0]": c.Runtime.Pip[0], "runtimeEnv.envVars[C]": c.Runtime.EnvVars["C"],
			"runtimeEnv.container": c.Runtime.Container, "advanced[X]": c.Advanced[x],
		}
	}
	for _, x := range []string{"no", "yes", "off", "1.10", "0777", "0x1F", "0o17", "1_000", "+12", "1e3", ".inf", "2001-12-14", "1:20"} {
		t.Run(x, func(t *testing.T) {
			c, err := job.UnmarshalYAML([]byte(strings.ReplaceAll(doc, "X", x)))
			if err != nil {
				t.Fatal(err)
			}
			for path, got := range fields(c, x) {
				if got != x {
					t.Errorf("%s = %q, want %q as written", path, got, x)
				}
			}
			if len(c.Tags) != 1 || len(c.Advanced) != 1 {
				t.Errorf("a key changed: tags %v, advanced %v", c.Tags, c.Advanced)
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
		{"priority 7", "onDemand: {priority: 7}", nil},
		{"priority 07", "onDemand: {priority: 07}", []want{{"onDemand.priority", ""}}},
		{"priority 0x7", "onDemand: {priority: 0x7}", []want{{"onDemand.priority", ""}}},
		{"priority quoted", `onDemand: {priority: "7"}`, []want{{"onDemand.priority", ""}}},
		{"max 0x10", "onDemand: {environment: {workerGroups: [{instances: {max: 0x10}}]}}", []want{{"onDemand.environment.workerGroups[0].instances.max", ""}}},
		{"highAvailability no", "onDemand: {environment: {headGroup: {highAvailability: no}}}", []want{{"onDemand.environment.headGroup.highAvailability", ""}}},
		{"readOnly yes", "mounts: [{readOnly: yes}]", []want{{"mounts[0].readOnly", ""}}},
		{"readOnly true", "mounts: [{readOnly: true}]", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := job.UnmarshalYAML([]byte(tc.doc))
			checkProblems(t, err, tc.wants) // decoding problems have no rule ID
		})
	}
}

// A hostile document is refused for its size or its node count before it
// is parsed, with an error that names the limit.
func TestYAMLLimits(t *testing.T) {
	y, _ := onDemandConfig().MarshalYAML()
	cases := []struct {
		name, doc, want string // want: a part of the error; "" for none
	}{
		{"32 MiB flat list", "runtimeEnv:\n  pip:\n" + strings.Repeat("  - p\n", 6<<20), "at most 1048576 (1 MiB)"},
		{"64 MiB string", "entrypoint: " + strings.Repeat("a", 64<<20), "at most 1048576 (1 MiB)"},
		{"at the size limit", string(y) + "#" + strings.Repeat("x", job.MaxDocumentSize-len(y)-1), ""},
		{"one byte over", string(y) + "#" + strings.Repeat("x", job.MaxDocumentSize-len(y)), "at most 1048576 (1 MiB)"},
		{"over the node limit", "runtimeEnv: {pip: [" + strings.Repeat("p,", job.MaxDocumentNodes) + "p]}", "more than 20000 YAML nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := job.UnmarshalYAML([]byte(tc.doc))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalid saying %q", err, tc.want)
			}
		})
	}
}

// FuzzConfigDecodeValidate: arbitrary YAML never panics decode + Validate.
func FuzzConfigDecodeValidate(f *testing.F) {
	y, _ := onDemandConfig().MarshalYAML()
	for _, s := range []string{string(y), "", "onDemand: {environment: {workerGroups: [{}]}}", "package: {local: a, cos: b}", "runtimeEnv: {pip: [\"\"], conda: [x]}",
		string(y) + "#" + strings.Repeat("x", job.MaxDocumentSize-len(y)),            // one byte over
		"runtimeEnv: {pip: [" + strings.Repeat("p,", job.MaxDocumentNodes) + "p]}"} { // over the node limit
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := job.UnmarshalYAML(data)
		if len(data) > job.MaxDocumentSize && (err == nil || !strings.Contains(err.Error(), "at most 1048576")) {
			t.Fatalf("a document of %d bytes was not refused for its size: %v", len(data), err)
		}
		if err != nil {
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("decode error is not ErrInvalid: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil && !errors.Is(err, errs.ErrInvalid) {
			t.Fatalf("validate error is not ErrInvalid: %v", err)
		}
	})
}
