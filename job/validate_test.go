package job_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/internal/check"
	"github.com/aidlc/dlc/internal/fieldtest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/storage"
)

func onDemandConfig() *job.Config {
	c, err := job.NewBuilder("train-resnet").
		OnDemand("pkg-1", "rg-1").
		Image("ray-2.46.0-py310-gpu").
		Head("head", "cu.8c32g").
		WorkerGroup("gpu", "gu.10c40g.1xa10", 1, 2).
		COSPackage("cos://jobs-1250000000/resnet/job.zip").
		Entrypoint("python main.py --config config.yaml").
		Build()
	if err != nil {
		panic(err)
	}
	return c
}

type want = fieldtest.Want

var checkProblems = fieldtest.Check

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*job.Config)
		wants []want
	}{
		{"valid on-demand", func(*job.Config) {}, nil},
		// J1
		{"J1 valid 100 characters", func(c *job.Config) { c.Name = strings.Repeat("作", 100) }, nil},
		{"J1 required", func(c *job.Config) { c.Name = "" }, []want{{"name", "J1"}}},
		{"J1 too long", func(c *job.Config) { c.Name = strings.Repeat("a", 101) }, []want{{"name", "J1"}}},
		{"J1 control character", func(c *job.Config) { c.Name = "a\nb" }, []want{{"name", "J1"}}},
		{"J1 zero-width space only", func(c *job.Config) { c.Name = "\u200b" }, []want{{"name", "J1"}}},
		{"J1 word joiner only", func(c *job.Config) { c.Name = "\u2060\u2060" }, []want{{"name", "J1"}}},
		{"J1 byte-order mark only", func(c *job.Config) { c.Name = "\ufeff" }, []want{{"name", "J1"}}},
		{"J1 right-to-left override", func(c *job.Config) { c.Name = "train\u202egnp.sh" }, []want{{"name", "J1"}}},
		{"J1 bidi isolate", func(c *job.Config) { c.Name = "\u2066train\u2069" }, []want{{"name", "J1"}}},
		{"J1 Hangul filler only", func(c *job.Config) { c.Name = "\u3164" }, []want{{"name", "J1"}}},
		// J2
		{"J2 valid existing cluster", func(c *job.Config) { c.OnDemand, c.Cluster = nil, "cls-1" }, nil},
		{"J2 valid cluster group", func(c *job.Config) { c.OnDemand, c.Group = nil, "grp-1" }, nil},
		{"J2 no mode", func(c *job.Config) { c.OnDemand = nil }, []want{{"runMode", "J2"}}},
		{"J2 two modes", func(c *job.Config) { c.Cluster = "cls-1" }, []want{{"cluster", "J2"}}},
		// J3
		{"J3 valid priority 1", func(c *job.Config) { c.OnDemand.Priority = new(1) }, nil},
		{"J3 unset priority means default", func(c *job.Config) { c.OnDemand.Priority = nil }, nil},
		{"J3 explicit priority 0", func(c *job.Config) { c.OnDemand.Priority = new(0) }, []want{{"onDemand.priority", "J3"}}},
		{"J3 priority 10", func(c *job.Config) { c.OnDemand.Priority = new(10) }, []want{{"onDemand.priority", "J3"}}},
		{"J3 resource package and group required", func(c *job.Config) {
			c.OnDemand.ResourcePackage, c.OnDemand.ResourceGroup = "", ""
		}, []want{{"onDemand.resourcePackage", "J3"}, {"onDemand.resourceGroup", "J3"}}},
		{"J3 resource group id of 64 KiB", func(c *job.Config) { c.OnDemand.ResourceGroup = strings.Repeat(`"}{`, 64<<10) }, []want{{"onDemand.resourceGroup", "J3"}}},
		{"J3 resource group id of 64", func(c *job.Config) { c.OnDemand.ResourceGroup = strings.Repeat("r", 64) }, []want{{"onDemand.resourceGroup", "J3"}}},
		{"J3 resource package id not a DNS label", func(c *job.Config) { c.OnDemand.ResourcePackage = "Pkg" }, []want{{"onDemand.resourcePackage", "J3"}}},
		{"J2 cluster id too long", func(c *job.Config) { c.OnDemand, c.Cluster = nil, strings.Repeat("c", 64) }, []want{{"cluster", "J2"}}},
		{"J2 group id not a DNS label", func(c *job.Config) { c.OnDemand, c.Group = nil, "grp 1" }, []want{{"group", "J2"}}},
		// J4
		{"J4 valid tags", func(c *job.Config) { c.Tags = map[string]string{"team": "cv"} }, nil},
		{"J4 bad tag", func(c *job.Config) { c.Tags = map[string]string{" ": "x"} }, []want{{"tags[ ]", "J4"}}},
		{"J4 tag in the platform's prefix", func(c *job.Config) { c.Tags = map[string]string{"dlc.aidlc.io/run-id": "x"} }, []want{{"tags[dlc.aidlc.io/run-id]", "J4"}}},
		// J5
		{"J5 valid local package", func(c *job.Config) { c.Package = storage.LocalPackage("./job.zip") }, nil},
		{"J5 valid https COS package", func(c *job.Config) {
			c.Package = storage.COSPackage("https://jobs-1250000000.cos.ap-guangzhou.myqcloud.com/a/job.zip")
		}, nil},
		{"J5 package required", func(c *job.Config) { c.Package = storage.Package{} }, []want{{"package", "J5"}}},
		{"J5 both sources", func(c *job.Config) { c.Package.Local = "./job.zip" }, []want{{"package", "J5"}}},
		{"J5 bad COS URL", func(c *job.Config) { c.Package = storage.COSPackage("s3://bucket/job.zip") }, []want{{"package.cos", "J5"}}},
		{"J5 COS bucket without appid", func(c *job.Config) { c.Package = storage.COSPackage("cos://jobs/job.zip") }, []want{{"package.cos", "J5"}}},
		{"J5 COS key not a .zip (Ray fetches only .zip)", func(c *job.Config) { c.Package = storage.COSPackage("cos://jobs-1250000000/pkg/job") },
			[]want{{"package.cos", "J5"}}},
		{"J5 COS key .ZIP (Ray's check is case-sensitive)", func(c *job.Config) { c.Package = storage.COSPackage("cos://jobs-1250000000/pkg/job.ZIP") },
			[]want{{"package.cos", "J5"}}},
		{"J5 entrypoint required", func(c *job.Config) { c.Entrypoint = " " }, []want{{"entrypoint", "J5"}}},
		{"J5 entrypoint one line", func(c *job.Config) { c.Entrypoint = "python a.py\nrm -rf /" }, []want{{"entrypoint", "J5"}}},
		// J7
		{"J7 no worker group", func(c *job.Config) { c.OnDemand.Environment.Workers = nil }, []want{{"onDemand.environment.workerGroups", "J7"}}},
		{"J7 duplicate node group names", func(c *job.Config) { c.OnDemand.Environment.Workers[0].Name = "head" }, []want{{"onDemand.environment.workerGroups[0].name", "J7"}}},
		{"J7 image required", func(c *job.Config) { c.OnDemand.Environment.Image = "" }, []want{{"onDemand.environment.image", "J7"}}},
		{"J7 unknown node spec", func(c *job.Config) { c.OnDemand.Environment.Head.NodeSpec = "cu.0c1g" }, []want{{"onDemand.environment.headGroup.nodeSpec", "J7"}}},
		{"J7 min above max", func(c *job.Config) { c.OnDemand.Environment.Workers[0].Instances = cluster.Range(3, 1) }, []want{{"onDemand.environment.workerGroups[0].instances.max", "J7"}}},
		{"J7 instances 1<<62", func(c *job.Config) { c.OnDemand.Environment.Workers[0].Instances = cluster.Range(1<<62, 1<<62) },
			[]want{{"onDemand.environment.workerGroups[0].instances.min", "J7"}, {"onDemand.environment.workerGroups[0].instances.max", "J7"}}},
		{"J7 max MaxInt64", func(c *job.Config) { c.OnDemand.Environment.Workers[0].Instances = cluster.Range(0, math.MaxInt64) },
			[]want{{"onDemand.environment.workerGroups[0].instances.max", "J7"}}},
		{"J7 environment over the cluster total", func(c *job.Config) {
			c.OnDemand.Environment.Workers[0].Instances = cluster.Range(1, cluster.MaxInstances)
			c.OnDemand.Environment.AddWorkerGroup("w2", "cu.4c8g", 0, cluster.MaxInstances)
			c.OnDemand.Environment.AddWorkerGroup("w3", "cu.4c8g", 0, 1)
		}, []want{{"onDemand.environment.workerGroups", "J7"}}},
		// J9
		{"J9 valid job mount", func(c *job.Config) {
			c.Mounts = []storage.Mount{{Type: storage.CFSTurbo, Instance: "cfs-9a8b7c6d", MountPath: "/models", ReadOnly: true}}
		}, nil},
		{"J9 mount without path", func(c *job.Config) {
			c.Mounts = []storage.Mount{{Type: storage.COS, Instance: "data-1250000000"}}
		}, []want{{"mounts[0].mountPath", "J9"}}},
		// J10
		{"J10 valid runtime env", func(c *job.Config) {
			c.Runtime = job.RuntimeEnv{Pip: []string{"torch>=2.0"}, EnvVars: map[string]string{"RAY_DEDUP_LOGS": "0"}}
		}, nil},
		{"J10 valid container on demand", func(c *job.Config) { c.Runtime.Container = "ccr.ccs.tencentyun.com/me/job:1" }, nil},
		{"J10 container on an existing cluster (Ray: image_uri only with config and env_vars)", func(c *job.Config) {
			c.OnDemand, c.Cluster = nil, "cls-1"
			c.Runtime.Container = "ccr.ccs.tencentyun.com/me/job:1"
		}, []want{{"runtimeEnv.container", "J10"}}},
		{"J10 container on a group", func(c *job.Config) {
			c.OnDemand, c.Group = nil, "grp-1"
			c.Runtime.Container = "ccr.ccs.tencentyun.com/me/job:1"
		}, []want{{"runtimeEnv.container", "J10"}}},
		{"J10 pip and conda", func(c *job.Config) {
			c.Runtime = job.RuntimeEnv{Pip: []string{"a"}, Conda: []string{"b"}}
		}, []want{{"runtimeEnv.conda", "J10"}}},
		{"J10 container with pip", func(c *job.Config) {
			c.Runtime = job.RuntimeEnv{Pip: []string{"a"}, Container: "ccr.ccs.tencentyun.com/me/job:1"}
		}, []want{{"runtimeEnv.container", "J10"}}},
		{"J10 bad env var", func(c *job.Config) { c.Runtime.EnvVars = map[string]string{"A-B": "1"} }, []want{{"runtimeEnv.envVars[A-B]", "J10"}}},
		{"J10 empty pip entry", func(c *job.Config) { c.Runtime.Pip = []string{""} }, []want{{"runtimeEnv.pip[0]", "J10"}}},
		{"J10 env value of 800 KB", func(c *job.Config) { c.Runtime.EnvVars = map[string]string{"BIG": strings.Repeat("x", 800_000)} },
			[]want{{"runtimeEnv.envVars[BIG]", "J10"}, {"runtimeEnv.envVars", "J10"}}},
		{"J10 too many env vars", func(c *job.Config) {
			c.Runtime.EnvVars = map[string]string{}
			for i := range check.MaxEnvVars + 1 {
				c.Runtime.EnvVars[fmt.Sprintf("V%d", i)] = ""
			}
		}, []want{{"runtimeEnv.envVars", "J10"}}},
		{"J10 on-demand environment env too large", func(c *job.Config) {
			c.OnDemand.Environment.Head.Env = map[string]string{"BIG": strings.Repeat("x", check.MaxEnvValueLen+1)}
		}, []want{{"onDemand.environment.headGroup.envVars[BIG]", "J7"}}},
		{"J10 too many pip entries", func(c *job.Config) { c.Runtime.Pip = slices.Repeat([]string{"numpy"}, job.MaxDependencies+1) },
			[]want{{"runtimeEnv.pip", "J10"}}},
		{"J10 pip entry too long", func(c *job.Config) { c.Runtime.Pip = []string{strings.Repeat("p", job.MaxDependencyLen+1)} },
			[]want{{"runtimeEnv.pip[0]", "J10"}}},
		{"J10 too many conda entries", func(c *job.Config) {
			for range job.MaxDependencies + 1 {
				c.Runtime.Conda = append(c.Runtime.Conda, "numpy")
			}
		}, []want{{"runtimeEnv.conda", "J10"}}},
		{"J10 valid secret env on demand", func(c *job.Config) {
			c.Runtime.SecretEnv = map[string]cluster.SecretKeyRef{"HF_TOKEN": {Secret: "dlc-env-rg-1.hf", Key: "token"}}
		}, nil},
		{"J10 secret env on an existing cluster", func(c *job.Config) {
			c.OnDemand, c.Cluster = nil, "cls-1"
			c.Runtime.SecretEnv = map[string]cluster.SecretKeyRef{"HF_TOKEN": {Secret: "dlc-env-rg-1.hf", Key: "token"}}
		}, []want{{"runtimeEnv.secretEnvVars", "J10"}}},
		{"J10 secret env on a group", func(c *job.Config) {
			c.OnDemand, c.Group = nil, "grp-1"
			c.Runtime.SecretEnv = map[string]cluster.SecretKeyRef{"HF_TOKEN": {Secret: "dlc-env-rg-1.hf", Key: "token"}}
		}, []want{{"runtimeEnv.secretEnvVars", "J10"}}},
		{"J10 another resource group's Secret", func(c *job.Config) {
			c.Runtime.SecretEnv = map[string]cluster.SecretKeyRef{"HF_TOKEN": {Secret: "dlc-env-rg-2.hf", Key: "token"}}
		}, []want{{"runtimeEnv.secretEnvVars[HF_TOKEN].secret", "J10"}}},
		{"J7 a node group's Secret of another resource group", func(c *job.Config) {
			c.OnDemand.Environment.Workers[0].SecretEnv = map[string]cluster.SecretKeyRef{"HF_TOKEN": {Secret: "dlc-env-rg-2.hf", Key: "token"}}
		}, []want{{"onDemand.environment.workerGroups[0].secretEnvVars[HF_TOKEN].secret", "J7"}}},
		{"J10 secret env bad Secret", func(c *job.Config) {
			c.Runtime.SecretEnv = map[string]cluster.SecretKeyRef{"HF_TOKEN": {Secret: "kube-system-token", Key: "token"}}
		}, []want{{"runtimeEnv.secretEnvVars[HF_TOKEN].secret", "J10"}}},
		{"J10 secret env also set by a node group", func(c *job.Config) {
			c.OnDemand.Environment.Workers[0].Env = map[string]string{"HF_TOKEN": "x"}
			c.Runtime.SecretEnv = map[string]cluster.SecretKeyRef{"HF_TOKEN": {Secret: "dlc-env-rg-1.hf", Key: "token"}}
		}, []want{{"runtimeEnv.secretEnvVars[HF_TOKEN]", "J10"}}},
		{"J10 name in both", func(c *job.Config) {
			c.Runtime.EnvVars = map[string]string{"HF_TOKEN": "x"}
			c.Runtime.SecretEnv = map[string]cluster.SecretKeyRef{"HF_TOKEN": {Secret: "dlc-env-rg-1.hf", Key: "token"}}
		}, []want{{"runtimeEnv.secretEnvVars[HF_TOKEN]", "J10"}}},
		{"J9 too many mounts", func(c *job.Config) {
			for i := range storage.MaxMounts + 1 {
				c.Mounts = append(c.Mounts, storage.Mount{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: fmt.Sprintf("/mnt/%d", i)})
			}
		}, []want{{"mounts", "J9"}}},
		{"J5 local path too long", func(c *job.Config) {
			c.Package = storage.LocalPackage("/" + strings.Repeat("p", storage.MaxPackageRefLen))
		},
			[]want{{"package.local", "J5"}}},
		{"J5 COS URL too long", func(c *job.Config) {
			c.Package = storage.COSPackage("cos://jobs-1250000000/" + strings.Repeat("k", storage.MaxPackageRefLen))
		}, []want{{"package.cos", "J5"}}},
		{"J11 advanced total too large", func(c *job.Config) {
			c.Advanced = map[string]string{}
			for i := range 50 {
				c.Advanced[fmt.Sprintf("k%d", i)] = strings.Repeat("1", 100)
			}
		}, []want{{"advanced", "J11"}}},
		// J11
		{"J11 valid advanced", func(c *job.Config) { c.Advanced = map[string]string{"ttl-seconds-after-finished": "600"} }, nil},
		{"J11 image", func(c *job.Config) { c.Advanced = map[string]string{"image": "x"} }, []want{{"advanced[image]", "J11"}}},
		{"J11 instance count", func(c *job.Config) { c.Advanced = map[string]string{"maxReplicas": "9"} }, []want{{"advanced[maxReplicas]", "J11"}}},
		{"J11 start command", func(c *job.Config) { c.Advanced = map[string]string{"entrypoint": "x"} }, []want{{"advanced[entrypoint]", "J11"}}},
		{"J11 compute", func(c *job.Config) { c.Advanced = map[string]string{"--num-gpus": "8"} }, []want{{"advanced[--num-gpus]", "J11"}}},
		{"J11 env", func(c *job.Config) { c.Advanced = map[string]string{"ENV_VARS": "A=1"} }, []want{{"advanced[ENV_VARS]", "J11"}}},
		{"J11 runtime version", func(c *job.Config) { c.Advanced = map[string]string{"ray_version": "2.9"} }, []want{{"advanced[ray_version]", "J11"}}},
		{"J11 start parameters", func(c *job.Config) { c.Advanced = map[string]string{"rayStartParams": "{}"} }, []want{{"advanced[rayStartParams]", "J11"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := onDemandConfig()
			tc.edit(c)
			checkProblems(t, c.Validate(), tc.wants)
		})
	}
}

