package kube_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/storage"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the rendered objects")

// renderCase is one rendered object: a cluster or an on-demand run, and the
// options to render it with.
type renderCase struct {
	name    string // of the golden file, testdata/<name>.yaml
	cluster *cluster.Cluster
	run     *job.Run
	opts    kube.RenderOptions
}

// render renders the case into namespace ns.
func (rc renderCase) render(t *testing.T, ns string) client.Object {
	t.Helper()
	o := rc.opts
	o.Namespace = ns
	var (
		obj client.Object
		err error
	)
	if rc.cluster != nil {
		obj, err = kube.RenderRayCluster(rc.cluster, o)
	} else {
		obj, err = kube.RenderRayJob(rc.run, o)
	}
	if err != nil {
		t.Fatalf("render %s: %v", rc.name, err)
	}
	return obj
}

func cpuEnv() cluster.Environment {
	var e cluster.Environment
	e.Image = "ray-2.46.0-py310-cpu"
	e.SetHead("head", "cu.4c16g", cluster.Env("TZ", "Asia/Shanghai"))
	e.AddWorkerGroup("cpu", "cu.8c32g", 2, 2,
		cluster.Env("OMP_NUM_THREADS", "8"), cluster.Env("TZ", "Asia/Shanghai"),
		cluster.Label("zone", "ap-guangzhou-3"), cluster.Label("tier", "standard"),
		cluster.Resource("ssd", 1), cluster.Resource("licence_slots", 0.5))
	return e
}

func running(id, name string, env cluster.Environment) *cluster.Cluster {
	return &cluster.Cluster{
		ID: id, State: cluster.Running, Generation: 3,
		Spec: cluster.Spec{Name: name, Groups: []string{"grp-1"}, ResourcePackage: "pkg-1", ResourceGroup: "rg-1", Environment: env},
		Live: &cluster.Live{ResourceGroup: "rg-1", Environment: *env.DeepCopy()},
	}
}

var goodRedis = kube.RenderOptions{RedisAddress: "redis-ha.dlc-system.svc:6379"}

func renderCases() []renderCase {
	plain := running("cls-a1b2c3d4e5", "训练集群", cpuEnv())
	plain.Spec.Advanced = map[string]string{
		"object-store-memory": "2000000000",
		"system-config":       `{"object_spilling_threshold": 0.9}`,
	}
	plain.Replicas = map[string]int{"cpu": 2}
	plain.Spec.Tags = map[string]string{"team": "推荐", "cost-center": "cc-1024", "env": ""}

	auto := cpuEnv()
	auto.Workers[0].Instances = cluster.Range(1, 4)
	auto.AddWorkerGroup("mem", "cu.16c64g", 1, 1)
	autoscaling := running("cls-autoscale01", "弹性集群", auto)
	autoscaling.Replicas = map[string]int{"cpu": 3} // "mem" unset: its minimum

	haEnv := cpuEnv()
	haEnv.Head.HighAvailability = true
	ha := running("cls-ha00000001", "高可用集群", haEnv)
	haOpts := goodRedis
	haOpts.RedisPassword = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "dlc-redis-ha"}, Key: "password"}

	var gpuEnv cluster.Environment
	gpuEnv.Image = "ccr.ccs.tencentyun.com/team-a/ray-llm:2.46.0-cu121" // custom: runs as user ray
	gpuEnv.SetHead("head", "cu.8c32g")
	gpuEnv.AddWorkerGroup("a10", "gu.20c80g.2xa10", 1, 2, cluster.Label("gpu-type", "A10"), cluster.Resource("a10", 2))
	gpuEnv.AddWorkerGroup("a100", "gu.48c384g.4xa100", 0, 1, cluster.Label("gpu-type", "A100"))
	gpu := running("cls-gpu0000001", "GPU_cluster", gpuEnv)
	gpu.Replicas = map[string]int{"a10": 1, "a100": 0}

	mounted := running("cls-mounts0001", "数据集群", cpuEnv())
	mounted.Spec.Mounts = []storage.Mount{
		{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPath: "team/data", MountPath: "/data"},
		{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPath: "models", MountPath: "/models", ReadOnly: true},
		{Type: storage.CFSTurbo, Instance: "cfs-5e6f7a8b", SubPathKind: storage.DynamicSubPath, SubPath: "scratch", MountPath: "/scratch"},
		{Type: storage.COS, Instance: "weights-1250000000", MountPath: "/weights", ReadOnly: true},
	}
	mountOpts := kube.RenderOptions{VolumeResolver: kube.PVCResolver{Claims: map[string]string{"weights-1250000000": "cos-weights"}}}

	hibernated := running("cls-sleep00001", "休眠集群", cpuEnv())
	hibernated.State, hibernated.Live = cluster.Hibernated, nil

	return []renderCase{
		{name: "cluster-cpu", cluster: plain},
		{name: "cluster-autoscaling", cluster: autoscaling},
		{name: "cluster-ha", cluster: ha, opts: haOpts},
		{name: "cluster-gpu", cluster: gpu},
		{name: "cluster-mounts", cluster: mounted, opts: mountOpts},
		{name: "cluster-hibernated", cluster: hibernated},
		{name: "rayjob-ondemand", run: onDemandRun(), opts: jobOpts()},
		{name: "rayjob-queued", run: queuedRun(), opts: func() kube.RenderOptions { o := jobOpts(); o.SuspendRayJob = true; return o }()},
	}
}

