package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/storage"
)

// Names of the Ray containers and the resource of a GPU.
const (
	HeadContainer   = "ray-head"
	WorkerContainer = "ray-worker"
	GPUResource     = corev1.ResourceName("nvidia.com/gpu")
)

// RayUID is the user id that every Ray container runs as: user "ray" of
// the Ray images (C5).
const RayUID = 1000

// podSecurity is the pod-level security context of every rendered pod:
// Ray's user (RayUID, whatever the image says, so a custom image runs as
// user ray too and the kubelet can check that the user is not root) and
// the container runtime's default seccomp profile. It covers the
// containers KubeRay adds (the autoscaler on the head, the wait-gcs-ready
// init container on workers). With containerSecurity it meets the
// restricted Pod Security profile.
func podSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsUser:      ptr.To[int64](RayUID),
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerSecurity is the security context of every Ray container and
// of the autoscaler KubeRay adds to an autoscaling head: no privilege
// escalation (setuid binaries, sudo), no Linux capabilities. KubeRay
// copies the Ray container's onto the workers' wait-gcs-ready init
// container.
func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// RenderOptions is what rendering needs besides the cluster or run. The
// zero value renders with the built-in catalogs into no namespace, and
// refuses mounts (no VolumeResolver) and high availability (no Redis).
type RenderOptions struct {
	// Namespace of the rendered objects; "" leaves it to the caller.
	Namespace string
	// Catalogs are the node specs and built-in images to render with; a
	// zero part means the built-in one (quota.DefaultCatalog,
	// cluster.DefaultImages, whose images live under
	// cluster.DefaultRegistry).
	Catalogs cluster.Catalogs
	// VolumeResolver turns storage instances into volumes (see
	// RenderMounts); mounts need one. The admission policies of
	// config/admission admit PersistentVolumeClaim volumes only (as
	// PVCResolver returns). It is called with
	// context.Background() and should do no I/O, as rendering does none.
	VolumeResolver VolumeResolver
	// RedisAddress is the external Redis ("host:port") that keeps the GCS
	// state of a high-availability head (gcsFaultToleranceOptions); a
	// cluster with a high-availability head cannot render without it.
	RedisAddress string
	// RedisPassword, optional, is the Secret key holding that Redis's
	// password. The admission policies of config/admission admit only a
	// Secret whose name starts with "dlc-redis".
	RedisPassword *corev1.SecretKeySelector
	// RedisFor, when set, returns the Redis of a resource group's
	// high-availability heads, in place of RedisAddress and RedisPassword:
	// each resource group its own Redis, or its own ACL user on a shared
	// one, so that one team's head code, which can read the credentials
	// its own GCS uses, cannot read or write another team's GCS state
	// (job records, the internal KV) with them. It returns nil for a
	// resource group that has none (its high-availability heads do not
	// render). It should do no I/O, as rendering does none.
	RedisFor func(resourceGroup string) (*Redis, error)
	// WorkingDir returns the URI that Ray fetches a job package from (the
	// runtime environment's working_dir), valid for use.For: e.g. a
	// presigned HTTPS URL of a COS object (COSWorkingDir). Ray fetches it
	// lazily, on every node when it first starts a worker of the job (an
	// autoscaled worker, hours after the submit), not once at submission.
	// It must be a URI Ray takes: https, s3, gs, gcs or file, with a path
	// ending in .zip; anything else is refused (J5) before it is sent. When
	// nil, no package renders: Ray cannot fetch a cos:// URI. It is called
	// when a run is submitted to a cluster's Jobs API, and when an
	// on-demand run's RayJob is applied, at admission.
	WorkingDir func(use PackageUse) (string, error)
	// PackageLifetime is how long a run's package URL must stay valid when
	// the run has no deadline (PackageUse.For); 0 means
	// DefaultPackageLifetime. A run with a deadline asks for its deadline
	// and PackageGrace.
	PackageLifetime time.Duration
	// SuspendRayJob renders RayJobs with suspend: true, for a run that
	// waits for admission (as Kueue does); admission clears it.
	SuspendRayJob bool
}

