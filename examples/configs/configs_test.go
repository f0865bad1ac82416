// Package configs_test checks the sample configs in this directory: every
// file is read with the SDK's strict loader, validated, and accepted end to
// end on the memory backend. A new file is covered by being here; its name
// says what it is (cluster-*, job-*, template-*).
package configs_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// sampleKind is how the files of one name prefix are loaded, validated and
// accepted on a platform.
type sampleKind struct {
	prefix string
	// load decodes a file with the SDK's strict loader.
	load func([]byte) (any, error)
	// validate is the value's Validate.
	validate func(any) error
	// accept creates the value on fx and checks the platform took it.
	accept func(t *testing.T, fx *fixture, v any)
}

var sampleKinds = []sampleKind{{
	prefix:   "cluster-",
	load:     func(b []byte) (any, error) { return cluster.UnmarshalYAML(b) },
	validate: func(v any) error { return v.(*cluster.Spec).Validate() },
	accept:   acceptCluster,
}, {
	prefix:   "job-",
	load:     func(b []byte) (any, error) { return job.UnmarshalYAML(b) },
	validate: func(v any) error { return v.(*job.Config).Validate() },
	accept:   acceptJob,
}, {
	prefix:   "template-",
	load:     func(b []byte) (any, error) { return cluster.UnmarshalTemplateYAML(b) },
	validate: func(v any) error { return v.(*cluster.Template).Validate() },
	accept:   acceptTemplate,
}}

// sample is one file of the directory, loaded.
type sample struct {
	path string
	kind sampleKind
	v    any
}

// loadSamples reads every file under this directory but the Go files,
// each with the loader its name prefix picks, failing on a file no
// loader takes and on a file its loader refuses.
func loadSamples(t *testing.T) []sample {
	t.Helper()
	var out []sample
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
			return err
		}
		i := slices.IndexFunc(sampleKinds, func(k sampleKind) bool { return strings.HasPrefix(d.Name(), k.prefix) })
		if i < 0 {
			t.Errorf("%s: no loader for this file: name a sample cluster-*.yaml, job-*.yaml or template-*.yaml", path)
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		v, err := sampleKinds[i].load(data)
		if err != nil {
			t.Errorf("%s: the strict loader refuses it:\n%s", path, problems(err))
			return nil
		}
		out = append(out, sample{path: path, kind: sampleKinds[i], v: v})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no sample configs found")
	}
	return out
}

// problems lists err's field errors one a line, or err itself.
func problems(err error) string {
	fes := errs.Fields(err)
	if len(fes) == 0 {
		return "  " + err.Error()
	}
	var b strings.Builder
	for _, fe := range fes {
		b.WriteString("  " + fe.Error() + "\n")
	}
	return b.String()
}

// TestSampleConfigs loads every sample strictly, validates it, and has a
// platform on the memory backend accept it: a cluster is created and
// started, a template saved, a job config saved and run to success.
func TestSampleConfigs(t *testing.T) {
	for _, s := range loadSamples(t) {
		t.Run(s.path, func(t *testing.T) {
			if err := s.kind.validate(s.v); err != nil {
				t.Fatalf("Validate:\n%s", problems(err))
			}
			fx := newFixture(t)
			s.kind.accept(t, fx, s.v)
		})
	}
}

// TestSampleConfigsCoverShapes: the samples show every shape a user starts
// from, so that removing one is noticed.
func TestSampleConfigsCoverShapes(t *testing.T) {
	catalog := quota.DefaultCatalog()
	gpu := func(env cluster.Environment) bool {
		for _, w := range env.Workers {
			if spec, ok := catalog.Lookup(w.NodeSpec); ok && spec.Kind == quota.GU {
				return true
			}
		}
		return false
	}
	autoscaling := func(env cluster.Environment) bool {
		return slices.ContainsFunc(env.Workers, func(w cluster.WorkerGroup) bool { return w.Instances.Autoscaling() })
	}
	envVars := func(env cluster.Environment) bool {
		return len(env.Head.Env) > 0 || slices.ContainsFunc(env.Workers, func(w cluster.WorkerGroup) bool { return len(w.Env) > 0 })
	}
	seen := map[string]bool{}
	for _, s := range loadSamples(t) {
		switch v := s.v.(type) {
		case *cluster.Spec:
			seen["a cluster with a high-availability head"] = seen["a cluster with a high-availability head"] || v.Head.HighAvailability
			seen["a cluster with GPU workers"] = seen["a cluster with GPU workers"] || gpu(v.Environment)
			seen["a cluster with autoscaling workers"] = seen["a cluster with autoscaling workers"] || autoscaling(v.Environment)
			seen["a cluster with mounts"] = seen["a cluster with mounts"] || len(v.Mounts) > 0
			seen["a cluster with environment variables"] = seen["a cluster with environment variables"] || envVars(v.Environment)
		case *job.Config:
			seen["a job on "+string(v.Mode())] = true
			seen["a job with a runtime environment"] = seen["a job with a runtime environment"] || !v.Runtime.IsZero()
			if v.OnDemand != nil && v.OnDemand.Priority != nil {
				seen["an on-demand job with a priority"] = true
			}
		case *cluster.Template:
			seen["a template"] = true
		}
	}
	for _, want := range []string{
		"a cluster with a high-availability head", "a cluster with GPU workers", "a cluster with autoscaling workers",
		"a cluster with mounts", "a cluster with environment variables",
		"a job on " + string(job.ClusterMode), "a job on " + string(job.GroupMode), "a job on " + string(job.OnDemandMode),
		"a job with a runtime environment", "an on-demand job with a priority", "a template",
	} {
		if !seen[want] {
			t.Errorf("no sample shows %s", want)
		}
	}
}