func onDemandRun() *job.Run {
	env := cpuEnv()
	env.Workers[0].Instances = cluster.Range(1, 3)
	return &job.Run{
		ID: "run-k3j4h5g6f7", JobID: "job-a1b2c3d4e5", State: job.Provisioning, Priority: 5,
		Config: job.Config{
			Name: "训练任务 v2",
			Tags: map[string]string{"team": "nlp", "项目": "大模型"},
			OnDemand: &job.OnDemand{
				ResourcePackage: "pkg-1", ResourceGroup: "rg-1", Environment: env,
			},
			Package:    storage.COSPackage("cos://jobs-1250000000/train/v2.zip"),
			Entrypoint: "python main.py --config config.yaml",
			Mounts:     []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPath: "team/data", MountPath: "/data", ReadOnly: true}},
			Runtime: job.RuntimeEnv{
				Pip:     []string{"torch>=2.0", "pandas==2.2.2"},
				EnvVars: map[string]string{"WANDB_MODE": "offline", "EPOCHS": "3"},
			},
			Advanced:              map[string]string{"object-store-memory": "4000000000"},
			ActiveDeadlineSeconds: 7200,
			BackoffLimit:          2, // the platform's retries: KubeRay's stays 0
		},
	}
}

func queuedRun() *job.Run {
	r := onDemandRun()
	r.ID, r.State = "run-queued0001", job.Queued
	r.Config.Runtime = job.RuntimeEnv{Container: "ccr.ccs.tencentyun.com/team-a/deps:1.4", EnvVars: map[string]string{"A": "b"}}
	return r
}

func jobOpts() kube.RenderOptions {
	return kube.RenderOptions{
		VolumeResolver: kube.PVCResolver{},
		WorkingDir: func(u kube.PackageUse) (string, error) {
			o, err := storage.ParseCOSURL(u.Package.COS)
			if err != nil {
				return "", err
			}
			o.Region = "ap-guangzhou"
			return o.BucketURL() + "/" + o.Key, nil
		},
	}
}

// TestRenderGolden pins every rendered object in testdata/<case>.yaml; go
// test -run TestRenderGolden -update rewrites them.
func TestRenderGolden(t *testing.T) {
	t.Parallel()
	for _, rc := range renderCases() {
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			got := goldenYAML(t, rc.render(t, "team-a"))
			again := goldenYAML(t, rc.render(t, "team-a"))
			if !bytes.Equal(got, again) {
				t.Fatalf("two renders differ:\n%s\n---\n%s", got, again)
			}
			path := filepath.Join("testdata", rc.name+".yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run TestRenderGolden -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the rendered object (go test -run TestRenderGolden -update rewrites it):\n%s",
					path, lineDiff(string(want), string(got)))
			}
		})
	}
}