// PackageUse is what RenderOptions.WorkingDir is asked for: a run's job
// package, and how long from now a node of the run may first fetch it.
type PackageUse struct {
	// Package is the run's job package.
	Package storage.Package
	// RunID is the run's id.
	RunID string
	// For is how long the URI must stay valid: the run's deadline
	// (activeDeadlineSeconds, counted from its submission, so at most what
	// is left of it) and PackageGrace, or RenderOptions.PackageLifetime
	// for a run without one.
	For time.Duration
}

// DefaultPackageLifetime is how long a package URL of a run without a
// deadline is valid when RenderOptions.PackageLifetime is zero: a week.
// A node of such a run that starts later than that cannot fetch the
// package; give long runs a deadline, or a longer lifetime.
const DefaultPackageLifetime = 7 * 24 * time.Hour

// PackageGrace is what a run with a deadline asks for beyond it: the
// URL outlives the run's end by that much.
const PackageGrace = 15 * time.Minute

// COSWorkingDir returns a RenderOptions.WorkingDir that turns a package in
// COS into what c.WorkingDir gives for it: a presigned HTTPS URL valid for
// PackageUse.For (o.Expiry is replaced), or, with o.ClusterCredentials,
// its s3:// URI. A local package is refused: upload it first.
func COSWorkingDir(c *storage.COSClient, o storage.WorkingDirOptions) func(PackageUse) (string, error) {
	return func(use PackageUse) (string, error) {
		if use.Package.COS == "" {
			return "", fmt.Errorf("kube: package %s is not in COS: upload it first (storage.COSClient.UploadPackage)", use.Package)
		}
		obj, err := storage.ParseCOSURL(use.Package.COS)
		if err != nil {
			return "", err
		}
		opt := o
		opt.Expiry = use.For
		return c.WorkingDir(context.Background(), obj, opt)
	}
}

func (o RenderOptions) catalogs() cluster.Catalogs {
	c := o.Catalogs
	if c.Nodes.Len() == 0 {
		c.Nodes = quota.DefaultCatalog()
	}
	if len(c.Images.Names()) == 0 {
		c.Images = cluster.DefaultImages()
	}
	return c
}

