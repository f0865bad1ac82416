package kube_test

import (
	"context"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/common"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
)

// kubeRayPods returns the pods that KubeRay v1.5.0's operator makes of
// a RayCluster spec, built with its own code: the head (with the
// autoscaler container on an autoscaling cluster) and one worker of each
// group (with its wait-gcs-ready init container).
func kubeRayPods(t *testing.T, name, ns string, spec *rayv1.RayClusterSpec) map[string]corev1.Pod {
	t.Helper()
	ctx := context.Background()
	rc := rayv1.RayCluster{Spec: *spec.DeepCopy()}
	rc.Name, rc.Namespace = name, ns
	headPort := common.GetHeadPort(rc.Spec.HeadGroupSpec.RayStartParams)
	fqdn := utils.GenerateFQDNServiceName(ctx, rc, ns)
	auto := utils.IsAutoscalingEnabled(&rc.Spec)
	tmpl := common.DefaultHeadPodTemplate(ctx, rc, rc.Spec.HeadGroupSpec, name+"-head", headPort)
	pods := map[string]corev1.Pod{
		"head": common.BuildPod(ctx, tmpl, rayv1.HeadNode, rc.Spec.HeadGroupSpec.RayStartParams, headPort, auto, utils.RayClusterCRD, fqdn, nil),
	}
	for _, w := range rc.Spec.WorkerGroupSpecs {
		tmpl := common.DefaultWorkerPodTemplate(ctx, rc, w, name+"-"+w.GroupName+"-worker", fqdn, headPort, "", 0, 0)
		pods["worker "+w.GroupName] = common.BuildPod(ctx, tmpl, rayv1.WorkerNode, w.RayStartParams, headPort, auto, utils.RayClusterCRD, fqdn, nil)
	}
	return pods
}

// TestRenderMeetsRestrictedPodSecurity evaluates every pod that KubeRay
// makes of every rendered object (its own containers included) against
// the restricted Pod Security profile at the latest version, with the
// checks of the Pod Security admission plugin itself.
func TestRenderMeetsRestrictedPodSecurity(t *testing.T) {
	t.Parallel()
	eval, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	for _, rc := range renderCases() {
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			var spec *rayv1.RayClusterSpec
			switch obj := rc.render(t, "team-a").(type) {
			case *rayv1.RayCluster:
				spec = &obj.Spec
			case *rayv1.RayJob:
				if obj.Spec.SubmitterPodTemplate != nil || obj.Spec.SubmissionMode != rayv1.HTTPMode {
					t.Errorf("a RayJob in %s mode with submitter template %v: its submitter pod is not checked here",
						obj.Spec.SubmissionMode, obj.Spec.SubmitterPodTemplate)
				}
				spec = obj.Spec.RayClusterSpec
			}
			for what, pod := range kubeRayPods(t, "c", "team-a", spec) {
				// Only an autoscaling head's autoscaler talks to the API server.
				if token := pod.Spec.AutomountServiceAccountToken; (what != "head" || !*spec.EnableInTreeAutoscaling) && (token == nil || *token) {
					t.Errorf("%s pod mounts a ServiceAccount token (automountServiceAccountToken %v)", what, token)
				}
				res := psapolicy.AggregateCheckResults(eval.EvaluatePod(restricted, &pod.ObjectMeta, &pod.Spec))
				if !res.Allowed {
					t.Errorf("%s pod: restricted refuses it: %s: %s", what, res.ForbiddenReason(), res.ForbiddenDetail())
				}
				if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers); what == "head" && *spec.EnableInTreeAutoscaling && n < 2 ||
					what != "head" && len(pod.Spec.InitContainers) == 0 {
					t.Errorf("%s pod has %d containers and %d init containers: KubeRay's own are not checked",
						what, len(pod.Spec.Containers), len(pod.Spec.InitContainers))
				}
			}
		})
	}
}
