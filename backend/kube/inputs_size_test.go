package kube_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/internal/check"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/storage"
)

// worst is a string of n bytes that JSON escapes the most: '<' becomes
// \u003c, six bytes.
func worst(n int) string { return strings.Repeat("<", n) }

// worstGroup fills a node group to every limit.
func worstGroup(name string) cluster.NodeGroup {
	g := cluster.NodeGroup{Name: name, NodeSpec: "cu.4c16g", Env: map[string]string{},
		Labels: map[string]string{}, Resources: map[string]float64{}}
	// Values near the value limit, with two-byte names, fill the group's
	// byte budget.
	for i := range check.MaxEnvBytes / check.MaxEnvValueLen {
		g.Env[fmt.Sprintf("V%d", i)] = worst(check.MaxEnvValueLen - 2)
	}
	prefix := strings.Repeat("a", 200) + "." + strings.Repeat("b", 52)
	for i := range check.MaxNodeLabels {
		g.Labels[fmt.Sprintf("%s/%s%02d", prefix, strings.Repeat("n", 61), i)] = strings.Repeat("v", 63)
	}
	for i := range check.MaxLogicalResources {
		g.Resources[fmt.Sprintf("%s%03d", strings.Repeat("r", 125), i)] = 1e300
	}
	return g
}

// worstEnvironment has the most node groups, each at every limit.
func worstEnvironment() cluster.Environment {
	e := cluster.Environment{Image: "ccr.ccs.tencentyun.com/" + strings.Repeat("a", 200) + ":" + strings.Repeat("t", 30),
		Head: cluster.HeadGroup{NodeGroup: worstGroup("h" + strings.Repeat("x", 62))}}
	for i := range cluster.MaxWorkerGroups {
		e.Workers = append(e.Workers, cluster.WorkerGroup{NodeGroup: worstGroup(fmt.Sprintf("w%d%s", i, strings.Repeat("x", 61))),
			Instances: cluster.Range(0, 2)})
	}
	return e
}

func worstTags() map[string]string {
	t := map[string]string{}
	for i := range check.MaxTags {
		t[fmt.Sprintf("%s%02d", worst(check.MaxTagKeyLen-2), i)] = worst(check.MaxTagValueLen)
	}
	return t
}

func worstAdvanced() map[string]string {
	a := map[string]string{}
	for i := range check.MaxAdvancedBytes / (check.MaxAdvancedValue + 4) {
		a[fmt.Sprintf("k%03d", i)] = worst(check.MaxAdvancedValue)
	}
	return a
}

func worstMounts() []storage.Mount {
	var ms []storage.Mount
	for i := range storage.MaxMounts {
		ms = append(ms, storage.Mount{Type: storage.CFS, Instance: "cfs-" + strings.Repeat("1", 16),
			SubPath: worst(storage.MaxMountPathLen), MountPath: fmt.Sprintf("/m%02d/%s", i, worst(storage.MaxMountPathLen-5))})
	}
	return ms
}

// TestLargestValidSpecFits: the largest cluster spec and job config that
// validate — every list and map at its count limit, every string at its
// length limit, in the characters JSON escapes most — fit well within one
// stored object (etcd's limit is 1.5 MiB), stored and rendered.
func TestLargestValidSpecFits(t *testing.T) {
	const budget = 768 << 10 // half of etcd's 1.5 MiB: room for metadata, status and bookkeeping
	spec := cluster.Spec{Name: strings.Repeat("集", cluster.MaxNameLen), Priority: new(5), Tags: worstTags(),
		ResourcePackage: strings.Repeat("p", 63), ResourceGroup: strings.Repeat("g", 63),
		Environment: worstEnvironment(), Mounts: worstMounts(), Advanced: worstAdvanced()}
	for i := range cluster.MaxGroups {
		spec.Groups = append(spec.Groups, fmt.Sprintf("%s%02d", strings.Repeat("g", 61), i))
	}
	if err := spec.Validate(); err != nil {
		t.Fatalf("the largest spec does not validate: %v", err)
	}
	cfg := job.Config{Name: worst(job.MaxNameLen), Tags: worstTags(),
		OnDemand:   &job.OnDemand{ResourcePackage: spec.ResourcePackage, ResourceGroup: spec.ResourceGroup, Environment: worstEnvironment()},
		Package:    storage.COSPackage("cos://jobs-1250000000/" + strings.Repeat("k", storage.MaxPackageRefLen-27) + ".zip"),
		Entrypoint: worst(job.MaxEntrypointLen), Mounts: worstMounts(), Advanced: worstAdvanced(),
		Runtime: job.RuntimeEnv{Pip: make([]string, job.MaxDependencies), EnvVars: worstGroup("x").Env}}
	for i := range cfg.Runtime.Pip {
		cfg.Runtime.Pip[i] = "x" + worst(job.MaxDependencyLen-1)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the largest config does not validate: %v", err)
	}
	cl := &cluster.Cluster{ID: "cls-" + strings.Repeat("c", 59), State: cluster.Running, Spec: spec,
		Live: &cluster.Live{ResourceGroup: spec.ResourceGroup, Environment: *spec.Environment.DeepCopy()}}
	run := &job.Run{ID: "run-" + strings.Repeat("r", 59), JobID: "job-" + strings.Repeat("j", 59), Config: cfg}
	opts := jobOpts()
	opts.VolumeResolver = kube.PVCResolver{Claims: map[string]string{}}
	rc, err := kube.RenderRayCluster(cl, kube.RenderOptions{VolumeResolver: opts.VolumeResolver})
	if err != nil {
		t.Fatalf("RenderRayCluster: %v", err)
	}
	rj, err := kube.RenderRayJob(run, opts)
	if err != nil {
		t.Fatalf("RenderRayJob: %v", err)
	}
	for name, v := range map[string]any{
		"cluster (spec and live environment)": cl, "run": run, "job record": &job.Record{Config: cfg},
		"RayCluster": rc, "RayJob": rj,
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes (%.0f%% of etcd's 1.5 MiB)", name, len(b), float64(len(b))*100/(1.5*(1<<20)))
		if len(b) > budget {
			t.Errorf("%s is %d bytes stored, over %d", name, len(b), budget)
		}
	}
}