// RenderRayCluster renders a cluster as a KubeRay RayCluster (ray.io/v1)
// named RayClusterName(c.ID):
//
//   - the environment is the one Ray runs since the last start (c.Live)
//     when there is one, else the spec's;
//   - created, creating, hibernating, hibernated and deleting clusters
//     render with spec.suspend true (no pods), starting, running and
//     abnormal ones with false;
//   - each node group is one container (ray-head, ray-worker) whose
//     requests and limits are its node spec's cpu, memory and, for GU
//     specs, nvidia.com/gpu (but an autoscaling head's requests, which
//     leave AutoscalerRequests to its autoscaler container, so that each
//     pod requests its node spec in all, as a ResourceQuota counts it); its environment variables are the
//     container's; its Ray node labels are the group's labels field and
//     its logical resources the "resources" start parameter;
//   - every pod meets the restricted Pod Security profile: it runs as
//     user ray (uid 1000, a custom image too), non-root, with the
//     runtime's default seccomp profile, and every container (the
//     autoscaler's included) without privilege escalation or
//     capabilities; no pod mounts a ServiceAccount token but an
//     autoscaling head, whose autoscaler talks to the API server;
//   - a worker group has c.Replicas of its name workers (its minimum when
//     unset, clamped into its range); any group with min < max turns on
//     KubeRay's in-tree autoscaler, and such a group's maxReplicas is
//     c.Replicas of it (what the reservation covers) and its replicas are
//     left to the autoscaler;
//   - a high-availability head gets GCS fault tolerance with
//     o.RedisAddress. KubeRay runs one head and restarts it, with the GCS
//     state kept in Redis; it keeps no standby head (kuberay#522), so a
//     takeover takes as long as a new head pod takes to start;
//   - the spec's mounts are on every pod (through o.VolumeResolver), its
//     advanced parameters are start parameters of every node.
//
// Bad input renders nothing: the environment, mounts and advanced
// parameters are checked first, and a problem is errors.Is
// errs.ErrInvalid. The result has no owner: see SetOwner.
func RenderRayCluster(c *cluster.Cluster, o RenderOptions) (*rayv1.RayCluster, error) {
	if c == nil || c.ID == "" {
		return nil, errs.List{errs.Required("id", "", "a cluster to render needs an id")}.ToError()
	}
	var suspend bool
	switch c.State {
	case cluster.Creating, cluster.Created, cluster.Hibernating, cluster.Hibernated, cluster.Deleting:
		suspend = true
	case cluster.Starting, cluster.Running, cluster.Abnormal:
	default:
		return nil, errs.List{errs.Invalid("state", "C11", string(c.State), "not a cluster state")}.ToError()
	}
	env, envPath := &c.Spec.Environment, errs.Path("")
	if c.Live != nil {
		env, envPath = &c.Live.Environment, "live"
	}
	rg := c.Spec.ResourceGroup
	if c.Live != nil && c.Live.ResourceGroup != "" {
		rg = c.Live.ResourceGroup
	}
	ids, tags := withTags(idLabels(map[string]string{KeyClusterID: c.ID, KeyResourceGroup: rg}), c.Spec.Tags)
	spec, err := renderClusterSpec(clusterInput{
		env: env, path: envPath, rules: cluster.Rules{Image: "C5", Head: "C7", Workers: "C8"},
		replicas: c.Replicas, mounts: c.Spec.Mounts, mountRule: "C9",
		advanced: c.Spec.Advanced, advancedRule: "C10", maxAdvanced: cluster.MaxAdvanced,
		podLabels: ids, rayToken: c.Spec.RayToken, resourceGroup: rg,
	}, o)
	if err != nil {
		return nil, err
	}
	spec.Suspend = ptr.To(suspend)
	annotations := map[string]string{
		KeyClusterID:  c.ID,
		KeyName:       c.Spec.Name,
		KeyGeneration: strconv.FormatInt(c.Generation, 10),
	}
	if tags != "" {
		annotations[KeyTags] = tags
	}
	rc := &rayv1.RayCluster{
		TypeMeta: metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        RayClusterName(c.ID),
			Namespace:   o.Namespace,
			Labels:      withManagedBy(ids),
			Annotations: annotations,
		},
		Spec: *spec,
	}
	return rc, nil
}

// clusterInput is what a RayClusterSpec renders from: a cluster's or an
// on-demand run's, with the rule IDs and paths its problems report.
type clusterInput struct {
	env      *cluster.Environment
	path     errs.Path // of env, in the problems reported
	rules    cluster.Rules
	replicas map[string]int

	mounts    []storage.Mount
	mountRule string

	advanced     map[string]string
	advancedRule string
	maxAdvanced  int // < 0: no limit

	podLabels     map[string]string // on every pod template
	resourceGroup string            // the resource group drawn on (its Redis, RenderOptions.RedisFor)
	// secretEnv are variables from Secrets on every Ray container: an
	// on-demand run's runtime environment (runtimeEnv.secretEnvVars), so
	// that its driver, on the head, and its workers have them.
	secretEnv map[string]cluster.SecretKeyRef
	// rayToken, when set, turns on Ray's token authentication on every
	// node (and the autoscaler), the token from this Secret key.
	rayToken *cluster.SecretKeyRef
}

