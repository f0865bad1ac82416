package kube

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

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
// and the run's pip or conda dependencies and env_vars. A container image
// in the runtime environment is the image of every node of the RayJob's
// cluster (job.Config.RunEnvironment), not Ray's image_uri, which Ray
// refuses beside a working_dir. With o.SuspendRayJob the RayJob is suspended, for a run
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
	runtimeEnv, err := runtimeEnvYAML(cfg, r.ID, o)
	if err != nil {
		return nil, err
	}
	ids, tags := withTags(idLabels(map[string]string{KeyRunID: r.ID, KeyJobID: r.JobID, KeyResourceGroup: cfg.OnDemand.ResourceGroup}), cfg.Tags)
	runEnv := cfg.RunEnvironment() // the runtime env's container, if any, is every node's image
	env := &runEnv
	spec, err := renderClusterSpec(clusterInput{
		env: env, path: "onDemand.environment", rules: cluster.JobRules, replicas: replicas,
		mounts: cfg.Mounts, mountRule: "J9",
		advanced: cfg.Advanced, advancedRule: "J11", maxAdvanced: -1,
		podLabels: ids, resourceGroup: cfg.OnDemand.ResourceGroup,
		secretEnv: cfg.Runtime.SecretEnv,
	}, o)
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{KeyRunID: r.ID, KeyName: cfg.Name}
	if r.JobID != "" {
		annotations[KeyJobID] = r.JobID
	}
	if tags != "" {
		annotations[KeyTags] = tags
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
func runtimeEnvYAML(cfg *job.Config, runID string, o RenderOptions) (string, error) {
	m, err := runtimeEnv(cfg, runID, o)
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
// working_dir, pip or conda, env_vars.
func runtimeEnv(cfg *job.Config, runID string, o RenderOptions) (map[string]any, error) {
	m := map[string]any{}
	if !cfg.Package.IsZero() {
		dir, err := workingDir(cfg, runID, o)
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
	// No image_uri: Ray takes it only with config and env_vars, never with
	// a working_dir (runtime_env.py); an on-demand run's container is its
	// cluster's image instead (job.Config.RunEnvironment), and a run on an
	// existing cluster may not have one (J10).
	return m, nil
}

// workingDir is the working_dir of run runID's package, as a URI Ray
// takes (rayWorkingDirProblem), valid for as long as a node of the run
// may fetch it (packageUse).
func workingDir(cfg *job.Config, runID string, o RenderOptions) (string, error) {
	if o.WorkingDir == nil {
		if cfg.Package.COS == "" {
			return "", errs.List{errs.Invalid("package.local", "J5", cfg.Package.Local,
				"a Ray cluster cannot read a local package: upload it to COS first, or give the backend a way to serve it (RenderOptions.WorkingDir)")}.ToError()
		}
		return "", errs.List{errs.Invalid("package.cos", "J5", cfg.Package.COS,
			"Ray cannot fetch a cos:// URI (it knows https, s3, gs, gcs and file: protocol.py): give the backend RenderOptions.WorkingDir, e.g. kube.COSWorkingDir, which presigns an HTTPS URL")}.ToError()
	}
	dir, err := o.WorkingDir(packageUse(cfg, runID, o))
	if err != nil {
		return "", fmt.Errorf("kube: the URL of job package %s: %w", cfg.Package, err)
	}
	if msg := rayWorkingDirProblem(dir); msg != "" {
		return "", errs.List{errs.Invalid("package", "J5", redactQuery(dir), "RenderOptions.WorkingDir returned a working_dir Ray refuses: "+msg)}.ToError()
	}
	return dir, nil
}

// packageUse is what RenderOptions.WorkingDir is asked for run runID:
// its package, for as long as its deadline and PackageGrace when it has
// one, else for the options' PackageLifetime.
func packageUse(cfg *job.Config, runID string, o RenderOptions) PackageUse {
	use := PackageUse{Package: cfg.Package, RunID: runID, For: o.PackageLifetime}
	if use.For <= 0 {
		use.For = DefaultPackageLifetime
	}
	if d := cfg.ActiveDeadlineSeconds; d > 0 {
		use.For = min(use.For, time.Duration(d)*time.Second+PackageGrace)
	}
	return use
}

// rayRemoteSchemes are the schemes of the remote URIs Ray fetches a
// working_dir from (protocol.py, Protocol.remote_protocols, at 2.41 and
// 2.46: https, s3, gs, file; gcs is Ray's own package store; plain http
// only on newer Ray).
var rayRemoteSchemes = []string{"https", "s3", "gs", "gcs", "file"}

// rayWorkingDirProblem says why Ray would refuse dir as a job's
// working_dir, or "" when it takes it: a URI of one of its protocols whose
// path ends in .zip (validation.py, parse_and_validate_working_dir; gcs
// names its packages _ray_pkg_<hash>.zip).
func rayWorkingDirProblem(dir string) string {
	u, err := url.Parse(dir)
	switch {
	case err != nil:
		return "not a URI: " + err.Error()
	case !slices.Contains(rayRemoteSchemes, u.Scheme):
		return fmt.Sprintf("Ray fetches a working_dir only by the protocols %s, not %q", strings.Join(rayRemoteSchemes, ", "), u.Scheme)
	case !strings.HasSuffix(u.Path, ".zip"):
		return "Ray fetches a remote working_dir only when the URL's path ends in .zip"
	}
	return ""
}

// redactQuery returns a URL without its query, where a presigned URL
// keeps its signature.
func redactQuery(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[:i] + "?…"
	}
	return s
}