// goldenYAML returns obj as YAML without its status, which rendering
// leaves empty.
func goldenYAML(t *testing.T, obj client.Object) []byte {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	delete(u, "status")
	b, err := yaml.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lineDiff shows the lines of want and got from the first that differs.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	tail := func(l []string) string { return strings.Join(l[i:min(len(l), i+8)], "\n") }
	return "from line " + strconv.Itoa(i+1) + ":\n--- want\n" + tail(w) + "\n+++ got\n" + tail(g)
}

// TestRenderPassesKubeRayValidation runs KubeRay's own checks, which its
// operator makes in the controller and not at admission, on every
// rendered object.
func TestRenderPassesKubeRayValidation(t *testing.T) {
	t.Parallel()
	for _, rc := range renderCases() {
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			switch obj := rc.render(t, "team-a").(type) {
			case *rayv1.RayCluster:
				if err := utils.ValidateRayClusterMetadata(obj.ObjectMeta); err != nil {
					t.Error(err)
				}
				if err := utils.ValidateRayClusterSpec(&obj.Spec, obj.Annotations); err != nil {
					t.Error(err)
				}
			case *rayv1.RayJob:
				if err := utils.ValidateRayJobMetadata(obj.ObjectMeta); err != nil {
					t.Error(err)
				}
				if err := utils.ValidateRayJobSpec(obj); err != nil {
					t.Error(err)
				}
				if err := utils.ValidateRayClusterSpec(obj.Spec.RayClusterSpec, obj.Annotations); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestRenderMeaning checks what the golden files show, by meaning: the
// rules that the rendered objects carry out.
func TestRenderMeaning(t *testing.T) {
	t.Parallel()
	checks := map[string]func(t *testing.T, obj client.Object){
		"cluster-cpu": func(t *testing.T, obj client.Object) {
			rc := obj.(*rayv1.RayCluster)
			if rc.Name != "cls-a1b2c3d4e5" || rc.Namespace != "team-a" {
				t.Errorf("name %s/%s", rc.Namespace, rc.Name)
			}
			if rc.Annotations[kube.KeyName] != "训练集群" || rc.Annotations[kube.KeyClusterID] != "cls-a1b2c3d4e5" ||
				rc.Labels[kube.KeyClusterID] != "cls-a1b2c3d4e5" || rc.Annotations[kube.KeyGeneration] != "3" {
				t.Errorf("labels %v, annotations %v", rc.Labels, rc.Annotations)
			}
			if *rc.Spec.Suspend || *rc.Spec.EnableInTreeAutoscaling || rc.Spec.GcsFaultToleranceOptions != nil {
				t.Errorf("suspend %v, autoscaling %v, ft %v", *rc.Spec.Suspend, *rc.Spec.EnableInTreeAutoscaling, rc.Spec.GcsFaultToleranceOptions)
			}
			head := rc.Spec.HeadGroupSpec.Template.Spec.Containers[0]
			if head.Name != kube.HeadContainer || head.Image != "ccr.ccs.tencentyun.com/aidlc/ray:2.46.0-py310" {
				t.Errorf("head container %s %s", head.Name, head.Image)
			}
			wantRes(t, head, "4", "16Gi", "")
			if sc := rc.Spec.HeadGroupSpec.Template.Spec.SecurityContext; sc == nil || *sc.RunAsUser != kube.RayUID || !*sc.RunAsNonRoot {
				t.Errorf("a built-in image runs as user ray too: %+v", sc)
			}
			w := rc.Spec.WorkerGroupSpecs[0]
			wantRes(t, w.Template.Spec.Containers[0], "8", "32Gi", "")
			if *w.Replicas != 2 || *w.MinReplicas != 2 || *w.MaxReplicas != 2 {
				t.Errorf("replicas %d in %d–%d", *w.Replicas, *w.MinReplicas, *w.MaxReplicas)
			}
			if w.Labels["zone"] != "ap-guangzhou-3" || w.Resources != nil ||
				w.RayStartParams["resources"] != `'{"licence_slots":0.5,"ssd":1}'` {
				t.Errorf("labels %v, resources %v, start params %v", w.Labels, w.Resources, w.RayStartParams)
			}
			env := w.Template.Spec.Containers[0].Env
			if len(env) != 2 || env[0].Name != "OMP_NUM_THREADS" || env[1].Name != "TZ" {
				t.Errorf("env %v", env)
			}
			for _, p := range []map[string]string{rc.Spec.HeadGroupSpec.RayStartParams, w.RayStartParams} {
				if p["object-store-memory"] != "2000000000" || p["system-config"] != `'{"object_spilling_threshold": 0.9}'` {
					t.Errorf("advanced parameters: %v", p)
				}
			}
		},
		"cluster-autoscaling": func(t *testing.T, obj client.Object) {
			rc := obj.(*rayv1.RayCluster)
			if !*rc.Spec.EnableInTreeAutoscaling {
				t.Error("autoscaling is off")
			}
			cpu, mem := rc.Spec.WorkerGroupSpecs[0], rc.Spec.WorkerGroupSpecs[1]
			// An autoscaling group's replicas are the autoscaler's; its
			// maximum is what the reservation covers (Replicas), not the
			// range's 4.
			if cpu.Replicas != nil || *cpu.MinReplicas != 1 || *cpu.MaxReplicas != 3 {
				t.Errorf("cpu: %v in %d–%d", cpu.Replicas, *cpu.MinReplicas, *cpu.MaxReplicas)
			}
			if *mem.Replicas != 1 || *mem.MinReplicas != 1 || *mem.MaxReplicas != 1 {
				t.Errorf("mem: %d in %d–%d", *mem.Replicas, *mem.MinReplicas, *mem.MaxReplicas)
			}
		},
		"cluster-ha": func(t *testing.T, obj client.Object) {
			ft := obj.(*rayv1.RayCluster).Spec.GcsFaultToleranceOptions
			if ft == nil || ft.RedisAddress != goodRedis.RedisAddress || ft.RedisPassword.ValueFrom.SecretKeyRef.Name != "dlc-redis-ha" {
				t.Errorf("gcsFaultToleranceOptions %+v", ft)
			}
		},
		"cluster-gpu": func(t *testing.T, obj client.Object) {
			rc := obj.(*rayv1.RayCluster)
			for _, tmpl := range []corev1.PodTemplateSpec{rc.Spec.HeadGroupSpec.Template, rc.Spec.WorkerGroupSpecs[0].Template} {
				sc := tmpl.Spec.SecurityContext
				if sc == nil || *sc.RunAsUser != kube.RayUID || !*sc.RunAsNonRoot {
					t.Errorf("a custom image runs as user ray: %+v", sc)
				}
				if img := tmpl.Spec.Containers[0].Image; img != "ccr.ccs.tencentyun.com/team-a/ray-llm:2.46.0-cu121" {
					t.Errorf("image %s", img)
				}
			}
			wantRes(t, rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0], "20", "80Gi", "2")
			wantRes(t, rc.Spec.WorkerGroupSpecs[1].Template.Spec.Containers[0], "48", "384Gi", "4")
			if a100 := rc.Spec.WorkerGroupSpecs[1]; a100.Replicas != nil || *a100.MaxReplicas != 0 {
				t.Errorf("a100: %v in %d–%d", a100.Replicas, *a100.MinReplicas, *a100.MaxReplicas)
			}
		},
		"cluster-mounts": func(t *testing.T, obj client.Object) {
			rc := obj.(*rayv1.RayCluster)
			for _, tmpl := range []corev1.PodTemplateSpec{rc.Spec.HeadGroupSpec.Template, rc.Spec.WorkerGroupSpecs[0].Template} {
				if len(tmpl.Spec.Volumes) != 3 || len(tmpl.Spec.Containers[0].VolumeMounts) != 4 {
					t.Errorf("volumes %v, mounts %v", tmpl.Spec.Volumes, tmpl.Spec.Containers[0].VolumeMounts)
				}
				if tmpl.Spec.Volumes[2].PersistentVolumeClaim.ClaimName != "cos-weights" {
					t.Errorf("claim %v", tmpl.Spec.Volumes[2])
				}
				env := tmpl.Spec.Containers[0].Env
				if last := env[len(env)-1]; last.Name != kube.PodNameEnv {
					t.Errorf("dynamic sub-paths need %s: %v", kube.PodNameEnv, env)
				}
			}
		},
		"cluster-hibernated": func(t *testing.T, obj client.Object) {
			if rc := obj.(*rayv1.RayCluster); !*rc.Spec.Suspend {
				t.Error("a hibernated cluster renders suspended")
			}
		},
		"rayjob-ondemand": func(t *testing.T, obj client.Object) {
			rj := obj.(*rayv1.RayJob)
			s := rj.Spec
			if rj.Name != "run-k3j4h5g6f7" || s.JobId != "run-k3j4h5g6f7" || !s.ShutdownAfterJobFinishes || s.Suspend ||
				s.Entrypoint != "python main.py --config config.yaml" || s.SubmissionMode != rayv1.HTTPMode {
				t.Errorf("spec %+v", s)
			}
			if s.ActiveDeadlineSeconds == nil || *s.ActiveDeadlineSeconds != 7201 || s.BackoffLimit == nil || *s.BackoffLimit != 0 {
				t.Errorf("deadline %v, backoff limit %v: want the run's deadline and a second (L2), and no retry of KubeRay's (L3)", s.ActiveDeadlineSeconds, s.BackoffLimit)
			}
			if rj.Labels[kube.KeyRunID] != "run-k3j4h5g6f7" || rj.Labels[kube.KeyJobID] != "job-a1b2c3d4e5" || rj.Annotations[kube.KeyName] != "训练任务 v2" {
				t.Errorf("labels %v, annotations %v", rj.Labels, rj.Annotations)
			}
			var re map[string]any
			if err := yaml.Unmarshal([]byte(s.RuntimeEnvYAML), &re); err != nil {
				t.Fatal(err)
			}
			if re["working_dir"] != "https://jobs-1250000000.cos.ap-guangzhou.myqcloud.com/train/v2.zip" ||
				len(re["pip"].([]any)) != 2 || re["env_vars"].(map[string]any)["EPOCHS"] != "3" {
				t.Errorf("runtime env %v", re)
			}
			cs := s.RayClusterSpec
			if cs.Suspend != nil || !*cs.EnableInTreeAutoscaling || cs.WorkerGroupSpecs[0].Replicas != nil || *cs.WorkerGroupSpecs[0].MaxReplicas != 1 {
				t.Errorf("cluster spec %+v", cs)
			}
			if p := cs.HeadGroupSpec.RayStartParams["object-store-memory"]; p != "4000000000" {
				t.Errorf("advanced parameters: %v", cs.HeadGroupSpec.RayStartParams)
			}
			if m := cs.WorkerGroupSpecs[0].Template.Spec.Containers[0].VolumeMounts; len(m) != 1 || !m[0].ReadOnly {
				t.Errorf("job mounts %v", m)
			}
			if l := cs.HeadGroupSpec.Template.Labels; l[kube.KeyRunID] != "run-k3j4h5g6f7" || l[kube.KeyNodeGroup] != "head" {
				t.Errorf("pod labels %v", l)
			}
		},
		"rayjob-queued": func(t *testing.T, obj client.Object) {
			s := obj.(*rayv1.RayJob).Spec
			// The container is every node's image, not Ray's image_uri, which
			// Ray refuses beside a working_dir (runtime_env.py).
			if !s.Suspend || strings.Contains(s.RuntimeEnvYAML, "image_uri") || !strings.Contains(s.RuntimeEnvYAML, "working_dir") {
				t.Errorf("suspend %v, runtime env %q", s.Suspend, s.RuntimeEnvYAML)
			}
			cs := s.RayClusterSpec
			for _, tmpl := range append([]corev1.PodTemplateSpec{cs.HeadGroupSpec.Template}, cs.WorkerGroupSpecs[0].Template) {
				if img := tmpl.Spec.Containers[0].Image; img != "ccr.ccs.tencentyun.com/team-a/deps:1.4" {
					t.Errorf("image %s, want the run's container", img)
				}
			}
		},
	}
	for _, rc := range renderCases() {
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			check, ok := checks[rc.name]
			if !ok {
				t.Fatalf("no checks for %s", rc.name)
			}
			check(t, rc.render(t, "team-a"))
		})
	}
}