// renderClusterSpec renders a compute environment as a RayClusterSpec,
// without suspend: a RayCluster sets it, a RayJob's cluster leaves it out.
func renderClusterSpec(in clusterInput, o RenderOptions) (*rayv1.RayClusterSpec, error) {
	cat := o.catalogs()
	env := in.env
	l := env.Problems(cat, in.rules)
	l = append(l, nodeProblems(in.rules, env)...)
	l = l.Prefix(in.path)
	for _, k := range errs.SortedKeys(in.secretEnv) {
		l = append(l, reservedEnvProblems(errs.NewPath("runtimeEnv").Child("secretEnvVars").Key(k), "J10", k)...)
	}
	l = append(l, storage.ValidateMounts(errs.NewPath("mounts"), in.mountRule, in.mounts)...)
	l = append(l, check.Advanced(errs.NewPath("advanced"), in.advancedRule, in.maxAdvanced, in.advanced)...)
	l = append(l, advancedProblems(in.advanced)...)
	var redis *Redis
	if env.Head.HighAvailability {
		var err error
		if redis, err = o.redis(in.resourceGroup); err != nil {
			l = append(l, errs.Invalid(in.path.Child("headGroup", "highAvailability"), in.rules.Head, true, err.Error()))
		} else if redis == nil {
			l = append(l, errs.Invalid(in.path.Child("headGroup", "highAvailability"), in.rules.Head, true,
				"a high-availability head keeps its state in an external Redis, and the backend has none for resource group "+
					in.resourceGroup+" (RenderOptions.RedisAddress or RedisFor)"))
		}
	}
	if err := l.ToError(); err != nil {
		return nil, err
	}
	mounts, err := RenderMounts(context.Background(), o.VolumeResolver, in.mounts)
	if err != nil {
		return nil, err
	}
	image, _, err := cat.Images.Resolve(env.Image)
	if err != nil {
		return nil, err
	}
	start := startParams(in.advanced)

	head, _ := cat.Nodes.Lookup(env.Head.NodeSpec) // checked above
	spec := &rayv1.RayClusterSpec{
		HeadGroupSpec: rayv1.HeadGroupSpec{
			RayStartParams: groupStartParams(start, env.Head.Resources),
			Labels:         cloneOrNil(env.Head.Labels),
			Template:       podTemplate(HeadContainer, image, env.Head.NodeGroup, head, in.podLabels, mounts, in.secretEnv, in.rayToken),
		},
		EnableInTreeAutoscaling: ptr.To(false),
	}
	for _, w := range env.Workers {
		ns, _ := cat.Nodes.Lookup(w.NodeSpec)
		lo, hi := w.Instances.Min, w.Instances.MaxOrMin()
		n, ok := in.replicas[w.Name]
		if !ok {
			n = lo
		}
		n = max(lo, min(n, hi))
		replicas := ptr.To(int32(n))
		if w.Instances.Autoscaling() {
			// Ray's autoscaler owns replicas (left out of the apply, so
			// that it never resets them; KubeRay starts the group at its
			// minimum) within a maximum that is what the cluster's
			// reservation covers, n: it cannot run more than is held.
			spec.EnableInTreeAutoscaling = ptr.To(true)
			replicas, hi = nil, n
		}
		spec.WorkerGroupSpecs = append(spec.WorkerGroupSpecs, rayv1.WorkerGroupSpec{
			GroupName:      w.Name,
			Replicas:       replicas,
			MinReplicas:    ptr.To(int32(lo)),
			MaxReplicas:    ptr.To(int32(hi)),
			NumOfHosts:     1,
			RayStartParams: groupStartParams(start, w.Resources),
			Labels:         cloneOrNil(w.Labels),
			Template:       podTemplate(WorkerContainer, image, w.NodeGroup, ns, in.podLabels, mounts, in.secretEnv, in.rayToken),
		})
	}
	if *spec.EnableInTreeAutoscaling {
		// KubeRay adds the autoscaler container to the head with no security
		// context of its own, and runs the head as a ServiceAccount of the
		// cluster's that the autoscaler's token comes from.
		spec.AutoscalerOptions = &rayv1.AutoscalerOptions{SecurityContext: containerSecurity(), Env: rayTokenEnv(in.rayToken),
			Resources: &corev1.ResourceRequirements{Requests: AutoscalerRequests(), Limits: AutoscalerRequests()}}
		spec.HeadGroupSpec.Template.Spec.AutomountServiceAccountToken = nil
		carveAutoscaler(&spec.HeadGroupSpec.Template.Spec.Containers[0])
	}
	if redis != nil {
		ft := &rayv1.GcsFaultToleranceOptions{RedisAddress: redis.Address}
		if redis.Username != nil {
			ft.RedisUsername = &rayv1.RedisCredential{ValueFrom: &corev1.EnvVarSource{SecretKeyRef: redis.Username.DeepCopy()}}
		}
		if redis.Password != nil {
			ft.RedisPassword = &rayv1.RedisCredential{ValueFrom: &corev1.EnvVarSource{SecretKeyRef: redis.Password.DeepCopy()}}
		}
		spec.GcsFaultToleranceOptions = ft
	}
	return spec, nil
}

