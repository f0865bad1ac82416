package kube_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
)

// secretEnvOf returns the containers' variables that come from Secrets,
// as name → "secret/key", and fails on one that carries a value.
func secretEnvOf(t *testing.T, cs []corev1.Container) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range cs {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			r := e.ValueFrom.SecretKeyRef
			if r == nil || e.Value != "" {
				t.Fatalf("%s: %+v is not a bare Secret reference", c.Name, e)
			}
			out[e.Name] = r.Name + "/" + r.Key
		}
	}
	return out
}

// Variables from Secrets render as valueFrom.secretKeyRef on the group's
// Ray container; an on-demand run's runtime ones on every Ray container
// of its RayJob (the driver runs on the head), never in runtimeEnvYAML.
func TestRenderSecretEnv(t *testing.T) {
	env := cpuEnv()
	cluster.SecretEnv("DB_PASSWORD", "dlc-env-rg-1.db", "password")(&env.Head.NodeGroup)
	cluster.SecretEnv("HF_TOKEN", "dlc-env-rg-1.hf", "token")(&env.Workers[0].NodeGroup)
	rc, err := kube.RenderRayCluster(running("cls-secret0001", "密钥集群", env), kube.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := secretEnvOf(t, rc.Spec.HeadGroupSpec.Template.Spec.Containers); len(got) != 1 || got["DB_PASSWORD"] != "dlc-env-rg-1.db/password" {
		t.Errorf("head: %v", got)
	}
	if got := secretEnvOf(t, rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers); len(got) != 1 || got["HF_TOKEN"] != "dlc-env-rg-1.hf/token" {
		t.Errorf("worker: %v", got)
	}

	r := onDemandRun()
	r.Config.OnDemand.Environment = env
	r.Config.Runtime.SecretEnv = map[string]cluster.SecretKeyRef{"WANDB_API_KEY": {Secret: "dlc-env-rg-1.wandb", Key: "api-key"}}
	rj, err := kube.RenderRayJob(r, jobOpts())
	if err != nil {
		t.Fatal(err)
	}
	spec := rj.Spec.RayClusterSpec
	if got := secretEnvOf(t, spec.HeadGroupSpec.Template.Spec.Containers); len(got) != 2 || got["WANDB_API_KEY"] != "dlc-env-rg-1.wandb/api-key" || got["DB_PASSWORD"] == "" {
		t.Errorf("RayJob head: %v", got)
	}
	if got := secretEnvOf(t, spec.WorkerGroupSpecs[0].Template.Spec.Containers); len(got) != 2 || got["WANDB_API_KEY"] != "dlc-env-rg-1.wandb/api-key" || got["HF_TOKEN"] == "" {
		t.Errorf("RayJob worker: %v", got)
	}
	if strings.Contains(rj.Spec.RuntimeEnvYAML, "WANDB_API_KEY") || strings.Contains(rj.Spec.RuntimeEnvYAML, "dlc-env") {
		t.Errorf("runtimeEnvYAML names the Secret: %s", rj.Spec.RuntimeEnvYAML)
	}
	b, _ := json.Marshal(rj)
	if n := strings.Count(string(b), `"secretKeyRef"`); n != 4 {
		t.Errorf("%d secretKeyRefs in the RayJob, want 4", n)
	}
}

// A variable KubeRay or the platform sets cannot come from a Secret either.
func TestRenderRefusesReservedSecretEnv(t *testing.T) {
	env := cpuEnv()
	cluster.SecretEnv(kube.PodNameEnv, "dlc-env-rg-1.x", "k")(&env.Head.NodeGroup)
	cluster.SecretEnv("REDIS_PASSWORD", "dlc-env-rg-1.x", "k")(&env.Workers[0].NodeGroup)
	_, err := kube.RenderRayCluster(running("cls-secret0002", "密钥集群", env), kube.RenderOptions{})
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "headGroup.secretEnvVars["+kube.PodNameEnv+"]") ||
		!strings.Contains(err.Error(), "workerGroups[0].secretEnvVars[REDIS_PASSWORD]") {
		t.Fatalf("err = %v", err)
	}
	r := onDemandRun()
	r.Config.Runtime.SecretEnv = map[string]cluster.SecretKeyRef{"RAY_REDIS_ADDRESS": {Secret: "dlc-env-rg-1.x", Key: "k"}}
	if _, err := kube.RenderRayJob(r, jobOpts()); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "runtimeEnv.secretEnvVars[RAY_REDIS_ADDRESS]") {
		t.Fatalf("RayJob err = %v", err)
	}
}
