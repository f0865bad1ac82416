package cluster_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
	"github.com/aidlc/dlc/internal/fieldtest"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/storage"
)

// validSpec returns a spec that passes every rule; each case breaks one.
func validSpec() *cluster.Spec {
	s, err := cluster.NewBuilder("训练集群_01").
		Groups("grp-a").
		Resources("pkg-1", "rg-1").
		Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").
		WorkerGroup("cpu", "cu.8c32g", 1, 4).
		Build()
	if err != nil {
		panic(err)
	}
	return s
}

type want = fieldtest.Want

var checkProblems = fieldtest.Check

// envOf returns n variables whose values have size bytes.
func envOf(n, size int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("V%03d", i)] = strings.Repeat("x", max(size-4, 0))
	}
	return m
}

// secretsOf returns n variables from Secrets.
func secretsOf(n int) map[string]cluster.SecretKeyRef {
	m := map[string]cluster.SecretKeyRef{}
	for i := range n {
		m[fmt.Sprintf("S%03d", i)] = cluster.SecretKeyRef{Secret: "dlc-env-rg-1.s", Key: "k"}
	}
	return m
}

// mapOf returns n keys k_000… with value v.
func mapOf(n int, v string) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("k_%03d", i)] = v
	}
	return m
}

func TestSpecValidate(t *testing.T) {
	long := strings.Repeat("集", 65)
	cases := []struct {
		name  string
		edit  func(*cluster.Spec)
		wants []want
	}{
		{"valid", func(*cluster.Spec) {}, nil},
		// C1
		{"C1 valid chinese letters digits underscore", func(s *cluster.Spec) { s.Name = "集群_A1" }, nil},
		{"C1 valid 64 characters", func(s *cluster.Spec) { s.Name = strings.Repeat("集", 64) }, nil},
		{"C1 required", func(s *cluster.Spec) { s.Name = "" }, []want{{"name", "C1"}}},
		{"C1 too long", func(s *cluster.Spec) { s.Name = long }, []want{{"name", "C1"}}},
		{"C1 hyphen not allowed", func(s *cluster.Spec) { s.Name = "my-cluster" }, []want{{"name", "C1"}}},
		{"C1 space not allowed", func(s *cluster.Spec) { s.Name = "my cluster" }, []want{{"name", "C1"}}},
		// C2
		{"C2 valid two groups", func(s *cluster.Spec) { s.Groups = []string{"a", "b"} }, nil},
		{"C2 required", func(s *cluster.Spec) { s.Groups = nil }, []want{{"groups", "C2"}}},
		{"C2 duplicate", func(s *cluster.Spec) { s.Groups = []string{"a", "a"} }, []want{{"groups[1]", "C2"}}},
		{"C2 empty id", func(s *cluster.Spec) { s.Groups = []string{"a", " "} }, []want{{"groups[1]", "C2"}}},
		{"C2 too many groups", func(s *cluster.Spec) {
			s.Groups = nil
			for k := range mapOf(cluster.MaxGroups+1, "") {
				s.Groups = append(s.Groups, strings.ToLower(strings.ReplaceAll(k, "_", "-")))
			}
		}, []want{{"groups", "C2"}}},
		// C3
		{"C3 valid priority 9", func(s *cluster.Spec) { s.Priority = new(9) }, nil},
		{"C3 valid priority 1", func(s *cluster.Spec) { s.Priority = new(1) }, nil},
		{"C3 unset priority is default", func(s *cluster.Spec) { s.Priority = nil }, nil},
		{"C3 explicit priority 0", func(s *cluster.Spec) { s.Priority = new(0) }, []want{{"priority", "C3"}}},
		{"C3 priority 10", func(s *cluster.Spec) { s.Priority = new(10) }, []want{{"priority", "C3"}}},
		{"C3 priority -1", func(s *cluster.Spec) { s.Priority = new(-1) }, []want{{"priority", "C3"}}},
		{"C3 valid tags", func(s *cluster.Spec) { s.Tags = map[string]string{"team": "推荐", "env": ""} }, nil},
		{"C3 empty tag key", func(s *cluster.Spec) { s.Tags = map[string]string{"": "x"} }, []want{{"tags[]", "C3"}}},
		{"C3 tags in reserved prefixes", func(s *cluster.Spec) {
			s.Tags = map[string]string{"dlc.aidlc.io/cluster-id": "x", "Kubernetes.io/name": "x", "node.k8s.io/x": "x", "ray.io/node-type": "x", "team.io/x": "ok"}
		}, []want{{"tags[Kubernetes.io/name]", "C3"}, {"tags[dlc.aidlc.io/cluster-id]", "C3"}, {"tags[node.k8s.io/x]", "C3"}, {"tags[ray.io/node-type]", "C3"}}},
		{"C3 tag value too long", func(s *cluster.Spec) { s.Tags = map[string]string{"k": strings.Repeat("v", 256)} }, []want{{"tags[k]", "C3"}}},
		// C4
		{"C4 resource package required", func(s *cluster.Spec) { s.ResourcePackage = "" }, []want{{"resourcePackage", "C4"}}},
		{"C4 resource group required", func(s *cluster.Spec) { s.ResourceGroup = "" }, []want{{"resourceGroup", "C4"}}},
		{"C4 resource group id of 63", func(s *cluster.Spec) { s.ResourceGroup = strings.Repeat("r", 63) }, nil},
		{"C4 resource group id of 64", func(s *cluster.Spec) { s.ResourceGroup = strings.Repeat("r", 64) }, []want{{"resourceGroup", "C4"}}},
		{"C4 resource group id not a DNS label", func(s *cluster.Spec) { s.ResourceGroup = `rg"}{x` }, []want{{"resourceGroup", "C4"}}},
		{"C4 resource group id upper case", func(s *cluster.Spec) { s.ResourceGroup = "RG-1" }, []want{{"resourceGroup", "C4"}}},
		{"C4 resource package id not a DNS label", func(s *cluster.Spec) { s.ResourcePackage = "pkg_1" }, []want{{"resourcePackage", "C4"}}},
		{"C2 group id too long", func(s *cluster.Spec) { s.Groups = []string{strings.Repeat("g", 64<<10)} }, []want{{"groups[0]", "C2"}}},
		{"C2 group id not a DNS label", func(s *cluster.Spec) { s.Groups = []string{"grp-a", "grp a"} }, []want{{"groups[1]", "C2"}}},
		// C5
		{"C5 valid custom registry", func(s *cluster.Spec) { s.Image = "ccr.ccs.tencentyun.com/team/ray:2.46.0" }, nil},
		{"C5 valid registry with port and digest", func(s *cluster.Spec) {
			s.Image = "registry.local:5000/ml/ray@sha256:" + strings.Repeat("ab", 32)
		}, nil},
		{"C5 image required", func(s *cluster.Spec) { s.Image = "" }, []want{{"image", "C5"}}},
		{"C5 unknown built-in", func(s *cluster.Spec) { s.Image = "ray-9.9" }, []want{{"image", "C5"}}},
		{"C5 no registry host", func(s *cluster.Spec) { s.Image = "team/ray:2.46.0" }, []want{{"image", "C5"}}},
		{"C5 bad reference", func(s *cluster.Spec) { s.Image = "ccr.ccs.tencentyun.com/Team/ray:bad tag" }, []want{{"image", "C5"}}},
		// C7
		{"C7 valid HA head with env labels resources", func(s *cluster.Spec) {
			s.Head.HighAvailability = true
			s.Head.Env = map[string]string{"OMP_NUM_THREADS": "4"}
			s.Head.Labels = map[string]string{"zone": "gz-3", "example.com/tier": "a"}
			s.Head.Resources = map[string]float64{"accelerator_type:A10": 1}
		}, nil},
		{"C7 head name required", func(s *cluster.Spec) { s.Head.Name = "" }, []want{{"headGroup.name", "C7"}}},
		{"C7 head name syntax", func(s *cluster.Spec) { s.Head.Name = "Head_1" }, []want{{"headGroup.name", "C7"}}},
		{"C7 head node spec required", func(s *cluster.Spec) { s.Head.NodeSpec = "" }, []want{{"headGroup.nodeSpec", "C7"}}},
		{"C7 head unknown node spec", func(s *cluster.Spec) { s.Head.NodeSpec = "cu.1c1g" }, []want{{"headGroup.nodeSpec", "C7"}}},
		{"C7 env var name", func(s *cluster.Spec) { s.Head.Env = map[string]string{"1BAD": "x"} }, []want{{"headGroup.envVars[1BAD]", "C7"}}},
		// Bounds of a node group's environment (check.MaxEnv*).
		{"C7 env at every limit", func(s *cluster.Spec) {
			s.Head.Env = envOf(check.MaxEnvVars/2, check.MaxEnvBytes/check.MaxEnvVars)
			s.Head.SecretEnv = secretsOf(check.MaxEnvVars / 2)
		}, nil},
		{"C7 env value of 800 KB", func(s *cluster.Spec) { s.Head.Env = map[string]string{"BIG": strings.Repeat("x", 800_000)} },
			[]want{{"headGroup.envVars[BIG]", "C7"}, {"headGroup.envVars", "C7"}}},
		{"C7 env value one byte over", func(s *cluster.Spec) {
			s.Head.Env = map[string]string{"V": strings.Repeat("x", check.MaxEnvValueLen+1)}
		},
			[]want{{"headGroup.envVars[V]", "C7"}}},
		{"C7 env name too long", func(s *cluster.Spec) { s.Head.Env = map[string]string{strings.Repeat("N", check.MaxEnvNameLen+1): ""} },
			[]want{{"headGroup.envVars[" + strings.Repeat("N", check.MaxEnvNameLen+1) + "]", "C7"}}},
		{"C7 too many env vars", func(s *cluster.Spec) { s.Workers[0].Env = envOf(check.MaxEnvVars+1, 0) },
			[]want{{"workerGroups[0].envVars", "C8"}}},
		{"C7 env and secrets together too many", func(s *cluster.Spec) {
			s.Head.Env, s.Head.SecretEnv = envOf(check.MaxEnvVars/2+1, 0), secretsOf(check.MaxEnvVars/2)
		}, []want{{"headGroup.envVars", "C7"}}},
		{"C7 env total over", func(s *cluster.Spec) { s.Head.Env = envOf(4, check.MaxEnvValueLen) }, []want{{"headGroup.envVars", "C7"}}},
		{"C7 env value invalid UTF-8", func(s *cluster.Spec) { s.Head.Env = map[string]string{"V": "a\xffb"} }, []want{{"headGroup.envVars[V]", "C7"}}},
		{"C7 too many labels", func(s *cluster.Spec) { s.Head.Labels = mapOf(check.MaxNodeLabels+1, "v") }, []want{{"headGroup.labels", "C7"}}},
		{"C7 too many logical resources", func(s *cluster.Spec) {
			s.Head.Resources = map[string]float64{}
			for k := range mapOf(check.MaxLogicalResources+1, "") {
				s.Head.Resources[k] = 1
			}
		}, []want{{"headGroup.resources", "C7"}}},
		// Variables from Secrets.
		{"C7 valid secret env", func(s *cluster.Spec) {
			s.Head.SecretEnv = map[string]cluster.SecretKeyRef{"TOKEN": {Secret: "dlc-env-rg-1.team-a", Key: "hf_token.txt"}}
		}, nil},
		{"C7 another resource group's secret", func(s *cluster.Spec) {
			s.Head.SecretEnv = map[string]cluster.SecretKeyRef{"TOKEN": {Secret: "dlc-env-rg-2.hf", Key: "k"}}
		}, []want{{"headGroup.secretEnvVars[TOKEN].secret", "C7"}}},
		{"C8 a secret of a resource group whose id extends ours", func(s *cluster.Spec) {
			s.Workers[0].SecretEnv = map[string]cluster.SecretKeyRef{"TOKEN": {Secret: "dlc-env-rg-1-b.hf", Key: "k"}}
		}, []want{{"workerGroups[0].secretEnvVars[TOKEN].secret", "C8"}}},
		{"C7 a secret of no resource group", func(s *cluster.Spec) {
			s.Head.SecretEnv = map[string]cluster.SecretKeyRef{"TOKEN": {Secret: "dlc-env-hf", Key: "k"}}
		}, []want{{"headGroup.secretEnvVars[TOKEN].secret", "C7"}}},
		{"C10 another resource group's token", func(s *cluster.Spec) {
			s.Image, s.RayToken = "ray-2.52.0-py311-cpu", &cluster.SecretKeyRef{Secret: "dlc-env-rg-2.ray-token", Key: "token"}
		}, []want{{"rayToken.secret", "C10"}}},
		{"C7 secret without the prefix", func(s *cluster.Spec) {
			s.Head.SecretEnv = map[string]cluster.SecretKeyRef{"TOKEN": {Secret: "db-password", Key: "k"}}
		}, []want{{"headGroup.secretEnvVars[TOKEN].secret", "C7"}}},
		{"C7 secret name not a subdomain", func(s *cluster.Spec) {
			s.Head.SecretEnv = map[string]cluster.SecretKeyRef{"TOKEN": {Secret: "dlc-env-A_B", Key: "k"}}
		}, []want{{"headGroup.secretEnvVars[TOKEN].secret", "C7"}}},
		{"C7 secret key and name required", func(s *cluster.Spec) {
			s.Head.SecretEnv = map[string]cluster.SecretKeyRef{"TOKEN": {}}
		}, []want{{"headGroup.secretEnvVars[TOKEN].secret", "C7"}, {"headGroup.secretEnvVars[TOKEN].key", "C7"}}},
		{"C7 secret key syntax", func(s *cluster.Spec) {
			s.Head.SecretEnv = map[string]cluster.SecretKeyRef{"TOKEN": {Secret: "dlc-env-rg-1.a", Key: "a/b"}}
		}, []want{{"headGroup.secretEnvVars[TOKEN].key", "C7"}}},
		{"C7 secret key ..", func(s *cluster.Spec) {
			s.Head.SecretEnv = map[string]cluster.SecretKeyRef{"TOKEN": {Secret: "dlc-env-rg-1.a", Key: ".."}}
		}, []want{{"headGroup.secretEnvVars[TOKEN].key", "C7"}}},
		{"C7 secret env name syntax", func(s *cluster.Spec) {
			s.Head.SecretEnv = map[string]cluster.SecretKeyRef{"1X": {Secret: "dlc-env-rg-1.a", Key: "k"}}
		}, []want{{"headGroup.secretEnvVars[1X]", "C7"}}},
		{"C8 name in envVars and secretEnvVars", func(s *cluster.Spec) {
			s.Workers[0].Env = map[string]string{"TOKEN": "x"}
			s.Workers[0].SecretEnv = map[string]cluster.SecretKeyRef{"TOKEN": {Secret: "dlc-env-rg-1.a", Key: "k"}}
		}, []want{{"workerGroups[0].secretEnvVars[TOKEN]", "C8"}}},
		{"C7 label key reserved prefix", func(s *cluster.Spec) { s.Head.Labels = map[string]string{"ray.io/node-id": "x"} }, []want{{"headGroup.labels[ray.io/node-id]", "C7"}}},
		{"C7 label value", func(s *cluster.Spec) { s.Head.Labels = map[string]string{"k": "a b"} }, []want{{"headGroup.labels[k]", "C7"}}},
		{"C7 logical resource reserved", func(s *cluster.Spec) { s.Head.Resources = map[string]float64{"GPU": 1} }, []want{{"headGroup.resources[GPU]", "C7"}}},
		{"C7 logical resource negative", func(s *cluster.Spec) { s.Head.Resources = map[string]float64{"tokens": -1} }, []want{{"headGroup.resources[tokens]", "C7"}}},
		// C8
		{"C8 valid fixed size", func(s *cluster.Spec) { s.Workers[0].Instances = cluster.Range(3, 3) }, nil},
		{"C8 valid seven groups", func(s *cluster.Spec) {
			for _, n := range []string{"w2", "w3", "w4", "w5", "w6", "w7"} {
				s.AddWorkerGroup(n, "cu.4c8g", 0, 2)
			}
		}, nil},
		{"C8 no worker group", func(s *cluster.Spec) { s.Workers = nil }, []want{{"workerGroups", "C8"}}},
		{"C8 eight worker groups", func(s *cluster.Spec) {
			for _, n := range []string{"w2", "w3", "w4", "w5", "w6", "w7", "w8"} {
				s.AddWorkerGroup(n, "cu.4c8g", 0, 2)
			}
		}, []want{{"workerGroups", "C8"}}},
		{"C8 duplicate worker names", func(s *cluster.Spec) { s.AddWorkerGroup("cpu", "cu.4c8g", 1, 1) }, []want{{"workerGroups[1].name", "C8"}}},
		{"C8 worker named like head", func(s *cluster.Spec) { s.Workers[0].Name = "head" }, []want{{"workerGroups[0].name", "C8"}}},
		{"C8 max below min", func(s *cluster.Spec) { s.Workers[0].Instances = cluster.Range(5, 3) }, []want{{"workerGroups[0].instances.max", "C8"}}},
		{"C8 max zero", func(s *cluster.Spec) { s.Workers[0].Instances = cluster.Range(0, 0) }, []want{{"workerGroups[0].instances.max", "C8"}}},
		{"C8 max unset", func(s *cluster.Spec) { s.Workers[0].Instances.Max = nil }, []want{{"workerGroups[0].instances.max", "C8"}}},
		{"C8 min negative", func(s *cluster.Spec) { s.Workers[0].Instances = cluster.Range(-1, 2) }, []want{{"workerGroups[0].instances.min", "C8"}}},
		{"C8 valid largest worker group", func(s *cluster.Spec) {
			s.Workers[0].Instances = cluster.Range(cluster.MaxInstances, cluster.MaxInstances)
		}, nil},
		{"C8 valid largest cluster", func(s *cluster.Spec) {
			s.Workers[0].Instances = cluster.Range(0, cluster.MaxInstances)
			s.AddWorkerGroup("w2", "cu.4c8g", 0, cluster.MaxClusterInstances-cluster.MaxInstances)
		}, nil},
		{"C8 min and max 1<<62", func(s *cluster.Spec) { s.Workers[0].Instances = cluster.Range(1<<62, 1<<62) },
			[]want{{"workerGroups[0].instances.min", "C8"}, {"workerGroups[0].instances.max", "C8"}}},
		{"C8 max MaxInt64", func(s *cluster.Spec) { s.Workers[0].Instances = cluster.Range(0, math.MaxInt64) },
			[]want{{"workerGroups[0].instances.max", "C8"}}},
		{"C8 max one over", func(s *cluster.Spec) { s.Workers[0].Instances = cluster.Range(1, cluster.MaxInstances+1) },
			[]want{{"workerGroups[0].instances.max", "C8"}}},
		{"C8 min over the limit, max unset", func(s *cluster.Spec) {
			s.Workers[0].Instances = cluster.Instances{Min: cluster.MaxInstances + 1}
		}, []want{{"workerGroups[0].instances.min", "C8"}, {"workerGroups[0].instances.max", "C8"}}},
		{"C8 cluster total over the limit", func(s *cluster.Spec) {
			s.Workers[0].Instances = cluster.Range(0, cluster.MaxInstances)
			s.AddWorkerGroup("w2", "cu.4c8g", 0, cluster.MaxInstances)
			s.AddWorkerGroup("w3", "cu.4c8g", 0, 1)
		}, []want{{"workerGroups", "C8"}}},
		{"C8 seven groups at MaxInt64", func(s *cluster.Spec) {
			s.Workers[0].Instances = cluster.Range(0, math.MaxInt64)
			for _, n := range []string{"w2", "w3", "w4", "w5", "w6", "w7"} {
				s.AddWorkerGroup(n, "cu.4c8g", 0, math.MaxInt64)
			}
		}, []want{{"workerGroups", "C8"}, {"workerGroups[0].instances.max", "C8"}, {"workerGroups[1].instances.max", "C8"},
			{"workerGroups[2].instances.max", "C8"}, {"workerGroups[3].instances.max", "C8"}, {"workerGroups[4].instances.max", "C8"},
			{"workerGroups[5].instances.max", "C8"}, {"workerGroups[6].instances.max", "C8"}}},
		{"C8 unknown worker node spec", func(s *cluster.Spec) { s.Workers[0].NodeSpec = "gpu-big" }, []want{{"workerGroups[0].nodeSpec", "C8"}}},
		// C9
		{"C9 valid mounts", func(s *cluster.Spec) {
			s.Mounts = []storage.Mount{
				{Type: storage.COS, Instance: "data-1250000000", SubPath: "datasets", MountPath: "/data", ReadOnly: true},
				{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPathKind: storage.DynamicSubPath, SubPath: "ckpt", MountPath: "/ckpt"},
			}
		}, nil},
		{"C9 two mounts on one path", func(s *cluster.Spec) {
			s.Mounts = []storage.Mount{
				{Type: storage.COS, Instance: "data-1250000000", MountPath: "/data"},
				{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/data/"},
			}
		}, []want{{"mounts[1].mountPath", "C9"}}},
		{"C9 relative mount path", func(s *cluster.Spec) {
			s.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "data"}}
		}, []want{{"mounts[0].mountPath", "C9"}}},
		{"C9 reserved mount path", func(s *cluster.Spec) {
			s.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/tmp/ray/session"}}
		}, []want{{"mounts[0].mountPath", "C9"}}},
		{"C9 dotdot sub-path and bad instance", func(s *cluster.Spec) {
			s.Mounts = []storage.Mount{{Type: storage.GooseFS, Instance: "cfs-1a2b3c4d", SubPath: "a/../b", MountPath: "/mnt/x"}}
		}, []want{{"mounts[0].instance", "C9"}, {"mounts[0].subPath", "C9"}}},
		{"C9 unknown type", func(s *cluster.Spec) {
			s.Mounts = []storage.Mount{{Type: "NFS", Instance: "x", MountPath: "/mnt/x"}}
		}, []want{{"mounts[0].type", "C9"}}},
		// C10, J11
		// L4
		{"L4 idle timeout", func(s *cluster.Spec) { s.IdleTimeoutSeconds = 1800 }, nil},
		{"L4 negative idle timeout", func(s *cluster.Spec) { s.IdleTimeoutSeconds = -1 }, []want{{"idleTimeoutSeconds", "L4"}}},
		{"L4 idle timeout over 30 days", func(s *cluster.Spec) { s.IdleTimeoutSeconds = cluster.MaxIdleTimeout + 1 }, []want{{"idleTimeoutSeconds", "L4"}}},
		{"C10 Ray token on Ray 2.52", func(s *cluster.Spec) {
			s.Image, s.RayToken = "ray-2.52.0-py311-cpu", &cluster.SecretKeyRef{Secret: "dlc-env-rg-1.ray-token", Key: "token"}
		}, nil},
		{"C10 Ray token on a custom image (its Ray unknown)", func(s *cluster.Spec) {
			s.Image, s.RayToken = "ccr.ccs.tencentyun.com/team/ray:2.53.0", &cluster.SecretKeyRef{Secret: "dlc-env-rg-1.ray-token", Key: "token"}
		}, nil},
		{"C10 Ray token on Ray 2.46 (no token auth before 2.52)", func(s *cluster.Spec) {
			s.RayToken = &cluster.SecretKeyRef{Secret: "dlc-env-rg-1.ray-token", Key: "token"}
		}, []want{{"rayToken", "C10"}}},
		{"C10 Ray token from another Secret, bad key", func(s *cluster.Spec) {
			s.Image, s.RayToken = "ray-2.52.0-py311-cpu", &cluster.SecretKeyRef{Secret: "kube-root-ca", Key: "a/b"}
		}, []want{{"rayToken.secret", "C10"}, {"rayToken.key", "C10"}}},
		{"C10 Ray token and a node group setting RAY_AUTH_TOKEN", func(s *cluster.Spec) {
			s.Image, s.RayToken = "ray-2.52.0-py311-cpu", &cluster.SecretKeyRef{Secret: "dlc-env-rg-1.ray-token", Key: "token"}
			s.Workers[0].Env = map[string]string{"RAY_AUTH_TOKEN": "x"}
		}, []want{{"rayToken", "C10"}}},
		{"C10 valid advanced", func(s *cluster.Spec) { s.Advanced = map[string]string{"object-store-memory": "1000000000"} }, nil},
		{"C10 21 advanced params", func(s *cluster.Spec) {
			s.Advanced = map[string]string{}
			for i := range 21 {
				s.Advanced["metrics-export-port-"+string(rune('a'+i))] = "1"
			}
		}, []want{{"advanced", "C10"}}},
		{"J11 platform-managed key on cluster", func(s *cluster.Spec) { s.Advanced = map[string]string{"num_cpus": "8"} }, []want{{"advanced[num_cpus]", "J11"}}},
		{"C10 advanced value too long", func(s *cluster.Spec) {
			s.Advanced = map[string]string{"x": strings.Repeat("1", check.MaxAdvancedValue+1)}
		},
			[]want{{"advanced[x]", "C10"}}},
		{"C10 advanced total too large", func(s *cluster.Spec) {
			s.Advanced = map[string]string{}
			for i := range 5 {
				s.Advanced[fmt.Sprintf("k%d", i)] = strings.Repeat("1", check.MaxAdvancedValue-2)
			}
		}, []want{{"advanced", "C10"}}},
		// C9
		{"C9 too many mounts", func(s *cluster.Spec) {
			for i := range storage.MaxMounts + 1 {
				s.Mounts = append(s.Mounts, storage.Mount{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: fmt.Sprintf("/mnt/%d", i)})
			}
		}, []want{{"mounts", "C9"}}},
		{"C9 mount path too long", func(s *cluster.Spec) {
			s.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/" + strings.Repeat("m", storage.MaxMountPathLen)}}
		}, []want{{"mounts[0].mountPath", "C9"}}},
		{"C9 sub-path too long", func(s *cluster.Spec) {
			s.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPath: strings.Repeat("s", storage.MaxMountPathLen+1), MountPath: "/m"}}
		}, []want{{"mounts[0].subPath", "C9"}}},
		// all at once
		{"every problem at once", func(s *cluster.Spec) {
			s.Name, s.Groups, s.Priority, s.Image = "", nil, new(12), ""
			s.Workers[0].Instances = cluster.Range(3, 2)
		}, []want{{"name", "C1"}, {"groups", "C2"}, {"priority", "C3"}, {"image", "C5"}, {"workerGroups[0].instances.max", "C8"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			tc.edit(s)
			checkProblems(t, s.Validate(), tc.wants)
		})
	}
}