// wantRes checks that a container requests and is limited to cpu, memory
// and gpu ("" for none).
func wantRes(t *testing.T, c corev1.Container, cpu, memory, gpu string) {
	t.Helper()
	if !equality.Semantic.DeepEqual(c.Resources.Requests, c.Resources.Limits) {
		t.Errorf("%s: requests %v, limits %v", c.Name, c.Resources.Requests, c.Resources.Limits)
	}
	r := c.Resources.Limits
	g, hasGPU := r[kube.GPUResource]
	if got := r.Cpu().String(); got != cpu {
		t.Errorf("%s: cpu %s, want %s", c.Name, got, cpu)
	}
	if got := r.Memory().String(); got != memory {
		t.Errorf("%s: memory %s, want %s", c.Name, got, memory)
	}
	if hasGPU != (gpu != "") || (hasGPU && g.String() != gpu) {
		t.Errorf("%s: gpu %v, want %q", c.Name, r, gpu)
	}
}

func TestRenderRefuses(t *testing.T) {
	t.Parallel()
	type tweak struct {
		cluster func(*cluster.Cluster, *kube.RenderOptions)
		run     func(*job.Run, *kube.RenderOptions)
	}
	errOther := errors.New("other")
	cases := []struct {
		name  string
		tweak tweak
		path  string // of each *errs.FieldError expected, space-separated, when the error is ErrInvalid
		is    error
	}{
		{name: "no id", tweak: tweak{cluster: func(c *cluster.Cluster, _ *kube.RenderOptions) { c.ID = "" }}, path: "id"},
		{name: "no state", tweak: tweak{cluster: func(c *cluster.Cluster, _ *kube.RenderOptions) { c.State = "" }}, path: "state"},
		{name: "unknown node spec", tweak: tweak{cluster: func(c *cluster.Cluster, _ *kube.RenderOptions) {
			c.Live.Workers[0].NodeSpec = "cu.3c7g"
		}}, path: "live.workerGroups[0].nodeSpec"},
		{name: "no image", tweak: tweak{cluster: func(c *cluster.Cluster, _ *kube.RenderOptions) {
			c.Live = nil
			c.Spec.Image = ""
		}}, path: "image"},
		{name: "high availability without redis", tweak: tweak{cluster: func(c *cluster.Cluster, _ *kube.RenderOptions) {
			c.Live.Head.HighAvailability = true
		}}, path: "live.headGroup.highAvailability"},
		{name: "env var of KubeRay's", tweak: tweak{cluster: func(c *cluster.Cluster, _ *kube.RenderOptions) {
			c.Live.Head.Env = map[string]string{"RAY_REDIS_ADDRESS": "redis:6379"}
		}}, path: "live.headGroup.envVars[RAY_REDIS_ADDRESS]"},
		{name: "env var of the platform's", tweak: tweak{cluster: func(c *cluster.Cluster, _ *kube.RenderOptions) {
			c.Live.Workers[0].Env = map[string]string{kube.PodNameEnv: "x"}
		}}, path: "live.workerGroups[0].envVars[DLC_POD_NAME]"},
		{name: "label of the platform's", tweak: tweak{cluster: func(c *cluster.Cluster, _ *kube.RenderOptions) {
			c.Live.Workers[0].Labels = map[string]string{kube.KeyClusterID: "cls-other"}
		}}, path: "live.workerGroups[0].labels[dlc.aidlc.io/cluster-id]"},
		{name: "ray's label", tweak: tweak{cluster: func(c *cluster.Cluster, _ *kube.RenderOptions) {
			c.Live.Workers[0].Labels = map[string]string{"ray.io/node-type": "x"}
		}}, path: "live.workerGroups[0].labels[ray.io/node-type]"},
		{name: "platform-managed advanced parameter", tweak: tweak{cluster: func(c *cluster.Cluster, _ *kube.RenderOptions) {
			c.Spec.Advanced = map[string]string{"num-cpus": "64"}
		}}, path: "advanced[num-cpus]"},
		{name: "redis advanced parameter", tweak: tweak{cluster: func(c *cluster.Cluster, _ *kube.RenderOptions) {
			c.Spec.Advanced = map[string]string{"redis-password": "hunter2"}
		}}, path: "advanced[redis-password]"},
		{name: "every problem at once", tweak: tweak{cluster: func(c *cluster.Cluster, o *kube.RenderOptions) {
			c.Live.Head.NodeSpec = "cu.3c7g"
			c.Live.Head.HighAvailability = true
			c.Spec.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPath: "../up", MountPath: "/data"}}
			c.Spec.Advanced = map[string]string{"num-gpus": "1"}
			o.VolumeResolver = kube.PVCResolver{}
		}}, path: "live.headGroup.nodeSpec live.headGroup.highAvailability mounts[0].subPath advanced[num-gpus]"},
		{name: "mounts without a resolver", tweak: tweak{cluster: func(c *cluster.Cluster, _ *kube.RenderOptions) {
			c.Spec.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/data"}}
		}}},
		{name: "bad mount", tweak: tweak{cluster: func(c *cluster.Cluster, o *kube.RenderOptions) {
			c.Spec.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPath: "../up", MountPath: "/data"}}
			o.VolumeResolver = kube.PVCResolver{}
		}}, path: "mounts[0].subPath"},
		{name: "resolver error", tweak: tweak{cluster: func(c *cluster.Cluster, o *kube.RenderOptions) {
			c.Spec.Mounts = []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/data"}}
			o.VolumeResolver = kube.PVCResolver{Strict: true}
		}}, is: errs.ErrNotFound},
		{name: "run on a cluster", tweak: tweak{run: func(r *job.Run, _ *kube.RenderOptions) {
			r.Config.OnDemand, r.Config.Cluster = nil, "cls-a1b2c3d4e5"
		}}, path: "runMode"},
		{name: "invalid run config", tweak: tweak{run: func(r *job.Run, _ *kube.RenderOptions) {
			r.Config.Entrypoint = ""
		}}, path: "entrypoint"},
		{name: "run without an id", tweak: tweak{run: func(r *job.Run, _ *kube.RenderOptions) { r.ID = "" }}, path: "id"},
		{name: "run env var of KubeRay's", tweak: tweak{run: func(r *job.Run, _ *kube.RenderOptions) {
			r.Config.OnDemand.Environment.Head.Env = map[string]string{"REDIS_PASSWORD": "x"}
		}}, path: "onDemand.environment.headGroup.envVars[REDIS_PASSWORD]"},
		{name: "local package without a way to serve it", tweak: tweak{run: func(r *job.Run, o *kube.RenderOptions) {
			r.Config.Package = storage.LocalPackage("/tmp/job.zip")
			o.WorkingDir = nil
		}}, path: "package.local"},
		{name: "working dir error", tweak: tweak{run: func(_ *job.Run, o *kube.RenderOptions) {
			o.WorkingDir = func(kube.PackageUse) (string, error) { return "", errOther }
		}}, is: errOther},
		{name: "COS package without a way to serve it (Ray has no cos://)", tweak: tweak{run: func(_ *job.Run, o *kube.RenderOptions) {
			o.WorkingDir = nil
		}}, path: "package.cos"},
		{name: "working dir Ray refuses: cos://", tweak: tweak{run: func(r *job.Run, o *kube.RenderOptions) {
			o.WorkingDir = func(u kube.PackageUse) (string, error) { return u.Package.COS, nil }
		}}, path: "package"},
		{name: "working dir Ray refuses: http (2.41, 2.46)", tweak: tweak{run: func(r *job.Run, o *kube.RenderOptions) {
			o.WorkingDir = func(kube.PackageUse) (string, error) { return "http://127.0.0.1:9/job.zip", nil }
		}}, path: "package"},
		{name: "working dir Ray refuses: not a .zip path", tweak: tweak{run: func(r *job.Run, o *kube.RenderOptions) {
			o.WorkingDir = func(kube.PackageUse) (string, error) { return "https://h.example/get?f=job.zip", nil }
		}}, path: "package"},
		{name: "working dir Ray refuses: a local path", tweak: tweak{run: func(r *job.Run, o *kube.RenderOptions) {
			o.WorkingDir = func(kube.PackageUse) (string, error) { return "/tmp/job.zip", nil }
		}}, path: "package"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var err error
			if tc.tweak.cluster != nil {
				c, o := running("cls-a1b2c3d4e5", "集群", cpuEnv()), kube.RenderOptions{}
				tc.tweak.cluster(c, &o)
				var rc *rayv1.RayCluster
				rc, err = kube.RenderRayCluster(c, o)
				if rc != nil {
					t.Errorf("rendered %v", rc.Name)
				}
			} else {
				r, o := onDemandRun(), jobOpts()
				tc.tweak.run(r, &o)
				var rj *rayv1.RayJob
				rj, err = kube.RenderRayJob(r, o)
				if rj != nil {
					t.Errorf("rendered %v", rj.Name)
				}
			}
			t.Logf("refused: %v", err)
			switch {
			case err == nil:
				t.Fatal("rendered")
			case tc.is != nil:
				if !errors.Is(err, tc.is) {
					t.Errorf("error is not %v", tc.is)
				}
			case tc.path != "":
				if !errors.Is(err, errs.ErrInvalid) {
					t.Fatalf("error is not ErrInvalid")
				}
				var paths []string
				for _, fe := range errs.Fields(err) {
					paths = append(paths, string(fe.Path))
				}
				for _, want := range strings.Fields(tc.path) {
					if !slices.Contains(paths, want) {
						t.Errorf("paths %v, want %s among them", paths, want)
					}
				}
			}
		})
	}
}

