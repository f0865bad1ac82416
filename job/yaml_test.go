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

// FuzzConfigDecodeValidate: arbitrary YAML never panics decode + Validate.
func FuzzConfigDecodeValidate(f *testing.F) {
	y, _ := onDemandConfig().MarshalYAML()
	for _, s := range []string{string(y), "", "onDemand: {environment: {workerGroups: [{}]}}", "package: {local: a, cos: b}", "runtimeEnv: {pip: [\"\"], conda: [x]}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := job.UnmarshalYAML(data)
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