// J8: existing-cluster and group modes take the environment from the
// cluster; the builder refuses one set on the job.
func TestBuilderJ8(t *testing.T) {
	cases := []struct {
		name  string
		b     *job.Builder
		wants []want
	}{
		{"J8 valid cluster mode without environment",
			job.NewBuilder("j").OnCluster("cls-1").LocalPackage("a.zip").Entrypoint("python a.py"), nil},
		{"J8 image on cluster mode",
			job.NewBuilder("j").OnCluster("cls-1").Image("ray-2.46.0-py310-cpu").LocalPackage("a.zip").Entrypoint("python a.py"),
			[]want{{"onDemand.environment", "J8"}}},
		{"J8 worker group on group mode",
			job.NewBuilder("j").OnGroup("grp-1").WorkerGroup("w", "cu.4c8g", 1, 1).LocalPackage("a.zip").Entrypoint("python a.py"),
			[]want{{"onDemand.environment", "J8"}}},
		{"J3 priority outside on-demand",
			job.NewBuilder("j").OnGroup("grp-1").Priority(7).LocalPackage("a.zip").Entrypoint("python a.py"),
			[]want{{"onDemand.priority", "J3"}}},
		{"J3 priority 0 outside on-demand",
			job.NewBuilder("j").OnCluster("cls-1").Priority(0).LocalPackage("a.zip").Entrypoint("python a.py"),
			[]want{{"onDemand.priority", "J3"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.b.Build()
			checkProblems(t, err, tc.wants)
		})
	}
}

func TestBuilderDefaultsAndTemplates(t *testing.T) {
	c := onDemandConfig()
	if *c.OnDemand.Priority != job.DefaultPriority || c.Priority() != 5 || c.Mode() != job.OnDemandMode {
		t.Fatalf("defaults: priority=%d mode=%s", *c.OnDemand.Priority, c.Mode())
	}
	tmpl := &cluster.Template{Name: "t", Environment: c.OnDemand.Environment}
	c2, err := job.NewBuilder("from-template").OnDemand("p", "r").Priority(8).FromTemplate(tmpl).
		EditWorkerGroup("gpu", func(w *cluster.WorkerGroup) { w.Instances = cluster.Range(4, 4) }).
		LocalPackage("a.zip").Entrypoint("python a.py").Build()
	if err != nil {
		t.Fatal(err)
	}
	if *c2.OnDemand.Priority != 8 || c2.OnDemand.Environment.Workers[0].Instances.Min != 4 {
		t.Fatalf("template adjust: %+v", c2.OnDemand)
	}
	if tmpl.Workers[0].Instances.Min != 1 {
		t.Fatal("adjusting the job changed the template (C6)")
	}
	// Edit keeps what was there.
	c3, err := job.Edit(c2).Entrypoint("python b.py").Build()
	if err != nil || *c3.OnDemand.Priority != 8 || c3.Entrypoint != "python b.py" || c2.Entrypoint != "python a.py" {
		t.Fatalf("Edit: %v %+v", err, c3)
	}
}

// J3: an explicit priority 0 is a value, not "unset": the builder, a
// config filled by hand and YAML refuse it; only a priority left out
// takes the default.
func TestExplicitPriorityZeroJ3(t *testing.T) {
	const doc = `name: j
package: {cos: "cos://jobs-1250000000/a/job.zip"}
entrypoint: python a.py
onDemand:
  resourcePackage: p
  resourceGroup: r
  environment:
    image: ray-2.46.0-py310-cpu
    headGroup: {name: head, nodeSpec: cu.4c16g}
    workerGroups: [{name: w, nodeSpec: cu.4c8g, instances: {min: 1, max: 2}}]
`
	fromYAML := func(extra string) func() (*job.Config, error) {
		return func() (*job.Config, error) {
			c, err := job.UnmarshalYAML([]byte(doc + extra))
			if err != nil {
				return nil, err
			}
			return c, c.Validate()
		}
	}
	builder := func(edit func(*job.Builder)) func() (*job.Config, error) {
		return func() (*job.Config, error) {
			b := job.NewBuilder("j").OnDemand("p", "r").Image("ray-2.46.0-py310-cpu").
				Head("head", "cu.4c16g").WorkerGroup("w", "cu.4c8g", 1, 2).
				COSPackage("cos://jobs-1250000000/a/job.zip").Entrypoint("python a.py")
			edit(b)
			return b.Build()
		}
	}
	byHand := func(p *int) func() (*job.Config, error) {
		return func() (*job.Config, error) {
			c := onDemandConfig()
			c.OnDemand.Priority = p
			return c, c.Validate()
		}
	}
	cases := []struct {
		name  string
		make  func() (*job.Config, error)
		wants []want
		want  int // the effective priority, when valid
	}{
		{"builder default", builder(func(*job.Builder) {}), nil, 5},
		{"builder 7", builder(func(b *job.Builder) { b.Priority(7) }), nil, 7},
		{"builder 0", builder(func(b *job.Builder) { b.Priority(0) }), []want{{"onDemand.priority", "J3"}}, 0},
		{"edit keeps an explicit 0", func() (*job.Config, error) {
			c := onDemandConfig()
			c.OnDemand.Priority = new(0)
			return job.Edit(c).Build()
		}, []want{{"onDemand.priority", "J3"}}, 0},
		{"by hand unset", byHand(nil), nil, 5},
		{"by hand 0", byHand(new(0)), []want{{"onDemand.priority", "J3"}}, 0},
		{"YAML absent", fromYAML(""), nil, 5},
		{"YAML null", fromYAML("  priority: null\n"), nil, 5},
		{"YAML 3", fromYAML("  priority: 3\n"), nil, 3},
		{"YAML 0", fromYAML("  priority: 0\n"), []want{{"onDemand.priority", "J3"}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.make()
			checkProblems(t, err, tc.wants)
			if tc.wants == nil && c.Priority() != tc.want {
				t.Fatalf("priority %d, want %d", c.Priority(), tc.want)
			}
		})
	}
}