// AutoscalerRequests is what the autoscaler container KubeRay adds to an
// autoscaling head requests, and is limited to: KubeRay's own default
// (v1.5.0, controllers/ray/common/pod.go, BuildAutoscalerContainer: 500m
// and 512Mi), set in autoscalerOptions.resources so that it does not
// change with KubeRay's. A Kubernetes ResourceQuota counts every
// container of a pod, and a cluster's reservation is its node specs:
// so the head's Ray container requests its node spec less this
// (carveAutoscaler), and the head pod requests its node spec in all.
func AutoscalerRequests() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("500m"),
		corev1.ResourceMemory: resource.MustParse("512Mi"),
	}
}

// carveAutoscaler takes what the autoscaler requests out of an autoscaling
// head's Ray container's requests (a node spec has at least
// quota.MinNodeCPU core and quota.MinNodeMemory GiB: the rest is
// positive). Its limits stay the node spec's: KubeRay gives Ray its
// num-cpus and memory from the limits (v1.5.0,
// controllers/ray/common/pod.go, generateRayStartCommand), so Ray still
// schedules on the whole node spec, and the container may use what the
// autoscaler leaves idle. So such a head pod is of the Burstable QoS class
// (requests below limits), and its limits add up to its node spec and
// the autoscaler's 500m and 512Mi: a node may be asked for that much more
// than the pod requests, as with any burstable pod.
func carveAutoscaler(c *corev1.Container) {
	for name, q := range AutoscalerRequests() {
		r := c.Resources.Requests[name]
		r.Sub(q)
		c.Resources.Requests[name] = r
	}
}

// podTemplate renders one node group's pods. The group's variables from
// Secrets, and runSecrets, are references (valueFrom.secretKeyRef): the
// values never appear in the rendered object.
func podTemplate(container, image string, g cluster.NodeGroup, ns quota.NodeSpec,
	ids map[string]string, mounts RenderedMounts, runSecrets map[string]cluster.SecretKeyRef, token *cluster.SecretKeyRef) corev1.PodTemplateSpec {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(ns.CPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(ns.MemoryGB*quota.GiB, resource.BinarySI),
	}
	if ns.GPU > 0 {
		res[GPUResource] = *resource.NewQuantity(ns.GPU, resource.DecimalSI)
	}
	c := corev1.Container{
		Name:            container,
		Image:           image,
		Resources:       corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()},
		SecurityContext: containerSecurity(),
	}
	for _, k := range errs.SortedKeys(g.Env) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: g.Env[k]})
	}
	for _, secrets := range []map[string]cluster.SecretKeyRef{g.SecretEnv, runSecrets} {
		for _, k := range errs.SortedKeys(secrets) {
			ref := secrets[k]
			c.Env = append(c.Env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: ref.Secret}, Key: ref.Key}}})
		}
	}
	c.Env = append(c.Env, rayTokenEnv(token)...)
	labels := map[string]string{KeyNodeGroup: g.Name}
	for k, v := range ids {
		labels[k] = v
	}
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      labels,
			Annotations: map[string]string{KeyNodeSpec: ns.Name},
		},
		Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{c},
			SecurityContext:              podSecurity(),
			AutomountServiceAccountToken: ptr.To(false), // but an autoscaling head's: see renderClusterSpec
		},
	}
	mounts.ApplyTo(&t.Spec)
	return t
}

