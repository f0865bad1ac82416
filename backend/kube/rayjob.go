package kube

import (
	"fmt"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// RenderRayJob renders an on-demand run as a KubeRay RayJob (ray.io/v1)
// named RayJobName(r.ID): its rayClusterSpec is the run's on-demand
// environment rendered as RenderRayCluster renders a cluster's, with
// every worker group at its minimum, the run's mounts on every pod and
// its advanced parameters as start parameters. The cluster is shut down
// when the job finishes (shutdownAfterJobFinishes). Ray's submission id
// (jobId) is the run id, so a retried submission never starts the run
// twice; KubeRay submits it over the head's HTTP API (HTTPMode, no
// submitter pod).
//
// The runtime environment (runtimeEnvYAML) holds working_dir, the job
// package's URL (from o.WorkingDir, or a COS package's URI as it is),
// and the run's pip or conda dependencies, env_vars and container image
// (image_uri). With o.SuspendRayJob the RayJob is suspended, for a run
// that waits for admission.
//
// Runs on an existing cluster or a cluster group do not render: they go
// to the cluster's Ray Jobs API. Bad input renders nothing: the run's
// config is validated first, and a problem is errors.Is errs.ErrInvalid.
func RenderRayJob(r *job.Run, o RenderOptions) (*rayv1.RayJob, error) {
	return renderRayJob(r, o, nil)
}

// renderRayJob is RenderRayJob with each worker group's replicas (an
// autoscaling group's ceiling: what the cluster's reservation covers);
// a group not in replicas has its minimum.
func renderRayJob(r *job.Run, o RenderOptions, replicas map[string]int) (*rayv1.RayJob, error) {
	if r == nil || r.ID == "" {
		return nil, errs.List{errs.Required("id", "", "a run to render needs an id")}.ToError()
	}
	cfg := &r.Config
	if cfg.OnDemand == nil {
		return nil, errs.List{errs.Invalid("runMode", "J2", string(cfg.Mode()),
			"only an on-demand run renders as a RayJob; a run on a cluster goes to that cluster's Ray Jobs API")}.ToError()
	}
	if err := cfg.ValidateWith(o.catalogs()); err != nil {
		return nil, err
	}
	runtimeEnv, err := runtimeEnvYAML(cfg, o)
	if err != nil {
		return nil, err
	}
	ids := idLabels(map[string]string{KeyRunID: r.ID, KeyJobID: r.JobID})
	env := &cfg.OnDemand.Environment
	spec, err := renderClusterSpec(clusterInput{
		env: env, path: "onDemand.environment", rules: cluster.JobRules, replicas: replicas,
		mounts: cfg.Mounts, mountRule: "J9",
		advanced: cfg.Advanced, advancedRule: "J11", maxAdvanced: -1,
		podLabels: ids,
		secretEnv: cfg.Runtime.SecretEnv,
	}, o)
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{KeyRunID: r.ID, KeyName: cfg.Name}
	if r.JobID != "" {
		annotations[KeyJobID] = r.JobID
	}
	return &rayv1.RayJob{
		TypeMeta: metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayJob"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        RayJobName(r.ID),
			Namespace:   o.Namespace,
			Labels:      withManagedBy(ids),
			Annotations: annotations,
		},
		Spec: rayv1.RayJobSpec{
			Entrypoint:               cfg.Entrypoint,
			RuntimeEnvYAML:           runtimeEnv,
			JobId:                    r.ID,
			SubmissionMode:           rayv1.HTTPMode,
			BackoffLimit:             ptr.To[int32](0),
			ShutdownAfterJobFinishes: true,
			// The cluster outlives its job by a minute: the platform reads
			// the job's logs from its head to keep them, then deletes the
			// on-demand cluster itself (which takes the RayJob along); the
			// TTL is the fallback should the platform not come.
			TTLSecondsAfterFinished: keepFinishedSeconds,
			Suspend:                 o.SuspendRayJob,
			RayClusterSpec:          spec,
			// The run's deadline (L2), which the platform enforces from the
			// run's submission; KubeRay's counts from the RayJob's start,
			// later, so it only backs the platform's up.
			ActiveDeadlineSeconds: activeDeadline(cfg),
		},
	}, nil
}

// activeDeadline is a config's ActiveDeadlineSeconds for a RayJob, one
// second more: KubeRay counts from the RayJob's start time, which it
// keeps in whole seconds (truncated), so that its deadline never comes
// before the platform's. nil when it has none.
func activeDeadline(cfg *job.Config) *int32 {
	if cfg.ActiveDeadlineSeconds <= 0 {
		return nil
	}
	return ptr.To(int32(cfg.ActiveDeadlineSeconds + 1))
}

// keepFinishedSeconds is how long KubeRay keeps a finished RayJob's
// cluster before it deletes it (RayJobSpec.TTLSecondsAfterFinished).
const keepFinishedSeconds = 60

// runtimeEnvYAML renders a run's Ray runtime environment (J5, J10) as
// YAML with sorted keys; "" when there is nothing to set.
func runtimeEnvYAML(cfg *job.Config, o RenderOptions) (string, error) {
	m, err := runtimeEnv(cfg, o)
	if err != nil || len(m) == 0 {
		return "", err
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("kube: rendering the runtime environment: %w", err)
	}
	return string(b), nil
}

// runtimeEnv is a run's Ray runtime environment (J10): the package as
// working_dir, pip or conda, env_vars, and a container as image_uri.
func runtimeEnv(cfg *job.Config, o RenderOptions) (map[string]any, error) {
	m := map[string]any{}
	if !cfg.Package.IsZero() {
		dir, err := workingDir(cfg, o)
		if err != nil {
			return nil, err
		}
		m["working_dir"] = dir
	}
	rt := cfg.Runtime
	if len(rt.Pip) > 0 {
		m["pip"] = rt.Pip
	}
	if len(rt.Conda) > 0 {
		m["conda"] = map[string]any{"dependencies": rt.Conda}
	}
	if len(rt.EnvVars) > 0 {
		m["env_vars"] = rt.EnvVars
	}
	if rt.Container != "" {
		m["image_uri"] = rt.Container
	}
	return m, nil
}

func workingDir(cfg *job.Config, o RenderOptions) (string, error) {
	if o.WorkingDir != nil {
		dir, err := o.WorkingDir(cfg.Package)
		if err != nil {
			return "", fmt.Errorf("kube: the URL of job package %s: %w", cfg.Package, err)
		}
		return dir, nil
	}
	if cfg.Package.COS == "" {
		return "", errs.List{errs.Invalid("package.local", "J5", cfg.Package.Local,
			"a Ray cluster cannot read a local package: upload it to COS first, or give the backend a way to serve it (RenderOptions.WorkingDir)")}.ToError()
	}
	return cfg.Package.COS, nil
}