// TestAdvancedParamsReachRayIntact feeds the start parameters that
// rendering quotes through bash, as KubeRay's "ray start" command line
// does (with the kubelet's "$$" → "$" first), and checks that every value
// arrives as it was written and nothing else runs.
func TestAdvancedParamsReachRayIntact(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	values := []string{
		"2000000000", "true", "a,b=c", "", "two words", "it's", `"double"`, "$(id)", "$HOME", "`id`",
		"; touch /tmp/pwned", "a\\b", `{"object_spilling_threshold": 0.9}`, "'", "'''", "*", "~",
	}
	c := running("cls-a1b2c3d4e5", "集群", cpuEnv())
	c.Spec.Advanced = map[string]string{}
	for i, v := range values {
		c.Spec.Advanced["p"+strconv.Itoa(i)] = v
	}
	rc, err := kube.RenderRayCluster(c, kube.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	params := rc.Spec.HeadGroupSpec.RayStartParams
	var line strings.Builder
	line.WriteString("printf '%s\\n'")
	for i := range values {
		// As KubeRay's convertParamMap writes a parameter (boolean values aside).
		line.WriteString(" --p" + strconv.Itoa(i) + "=" + params["p"+strconv.Itoa(i)])
	}
	cmd := exec.Command(bash, "-c", "--", strings.ReplaceAll(line.String(), "$$", "$"))
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(values) {
		t.Fatalf("bash printed %d words, want %d: %q", len(got), len(values), got)
	}
	for i, v := range values {
		if want := "--p" + strconv.Itoa(i) + "=" + v; got[i] != want {
			t.Errorf("value %q arrived as %q", v, got[i])
		}
	}
}

func TestSetOwner(t *testing.T) {
	t.Parallel()
	gvk := schema.GroupVersionKind{Group: "dlc.aidlc.io", Version: "v1alpha1", Kind: "ComputeCluster"}
	owner := &corev1.ConfigMap{}
	owner.Name, owner.Namespace, owner.UID = "cls-a1b2c3d4e5", "team-a", types.UID("uid-1")
	rc, err := kube.RenderRayCluster(running("cls-a1b2c3d4e5", "集群", cpuEnv()), kube.RenderOptions{Namespace: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // setting it again replaces it
		if err := kube.SetOwner(rc, owner, gvk); err != nil {
			t.Fatal(err)
		}
	}
	refs := rc.OwnerReferences
	if len(refs) != 1 || refs[0].UID != "uid-1" || refs[0].Kind != "ComputeCluster" || refs[0].APIVersion != "dlc.aidlc.io/v1alpha1" ||
		!*refs[0].Controller || !*refs[0].BlockOwnerDeletion {
		t.Fatalf("owner references %+v", refs)
	}
	other := owner.DeepCopy()
	other.UID = "uid-2"
	if err := kube.SetOwner(rc, other, gvk); err == nil {
		t.Error("a second controller was accepted")
	}
	other.Namespace = "team-b"
	if err := kube.SetOwner(rc, other, gvk); err == nil {
		t.Error("an owner in another namespace was accepted")
	}
	if err := kube.SetOwner(rc, &corev1.ConfigMap{}, gvk); err == nil {
		t.Error("an owner without a UID was accepted")
	}
}
