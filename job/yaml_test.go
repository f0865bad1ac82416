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
		{"over the node limit", "runtimeEnv: {pip: [" + strings.Repeat("p,", job.MaxDocumentNodes) + "p]}", "more than 200000 YAML nodes"},
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