// fixture is a platform on the memory backend with what the samples name:
// the resource groups (registered as they are first named), a cluster
// group, and a running cluster in it.
type fixture struct {
	m       *dlctest.Memory
	ctx     context.Context
	group   string // the cluster group's id, for every group a sample names
	cluster string // a running cluster's id, for the cluster a job sample names
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	t.Cleanup(m.Close)
	fx := &fixture{m: m, ctx: dlc.WithUser(t.Context(), "alice")}
	grp, err := m.Client.Groups().Create(fx.ctx, "samples")
	if err != nil {
		t.Fatal(err)
	}
	fx.group = grp.ID
	spec, err := dlc.NewCluster("base").Groups(grp.ID).Resources("pkg-base", "rg-base").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	if err != nil {
		t.Fatal(err)
	}
	fx.register(t, spec.ResourcePackage, spec.ResourceGroup)
	cl := fx.createAndStart(t, spec)
	fx.cluster = cl.ID
	return fx
}

// register registers resource group id of package pkg, with room for any
// sample (again: the same capacity, no change).
func (fx *fixture) register(t *testing.T, pkg, id string) {
	t.Helper()
	if _, err := fx.m.Client.ResourceGroups().Register(fx.ctx, quota.Group{ID: id, Package: pkg,
		Capacity: quota.Resources{MilliCPU: 2000 * 1000, Memory: 16384 * quota.GiB, GPU: 128}}); err != nil {
		t.Fatalf("registering resource group %s: %v", id, err)
	}
}

func (fx *fixture) settle() { fx.m.Settle(100*time.Millisecond, 10000) }

func (fx *fixture) createAndStart(t *testing.T, spec *cluster.Spec) *cluster.Cluster {
	t.Helper()
	c := fx.m.Client.Clusters()
	cl, err := c.Create(fx.ctx, spec)
	if err != nil {
		t.Fatalf("Clusters().Create:\n%s", problems(err))
	}
	fx.settle()
	if cl, err = c.Get(fx.ctx, cl.ID); err != nil || cl.State != cluster.Created {
		t.Fatalf("after create: %+v, %v; want created", cl, err)
	}
	if _, err := c.Start(fx.ctx, cl.ID); err != nil {
		t.Fatalf("Clusters().Start: %v", err)
	}
	fx.settle()
	if cl, err = c.Get(fx.ctx, cl.ID); err != nil || cl.State != cluster.Running {
		t.Fatalf("after start: %+v, %v; want running", cl, err)
	}
	return cl
}

// acceptCluster creates and starts the sample cluster, in the fixture's
// group instead of the groups it names (ids a platform makes).
func acceptCluster(t *testing.T, fx *fixture, v any) {
	spec := v.(*cluster.Spec).DeepCopy()
	for i := range spec.Groups {
		spec.Groups[i] = fx.group
	}
	spec.Groups = slices.Compact(spec.Groups)
	fx.register(t, spec.ResourcePackage, spec.ResourceGroup)
	cl := fx.createAndStart(t, spec)
	t.Logf("cluster %s (%s) running, %d workers reserved", cl.ID, cl.Spec.Name, sum(cl.Replicas))
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// acceptTemplate saves the sample template and reads it back.
func acceptTemplate(t *testing.T, fx *fixture, v any) {
	tmpl := v.(*cluster.Template)
	if err := fx.m.Client.Templates().Save(fx.ctx, tmpl.DeepCopy()); err != nil {
		t.Fatalf("Templates().Save:\n%s", problems(err))
	}
	if _, err := fx.m.Client.Templates().Get(fx.ctx, tmpl.Name); err != nil {
		t.Fatalf("Templates().Get: %v", err)
	}
}

// acceptJob saves the sample job config, pointed at the fixture's cluster
// or group instead of the ids it names, and runs it to success.
func acceptJob(t *testing.T, fx *fixture, v any) {
	cfg := v.(*job.Config).DeepCopy()
	switch cfg.Mode() {
	case job.ClusterMode:
		cfg.Cluster = fx.cluster
	case job.GroupMode:
		cfg.Group = fx.group
	case job.OnDemandMode:
		fx.register(t, cfg.OnDemand.ResourcePackage, cfg.OnDemand.ResourceGroup)
	}
	rec, err := fx.m.Client.Jobs().Create(fx.ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		t.Fatalf("Jobs().Save:\n%s", problems(err))
	}
	run, err := fx.m.Client.Runs().Create(fx.ctx, rec.ID, dlc.RunOptions{})
	if err != nil {
		t.Fatalf("Runs().Create: %v", err)
	}
	fx.settle()
	if run, err = fx.m.Client.Runs().Get(fx.ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if run.State != job.Succeeded {
		t.Fatalf("run %s: %s %s %s; want succeeded", run.ID, run.State, run.WaitReason, run.Message)
	}
	t.Logf("job %s (%s) saved; its run %s succeeded on %s", rec.ID, cfg.Mode(), run.ID, run.ClusterID)
}
