package kube_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/storage"
)

// A run's package URL lives as long as a node of the run may first fetch
// it (Ray fetches working_dir lazily, on each node that starts a worker
// of the job): its deadline and PackageGrace, else PackageLifetime.
func TestPackageUseFollowsTheRun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline int
		lifetime time.Duration
		want     time.Duration
	}{
		{"no deadline: the default lifetime", 0, 0, kube.DefaultPackageLifetime},
		{"no deadline: the options' lifetime", 0, 48 * time.Hour, 48 * time.Hour},
		{"a deadline: it and the grace", 7200, 0, 2*time.Hour + kube.PackageGrace},
		{"a deadline past the lifetime: the lifetime", 30 * 24 * 3600, 48 * time.Hour, 48 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := onDemandRun()
			r.Config.ActiveDeadlineSeconds = tc.deadline
			var got kube.PackageUse
			o := jobOpts()
			o.PackageLifetime = tc.lifetime
			o.WorkingDir = func(u kube.PackageUse) (string, error) {
				got = u
				return "https://jobs-1250000000.cos.ap-guangzhou.myqcloud.com/train/v2.zip?q-sign-time=1", nil
			}
			if _, err := kube.RenderRayJob(r, o); err != nil {
				t.Fatal(err)
			}
			if got.For != tc.want || got.RunID != r.ID || got.Package != r.Config.Package {
				t.Fatalf("asked for %+v, want For %s", got, tc.want)
			}
		})
	}
}

// COSWorkingDir presigns for what the run asks: a URL that COS still
// serves two hours later when the run asked for a week, and refuses when
// it asked for an hour.
func TestCOSWorkingDirLifetime(t *testing.T) {
	srv := cosfake.New(t, cosfake.WithTLS())
	if err := srv.PutObject(cosfake.DefaultBucket, "pkg/job.zip", []byte("PK")); err != nil {
		t.Fatal(err)
	}
	c, err := storage.NewCOSClient(storage.COSOptions{Region: cosfake.DefaultRegion, Endpoint: srv.URL, HTTPClient: srv.Client(),
		Credentials: storage.Credentials{SecretID: "AKIDtest", SecretKey: "secret"}})
	if err != nil {
		t.Fatal(err)
	}
	wd := kube.COSWorkingDir(c, storage.WorkingDirOptions{})
	pkg := storage.COSPackage("cos://" + cosfake.DefaultBucket + "/pkg/job.zip")
	week, err := wd(kube.PackageUse{Package: pkg, For: kube.DefaultPackageLifetime})
	if err != nil {
		t.Fatal(err)
	}
	hour, err := wd(kube.PackageUse{Package: pkg, For: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(week, "https://") {
		t.Fatalf("not https: %s", week)
	}
	srv.Advance(2 * time.Hour)
	for url, want := range map[string]int{week: http.StatusOK, hour: http.StatusForbidden} {
		resp, err := srv.Client().Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("two hours on: %d, want %d", resp.StatusCode, want)
		}
	}
	if _, err := wd(kube.PackageUse{Package: storage.LocalPackage("/tmp/job.zip"), For: time.Hour}); err == nil {
		t.Error("a local package presigned")
	}
	cc := kube.COSWorkingDir(c, storage.WorkingDirOptions{ClusterCredentials: true})
	if u, err := cc(kube.PackageUse{Package: pkg, For: time.Hour}); err != nil || u != "s3://"+cosfake.DefaultBucket+"/pkg/job.zip" {
		t.Errorf("with the cluster's credentials: %q, %v", u, err)
	}
}

// A cluster's Ray token reaches every Ray container and the autoscaler
// from its Secret (never as a value), and RayTokenOf finds it again.
func TestRenderRayToken(t *testing.T) {
	env := cpuEnv()
	env.Image = "ray-2.52.0-py311-cpu"
	env.Workers[0].Instances = cluster.Range(1, 3) // autoscaling: the autoscaler too
	c := running("cls-token00001", "令牌集群", env)
	c.Spec.RayToken = &cluster.SecretKeyRef{Secret: "dlc-env-ray-token", Key: "token"}
	rc, err := kube.RenderRayCluster(c, kube.RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for where, vars := range map[string][]corev1.EnvVar{
		"head":       rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Env,
		"worker":     rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Env,
		"autoscaler": rc.Spec.AutoscalerOptions.Env,
	} {
		got := map[string]string{}
		for _, e := range vars {
			got[e.Name] = e.Value
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				got[e.Name] = "secret " + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
		}
		if got["RAY_AUTH_MODE"] != "token" || got["RAY_AUTH_TOKEN"] != "secret dlc-env-ray-token/token" {
			t.Errorf("%s: %v", where, got)
		}
	}
	if ref := kube.RayTokenOf(rc); ref == nil || ref.Name != "dlc-env-ray-token" || ref.Key != "token" {
		t.Errorf("RayTokenOf: %v", ref)
	}
	c.Spec.RayToken = nil
	if rc, err = kube.RenderRayCluster(c, kube.RenderOptions{}); err != nil || kube.RayTokenOf(rc) != nil {
		t.Errorf("without a token: %v, %v", kube.RayTokenOf(rc), err)
	}
}