// rayTokenEnv are the variables that turn on Ray's token authentication
// (RAY_AUTH_MODE=token, the token in RAY_AUTH_TOKEN from its Secret key);
// none when ref is nil.
func rayTokenEnv(ref *cluster.SecretKeyRef) []corev1.EnvVar {
	if ref == nil {
		return nil
	}
	return []corev1.EnvVar{
		{Name: "RAY_AUTH_MODE", Value: "token"},
		{Name: "RAY_AUTH_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: ref.Secret}, Key: ref.Key}}},
	}
}

// RayTokenOf returns the Secret key a RayCluster's head takes its Ray
// token from (RAY_AUTH_TOKEN on the head container, as RenderRayCluster
// renders a cluster's RayToken), or nil when it runs without token
// authentication.
func RayTokenOf(rc *rayv1.RayCluster) *corev1.SecretKeySelector {
	for _, c := range rc.Spec.HeadGroupSpec.Template.Spec.Containers {
		if c.Name != HeadContainer {
			continue
		}
		mode := ""
		var ref *corev1.SecretKeySelector
		for _, e := range c.Env {
			switch {
			case e.Name == "RAY_AUTH_MODE":
				mode = e.Value
			case e.Name == "RAY_AUTH_TOKEN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
				ref = e.ValueFrom.SecretKeyRef
			}
		}
		if mode == "token" {
			return ref
		}
	}
	return nil
}

// kubeRayEnv are the environment variables that KubeRay v1.5.0 refuses
// in a Ray container, or that it reads to set up what the platform
// configures (GCS fault tolerance, the autoscaler).
var kubeRayEnv = map[string]string{
	"RAY_REDIS_ADDRESS":        "the backend's Redis (high availability)",
	"REDIS_PASSWORD":           "the backend's Redis (high availability)",
	"REDIS_USERNAME":           "the backend's Redis (high availability)",
	"RAY_enable_autoscaler_v2": "the platform (the autoscaler follows the instance ranges)",
}

// reservedLabelPrefix starts the labels dlc puts on pods; Ray node labels,
// which KubeRay also puts on the pods, may not use it.
const reservedLabelPrefix = "dlc.aidlc.io/"

// nodeProblems reports environment variables that the platform or KubeRay
// manages (the latter under no rule ID: the rule is KubeRay's), and node
// labels in the platform's prefix.
func nodeProblems(r cluster.Rules, env *cluster.Environment) errs.List {
	var l errs.List
	group := func(p errs.Path, rule string, g cluster.NodeGroup) {
		for _, k := range errs.SortedKeys(g.Env) {
			l = append(l, reservedEnvProblems(p.Child("envVars").Key(k), rule, k)...)
		}
		for _, k := range errs.SortedKeys(g.SecretEnv) {
			l = append(l, reservedEnvProblems(p.Child("secretEnvVars").Key(k), rule, k)...)
		}
		for _, k := range errs.SortedKeys(g.Labels) {
			if strings.HasPrefix(k, reservedLabelPrefix) || k == KeyManagedBy {
				l = append(l, errs.Forbidden(p.Child("labels").Key(k), rule,
					fmt.Sprintf("the label %s is the platform's own", k)))
			}
		}
	}
	group(errs.NewPath("headGroup"), r.Head, env.Head.NodeGroup)
	for i, w := range env.Workers {
		group(errs.NewPath("workerGroups").Index(i), r.Workers, w.NodeGroup)
	}
	return l
}

// reservedEnvProblems reports a variable that KubeRay (no rule ID: the
// rule is KubeRay's) or the platform sets.
func reservedEnvProblems(p errs.Path, rule, k string) errs.List {
	if by, ok := kubeRayEnv[k]; ok {
		return errs.List{errs.Forbidden(p, "", fmt.Sprintf("%s is set by %s", k, by))}
	}
	if k == PodNameEnv {
		return errs.List{errs.Forbidden(p, rule, k+" is set by the platform (dynamic mount sub-paths)")}
	}
	if slices.Contains(cluster.RayTokenEnv, k) {
		return errs.List{errs.Forbidden(p, rule, k+" is set by the platform: Ray's token authentication comes from the cluster's rayToken")}
	}
	return nil
}

// reservedStartParams are start parameters that KubeRay v1.5.0 refuses
// beside GCS fault tolerance, which comes from the backend's options;
// check.Advanced refuses the other platform-managed ones (J11).
var reservedStartParams = []string{"redis-password", "redis-username"}

func advancedProblems(params map[string]string) errs.List {
	var l errs.List
	for _, k := range errs.SortedKeys(params) {
		for _, r := range reservedStartParams {
			if check.NormalizeKey(k) == r {
				l = append(l, errs.Forbidden(errs.NewPath("advanced").Key(k), "",
					fmt.Sprintf("%q is managed by the platform: Redis comes from the backend's options", k)))
			}
		}
	}
	return l
}

// startParams returns advanced parameters as Ray start parameters, each
// value quoted for the shell where it needs it: KubeRay joins the
// parameters into a "ray start" command line that bash runs.
func startParams(advanced map[string]string) map[string]string {
	out := make(map[string]string, len(advanced))
	for k, v := range advanced {
		out[k] = shellQuote(v)
	}
	return out
}

// groupStartParams returns a node group's start parameters: the common
// ones and its logical resources.
func groupStartParams(common map[string]string, resources map[string]float64) map[string]string {
	out := make(map[string]string, len(common)+1)
	for k, v := range common {
		out[k] = v
	}
	if len(resources) > 0 {
		out["resources"] = resourcesParam(resources)
	}
	return out
}

// resourcesParam renders logical resources as the "resources" start
// parameter: JSON in single quotes, the form KubeRay itself writes. The
// names are safe inside the quotes (check.LogicalResources allows letters,
// digits, '_', '.', ':', '/' and '-'). The group's resources field of
// KubeRay v1.5.0 is not used: it lower-cases names, takes "cpu",
// "memory" and any name ending in "gpu" for Ray's own resources, and
// parses quantities as Kubernetes quantities.
func resourcesParam(resources map[string]float64) string {
	b, err := json.Marshal(resources) // sorted keys; finite values, as checked
	if err != nil {
		panic(err) // unreachable: the values are checked finite
	}
	return "'" + string(b) + "'"
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_.,:/=+@%-]+$`)

// shellQuote returns v as bash reads it back as one word. A value that
// needs no quoting (true and false among them, which KubeRay turns into
// bare flags) is returned as it is. In a quoted value '$' is doubled:
// the kubelet expands $(VAR) in a container's arguments and reads "$$" as
// "$".
func shellQuote(v string) string {
	if shellSafe.MatchString(v) {
		return v
	}
	return "'" + strings.ReplaceAll(strings.ReplaceAll(v, "$", "$$"), "'", `'\''`) + "'"
}

func idLabels(ids map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range ids {
		if labelValue(v) {
			out[k] = v
		}
	}
	return out
}

func withManagedBy(labels map[string]string) map[string]string {
	out := map[string]string{KeyManagedBy: ManagedBy}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

func cloneOrNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Redis is an external Redis that high-availability heads keep their GCS
// state in (RenderOptions.RedisFor).
type Redis struct {
	Address string // "host:port"
	// Username, optional, is the Secret key holding the Redis ACL user
	// (Redis 6 and later) the heads log in as.
	Username *corev1.SecretKeySelector
	// Password, optional, is the Secret key holding its password. The
	// admission policies of config/admission admit only Secrets whose
	// names start with "dlc-redis".
	Password *corev1.SecretKeySelector
}

// redis returns the Redis of resource group rg's high-availability heads:
// RedisFor's, else the one of RedisAddress and RedisPassword; nil for none.
func (o RenderOptions) redis(rg string) (*Redis, error) {
	if o.RedisFor != nil {
		r, err := o.RedisFor(rg)
		if err != nil || r == nil {
			return nil, err
		}
		if r.Address == "" {
			return nil, fmt.Errorf("RenderOptions.RedisFor(%q) returned a Redis with no address", rg)
		}
		return r, nil
	}
	if o.RedisAddress == "" {
		return nil, nil
	}
	return &Redis{Address: o.RedisAddress, Password: o.RedisPassword}, nil
}