func TestManagedKeyErrorNamesSetting(t *testing.T) {
	s := validSpec()
	s.Advanced = map[string]string{"image": "x", "minReplicas": "2", "env_vars": "A=1"}
	err := s.Validate()
	for _, want := range []string{`"image" is managed by the platform`, "use the image setting",
		`"minReplicas" is managed`, "instance range", `"env_vars" is managed`, "environment variables"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

func TestBuilderIsCopy(t *testing.T) {
	b := cluster.NewBuilder("a").Groups("g").Resources("p", "r").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g", cluster.Env("A", "1")).WorkerGroup("w", "cu.4c8g", 1, 2)
	s1, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	s1.Head.Env["A"] = "changed"
	*s1.Workers[0].Instances.Max = 99
	s1.Groups[0] = "other"
	s2, _ := b.Build()
	if s2.Head.Env["A"] != "1" || *s2.Workers[0].Instances.Max != 2 || s2.Groups[0] != "g" {
		t.Fatalf("changing a built spec changed the builder: %+v", s2)
	}
	if s1.Priority == nil || *s1.Priority != cluster.DefaultPriority || s1.EffectivePriority() != cluster.DefaultPriority {
		t.Fatalf("builder priority = %v, want the default %d", s1.Priority, cluster.DefaultPriority)
	}
	*s1.Priority = 9
	if s2, _ := b.Build(); *s2.Priority != cluster.DefaultPriority {
		t.Fatalf("changing a built spec's priority changed the builder: %d", *s2.Priority)
	}
}

// C6: a template fills the node configuration, the builder adjusts it, and
// the template is left as it was.
func TestTemplateC6(t *testing.T) {
	tmpl, err := cluster.NewBuilder("").Image("ray-2.46.0-py310-gpu").
		Head("head", "cu.8c32g").
		WorkerGroup("gpu", "gu.10c40g.1xa10", 1, 4, cluster.Label("gpu", "a10")).
		BuildTemplate("a10-training")
	if err != nil {
		t.Fatal(err)
	}
	s, err := cluster.NewBuilder("from_template").Groups("g").Resources("p", "r").
		FromTemplate(tmpl).
		EditWorkerGroup("gpu", func(w *cluster.WorkerGroup) { w.Instances = cluster.Range(2, 8); w.Labels["gpu"] = "changed" }).
		WorkerGroup("cpu", "cu.4c8g", 0, 2).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := *s.Workers[0].Instances.Max; got != 8 || len(s.Workers) != 2 {
		t.Fatalf("adjusted spec wrong: max=%d workers=%d", got, len(s.Workers))
	}
	if *tmpl.Workers[0].Instances.Max != 4 || len(tmpl.Workers) != 1 || tmpl.Workers[0].Labels["gpu"] != "a10" {
		t.Fatalf("adjusting the cluster changed the template: %+v", tmpl.Workers)
	}

	cases := []struct {
		name  string
		edit  func(*cluster.Template)
		wants []want
	}{
		{"C6 valid", func(*cluster.Template) {}, nil},
		{"C6 name required", func(t *cluster.Template) { t.Name = "" }, []want{{"name", "C6"}}},
		{"C6 valid name 100 characters", func(t *cluster.Template) { t.Name = strings.Repeat("模", cluster.MaxTemplateNameLen) }, nil},
		{"C6 name too long", func(t *cluster.Template) { t.Name = strings.Repeat("模", cluster.MaxTemplateNameLen+1) }, []want{{"name", "C6"}}},
		{"C6 name zero-width only", func(t *cluster.Template) { t.Name = "\u200b\ufeff\u2060" }, []want{{"name", "C6"}}},
		{"C6 name bidi override", func(t *cluster.Template) { t.Name = "a10\u202d" }, []want{{"name", "C6"}}},
		{"C6 name bidi isolate", func(t *cluster.Template) { t.Name = "\u2068a10" }, []want{{"name", "C6"}}},
		{"C6 name control", func(t *cluster.Template) { t.Name = "a\x1b[31m" }, []want{{"name", "C6"}}},
		{"C6 environment checked", func(t *cluster.Template) { t.Workers = nil }, []want{{"workerGroups", "C8"}}},
		{"C6 valid description at the limit", func(t *cluster.Template) { t.Description = strings.Repeat("述", cluster.MaxDescriptionLen) }, nil},
		{"C6 description too long", func(t *cluster.Template) { t.Description = strings.Repeat("d", 1<<20) }, []want{{"description", "C6"}}},
		{"C6 description with NUL", func(t *cluster.Template) { t.Description = "a\x00b" }, []want{{"description", "C6"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tmpl.DeepCopy()
			tc.edit(c)
			checkProblems(t, c.Validate(), tc.wants)
		})
	}
	_, err = cluster.NewBuilder("x").EditWorkerGroup("nope", func(*cluster.WorkerGroup) {}).Build()
	if !strings.Contains(err.Error(), "no worker group of that name") {
		t.Fatalf("editing a missing worker group: %v", err)
	}
}

func TestImageCatalog(t *testing.T) {
	imgs := cluster.DefaultImages()
	ref, builtin, err := imgs.Resolve("ray-2.46.0-py310-gpu")
	if err != nil || !builtin || !strings.HasPrefix(ref, cluster.DefaultRegistry+":") {
		t.Fatalf("Resolve built-in = %q %v %v", ref, builtin, err)
	}
	ref, builtin, err = imgs.Resolve("ccr.ccs.tencentyun.com/me/ray:1")
	if err != nil || builtin || ref != "ccr.ccs.tencentyun.com/me/ray:1" {
		t.Fatalf("Resolve custom = %q %v %v", ref, builtin, err)
	}
	if _, _, err := imgs.Resolve("nope"); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("Resolve unknown: %v", err)
	}
	// A caller's own catalog replaces the built-in one.
	own, err := cluster.NewImageCatalog(map[string]string{"mine": "registry.example.com/ml/ray:2.46"})
	if err != nil {
		t.Fatal(err)
	}
	s := validSpec()
	s.Image = "mine"
	if err := s.ValidateWith(cluster.Catalogs{Images: own}); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err == nil {
		t.Fatal("the default catalog accepted a name only the caller's catalog has")
	}
	if _, err := cluster.NewImageCatalog(map[string]string{"bad name": "nohost"}); err == nil {
		t.Fatal("NewImageCatalog accepted bad entries")
	}
}

// A too-large environment is an error, never a wrapped, small reservation:
// MinResources, MaxResources and ResourcesAt refuse counts whose resources
// overflow (C8), whether or not the spec was validated.
func TestEnvironmentResourcesOverflow(t *testing.T) {
	nodes := quota.DefaultCatalog()
	head := quota.Resources{MilliCPU: 4000, Memory: 16 * quota.GiB}   // cu.4c16g
	worker := quota.Resources{MilliCPU: 8000, Memory: 32 * quota.GiB} // cu.8c32g
	cases := []struct {
		name     string
		in       cluster.Instances
		replicas map[string]int
		min, max quota.Resources // ignored when wantErr
		wantErr  bool
	}{
		{"valid", cluster.Range(1, 4), nil, head.Add(worker), head.Add(worker.Mul(4)), false},
		{"valid at the limit", cluster.Range(cluster.MaxInstances, cluster.MaxInstances), nil,
			head.Add(worker.Mul(cluster.MaxInstances)), head.Add(worker.Mul(cluster.MaxInstances)), false},
		{"1<<62 instances", cluster.Range(1<<62, 1<<62), nil, quota.Resources{}, quota.Resources{}, true},
		{"MaxInt64 instances", cluster.Range(math.MaxInt64, math.MaxInt64), nil, quota.Resources{}, quota.Resources{}, true},
		{"MaxInt64 replicas", cluster.Range(1, 4), map[string]int{"cpu": math.MaxInt64}, quota.Resources{}, quota.Resources{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := validSpec().Environment
			e.Workers[0].Instances = tc.in
			minR, errMin := e.MinResources(nodes)
			maxR, errMax := e.MaxResources(nodes)
			at, errAt := e.ResourcesAt(nodes, tc.replicas)
			if !tc.wantErr {
				if errMin != nil || errMax != nil || errAt != nil {
					t.Fatalf("errors: %v, %v, %v", errMin, errMax, errAt)
				}
				if minR != tc.min || maxR != tc.max || at != tc.min {
					t.Fatalf("min %v max %v at %v, want min %v max %v", minR, maxR, at, tc.min, tc.max)
				}
				return
			}
			checkProblems(t, errAt, []want{{"workerGroups[0].instances", "C8"}})
			if tc.replicas == nil {
				checkProblems(t, errMin, []want{{"workerGroups[0].instances", "C8"}})
				checkProblems(t, errMax, []want{{"workerGroups[0].instances", "C8"}})
			}
		})
	}
}

// C3: an explicit priority 0 is a value, not "unset": the builder, a
// spec filled by hand and YAML refuse it; only a priority left out takes
// the default.
func TestExplicitPriorityZeroC3(t *testing.T) {
	const doc = `name: c
groups: [g]
resourcePackage: p
resourceGroup: r
image: ray-2.46.0-py310-cpu
headGroup: {name: head, nodeSpec: cu.4c16g}
workerGroups: [{name: w, nodeSpec: cu.4c8g, instances: {min: 1, max: 2}}]
`
	fromYAML := func(extra string) func() (*cluster.Spec, error) {
		return func() (*cluster.Spec, error) {
			s, err := cluster.UnmarshalYAML([]byte(doc + extra))
			if err != nil {
				return nil, err
			}
			return s, s.Validate()
		}
	}
	builder := func(edit func(*cluster.Builder)) func() (*cluster.Spec, error) {
		return func() (*cluster.Spec, error) {
			b := cluster.NewBuilder("c").Groups("g").Resources("p", "r").Image("ray-2.46.0-py310-cpu").
				Head("head", "cu.4c16g").WorkerGroup("w", "cu.4c8g", 1, 2)
			edit(b)
			return b.Build()
		}
	}
	byHand := func(p *int) func() (*cluster.Spec, error) {
		return func() (*cluster.Spec, error) {
			s := validSpec()
			s.Priority = p
			return s, s.Validate()
		}
	}
	cases := []struct {
		name  string
		make  func() (*cluster.Spec, error)
		wants []want
		want  int // the effective priority, when valid
	}{
		{"builder default", builder(func(*cluster.Builder) {}), nil, 5},
		{"builder 7", builder(func(b *cluster.Builder) { b.Priority(7) }), nil, 7},
		{"builder 0", builder(func(b *cluster.Builder) { b.Priority(0) }), []want{{"priority", "C3"}}, 0},
		{"by hand unset", byHand(nil), nil, 5},
		{"by hand 0", byHand(new(0)), []want{{"priority", "C3"}}, 0},
		{"YAML absent", fromYAML(""), nil, 5},
		{"YAML null", fromYAML("priority: null\n"), nil, 5},
		{"YAML 3", fromYAML("priority: 3\n"), nil, 3},
		{"YAML 0", fromYAML("priority: 0\n"), []want{{"priority", "C3"}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.make()
			checkProblems(t, err, tc.wants)
			if tc.wants == nil && s.EffectivePriority() != tc.want {
				t.Fatalf("effective priority %d, want %d", s.EffectivePriority(), tc.want)
			}
		})
	}
}
