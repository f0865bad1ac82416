package e2e_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/job"
)

// Runs as they end on Ray (issue 37), on the Kubernetes loop with the
// strict head stand-in, each head at the Ray of its cluster's image.
func TestRayAsRayBehaves(t *testing.T) {
	// An on-demand run's container image is its cluster's: every node
	// runs it, and Ray gets no image_uri (which it refuses beside a
	// working_dir).
	t.Run("a container image on demand", func(t *testing.T) {
		t.Parallel()
		s := newScene(t, kube.Options{})
		const image = "ccr.ccs.tencentyun.com/team-a/deps:1.4"
		r := s.run(dlc.NewJob("容器").OnDemand("pkg-1", "rg").Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
			Container(image).COSPackage("cos://jobs-1250000000/slow.zip").Entrypoint("python slow.py"))
		var rjs []rayv1.RayJob
		waitFor(t, "its RayJob", func() (bool, string) {
			var list rayv1.RayJobList
			if err := s.w.cp.Client().List(s.ctx, &list, client.InNamespace(s.ns), client.MatchingLabels{kube.KeyRunID: r.ID}); err != nil {
				return false, err.Error()
			}
			rjs = list.Items
			return len(rjs) == 1, fmt.Sprint(len(rjs), " RayJobs")
		})
		if strings.Contains(rjs[0].Spec.RuntimeEnvYAML, "image_uri") {
			t.Fatalf("runtime env %q", rjs[0].Spec.RuntimeEnvYAML)
		}
		spec := rjs[0].Spec.RayClusterSpec
		for _, c := range append(spec.HeadGroupSpec.Template.Spec.Containers, spec.WorkerGroupSpecs[0].Template.Spec.Containers...) {
			if c.Image != image {
				t.Errorf("container %s runs %s, want the run's image", c.Name, c.Image)
			}
		}
		if end := s.ended(s.c, r.ID); end.State != job.Succeeded {
			t.Fatalf("%s: %s", end.State, end.Message)
		}
		// On an existing cluster: refused before anything is sent (J10).
		_, err := dlc.NewJob("容器-集群").OnCluster("cls-any").Container(image).
			COSPackage("cos://jobs-1250000000/main.zip").Entrypoint("python main.py").Build()
		if fe := dlc.Fields(err); len(fe) != 1 || fe[0].Rule != "J10" || fe[0].Path != "runtimeEnv.container" {
			t.Fatalf("a container on an existing cluster: %v", err)
		}
	})

	// Ray 2.52 with token authentication: every call needs the token,
	// which the backend reads from the cluster's Secret and sends as
	// X-Ray-Authorization.
	t.Run("a token-auth cluster", func(t *testing.T) {
		t.Parallel()
		s := newScene(t, kube.Options{})
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dlc-env-rg.ray-token", Namespace: s.ns},
			StringData: map[string]string{"token": "tok-" + s.ns}}
		if err := s.w.cp.Client().Create(s.ctx, sec); err != nil {
			t.Fatal(err)
		}
		spec, err := dlc.NewCluster("令牌").Groups(s.grp.ID).Resources("pkg-1", "rg").Image("ray-2.52.0-py311-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).RayToken("dlc-env-rg.ray-token", "token").Build()
		if err != nil {
			t.Fatal(err)
		}
		cl := s.started(spec)
		r := s.ended(s.c, s.run(dlc.NewJob("令牌-job").OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/main.zip").Entrypoint("python main.py")).ID)
		if r.State != job.Succeeded {
			t.Fatalf("%s: %s", r.State, r.Message)
		}
		lines, err := s.c.Runs().Logs(s.ctx, r.ID)
		if err != nil || !slices.Contains(lines, "main.py ran") {
			t.Fatalf("logs %q, %v", lines, err)
		}
		// The head does refuse a call without the token.
		rcs := s.rayClusters(cl.ID)
		resp, err := http.Get(s.w.loop.Head(&rcs[0]).URL + "/api/jobs/" + r.ID)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a call without the token: %d, want 401", resp.StatusCode)
		}
	})

	// A driver that prints 100 MiB and then bytes that are not UTF-8:
	// Ray's /logs answers 500 (it reads the file as text); the run
	// succeeds, its logs come from Ray's log API, decoded, their end kept.
	t.Run("100 MiB and invalid UTF-8", func(t *testing.T) {
		t.Parallel()
		s := newScene(t, kube.Options{})
		// At Ray 2.41, whose log API frames its chunks unless asked not to.
		spec, err := dlc.NewCluster("大日志").Groups(s.grp.ID).Resources("pkg-1", "rg").Image("ray-2.41.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
		if err != nil {
			t.Fatal(err)
		}
		cl := s.started(spec)
		entry := `head -c 104857600 /dev/zero | tr '\0' x | fold -w 1023; printf '\nthe end \377 of it\n'`
		r := s.ended(s.c, s.run(dlc.NewJob("大日志").OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/main.zip").Entrypoint(entry)).ID)
		if r.State != job.Succeeded {
			t.Fatalf("%s: %s", r.State, r.Message)
		}
		lines, err := s.c.Runs().Logs(s.ctx, r.ID)
		if err != nil || len(lines) < 2 || !strings.HasPrefix(lines[0], "[dlc: logs cut:") || lines[len(lines)-1] != "the end \uFFFD of it" {
			last := ""
			if len(lines) > 0 {
				last = lines[len(lines)-1]
			}
			t.Fatalf("logs: %d lines, the last %q, %v", len(lines), last, err)
		}
		if !r.LogsKept || !strings.Contains(strings.Join(r.LogTail, "\n"), "the end \uFFFD of it") {
			t.Errorf("the kept tail does not end the log: kept %v", r.LogsKept)
		}
	})

	// Ray downloads a working_dir lazily, on each node that starts a
	// worker of the job: a worker that joins two hours after the submit
	// fetches the package then. The URL the backend asks for lives as long
	// as the run may (a week with no deadline): the job goes on; with the
	// one-hour URL of old, the worker cannot fetch it and the job fails, as
	// on Ray (RuntimeEnvSetupError).
	for _, tc := range []struct {
		name     string
		lifetime time.Duration // 0: what the backend asks for
		want     job.RunState
	}{
		{"a worker two hours after the submit", 0, job.Succeeded},
		{"a worker two hours after the submit, a one-hour URL", time.Hour, job.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := getWorld(t)
			o := kube.Options{}
			if tc.lifetime > 0 {
				o.Render.WorkingDir = func(u kube.PackageUse) (string, error) {
					u.For = tc.lifetime
					return w.presign(u)
				}
			}
			s := newScene(t, o)
			as := w.cp.StartAutoscaler(t)
			spec, err := dlc.NewCluster("迟到").Groups(s.grp.ID).Resources("pkg-1", "rg").Image("ray-2.46.0-py310-cpu").
				Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 0, 2).Build()
			if err != nil {
				t.Fatal(err)
			}
			cl := s.started(spec)
			r := s.run(dlc.NewJob("迟到-job").OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/late.zip").
				Entrypoint("sleep 4 && python main.py"))
			waitFor(t, "the run running", func() (bool, string) {
				cur, err := s.c.Runs().Get(s.ctx, r.ID)
				return err == nil && cur.State == job.Running, fmt.Sprint(cur.State, err)
			})
			w.cos.Advance(2 * time.Hour) // the S3-compatible server's clock: two hours on
			t.Cleanup(func() { w.cos.Advance(-2 * time.Hour) })
			as.Demand(s.ns, cl.ID, "cpu", 1)
			end := s.ended(s.c, r.ID)
			if end.State != tc.want || (tc.want == job.Failed && !strings.Contains(end.Message, "RuntimeEnvSetupError")) {
				t.Fatalf("%s: %s", end.State, end.Message)
			}
			// The head fetched the package, and the late worker again.
			rcs := s.rayClusters(cl.ID)
			head := w.loop.Head(&rcs[0])
			info, err := (&kube.JobsClient{Base: head.URL}).Status(s.ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			wd, _ := info.RuntimeEnv["working_dir"].(string)
			fetched := head.Fetches(wd)
			if fetched < 2 {
				t.Errorf("the package was fetched %d times, want the head's and the late worker's", fetched)
			}
			t.Logf("%s: the package fetched %d times (head, then the late worker); %s", end.State, fetched, job.ClipMessage(end.Message))
		})
	}
}
