// Package e2e_test runs kubectl-dlc's command tree end to end on an envtest
// control plane with Ray in the loop (KubeRay's reconcilers, a kubelet
// stand-in, a Ray head stand-in per cluster that runs each entrypoint as a
// local process): the commands connect through a kubeconfig file, with the
// kubeconfig flags, as an observer client, while a separate platform client
// over the same namespace reconciles. It is a test binary of its own, so
// that the package's unit tests build without envtest.
package e2e_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/internal/cli"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/storage"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(kubetest.RunMain(m))
}

// kubeconfig writes a kubeconfig file for cfg whose context names user
// and namespace ns, and returns its path.
func kubeconfig(t *testing.T, cfg *rest.Config, user, ns string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		Token: cfg.BearerToken, Username: cfg.Username, Password: cfg.Password}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: user, Namespace: ns}
	kc.CurrentContext = "envtest"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// zipOf returns a ZIP holding files (name → content).
func zipOf(t *testing.T, files map[string]string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		f, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(f, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type kubectlDLC struct {
	t           *testing.T
	kubeconfig  string
	backend     kube.Options
	options     []dlc.Option
	syncTimeout time.Duration
}

// syncBuffer is a buffer a command writes while the test reads it; each
// write closes changed.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	got, _ := s.next()
	return got
}

func (s *syncBuffer) next() (string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.b.String(), s.changed
}

// waitFor waits until b holds want, or ctx ends.
func waitFor(ctx context.Context, t *testing.T, b *syncBuffer, want string) {
	t.Helper()
	for {
		got, changed := b.next()
		if strings.Contains(got, want) {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no %q in:\n%s", want, got)
		}
	}
}

// run runs the command tree in process, as "kubectl dlc --kubeconfig …".
func (k *kubectlDLC) run(ctx context.Context, args ...string) (string, string, int) {
	k.t.Helper()
	var out, errOut syncBuffer
	code := k.runTo(ctx, &out, &errOut, args...)
	return out.String(), errOut.String(), code
}

func (k *kubectlDLC) runTo(ctx context.Context, out, errOut *syncBuffer, args ...string) int {
	k.t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	root := cli.NewCommand(cli.Env{
		IO:      genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut},
		Flags:   flags,
		Connect: cli.KubeConnector{Flags: flags, Backend: k.backend, Options: k.options, SyncTimeout: k.syncTimeout}.Connect,
	})
	start := time.Now()
	code := cli.Execute(ctx, root, append([]string{"--kubeconfig", k.kubeconfig}, args...), errOut)
	k.t.Logf("kubectl dlc %s (%v, exit %d):\n%s%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), code, out.String(), errOut.String())
	return code
}

func (k *kubectlDLC) must(ctx context.Context, args ...string) string {
	k.t.Helper()
	out, _, code := k.run(ctx, args...)
	if code != 0 {
		k.t.Fatalf("kubectl dlc %s failed", strings.Join(args, " "))
	}
	return out
}

func created(t *testing.T, out, kind string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, kind+"/"); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no %s/ in %q", kind, out)
	return ""
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func contains(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s has no %q:\n%s", what, w, got)
		}
	}
}

func TestKubectlDLC(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	admin := dlc.WithUser(ctx, "admin")
	if err := kube.InstallCRDs(ctx, cp.Config()); err != nil {
		t.Fatal(err)
	}
	ns := cp.NewNamespace(t)

	// The job package, in a COS server on loopback; Ray fetches it by a
	// presigned URL.
	srv := cosfake.New(t, cosfake.WithTLS())
	if err := srv.PutObject(cosfake.DefaultBucket, "hello.zip", zipOf(t, map[string]string{
		"main.py": "print('hello from the cli job', flush=True)\n",
	})); err != nil {
		t.Fatal(err)
	}
	cos, err := storage.NewCOSClient(storage.COSOptions{Region: cosfake.DefaultRegion, Endpoint: srv.URL, HTTPClient: srv.Client(),
		Credentials: storage.Credentials{SecretID: "AKIDe2e", SecretKey: "e2e-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	loop := cp.StartRayLoop(t, kubetest.LoopOptions{Namespaces: []string{ns}, Fetch: kubetest.FetchWith(srv.Client())})
	opts := kube.Options{Namespace: ns, Dashboard: loop.Dashboard, PollInterval: 100 * time.Millisecond,
		Render: kube.RenderOptions{WorkingDir: kube.COSWorkingDir(cos, storage.WorkingDirOptions{})}}

	// The platform: a client that is not an observer, which reconciles.
	be, err := kube.New(ctx, cp.Config(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	// Runs' whole logs are kept in COS too, where the CLI reads them once
	// their clusters are gone.
	logs := []dlc.Option{dlc.WithCOS(cos), dlc.WithLogsLocation("cos://" + cosfake.DefaultBucket + "/dlc-logs")}
	platform, err := dlc.New(append([]dlc.Option{dlc.WithBackend(be)}, logs...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer platform.Close()
	if _, err := platform.ResourceGroups().Register(admin, quota.Group{ID: "rg-cpu", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 24000, Memory: 96 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	grp, err := platform.Groups().Create(admin, "search")
	if err != nil {
		t.Fatal(err)
	}

	// The CLI: the kubeconfig holds the credentials of alice (a user of
	// the API server, in system:masters) under another name, "laptop":
	// the calls act as whom the API server authenticates. The context
	// names the platform namespace. It reads logs through the loop's dashboards, and
	// signs packages as the platform does (DLC_COS_REGION), for a plan of
	// a run.
	k := &kubectlDLC{t: t, kubeconfig: kubeconfig(t, cp.AddUser(t, "alice", "system:masters"), "laptop", ns),
		backend: kube.Options{Dashboard: loop.Dashboard, PollInterval: 100 * time.Millisecond,
			Render: kube.RenderOptions{WorkingDir: opts.Render.WorkingDir}}, options: logs}

	example, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "configs", "cluster-cpu-autoscaling.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	clusterFile := writeFile(t, "cluster.yaml", strings.ReplaceAll(string(example), "grp-replaceme01", grp.ID))

	// plan, then create, start and wait.
	contains(t, "plan -f cluster", k.must(ctx, "plan", "-f", clusterFile), "create cluster", "RayCluster", "Fits:            yes")
	cls := created(t, k.must(ctx, "create", "-f", clusterFile), "cluster")
	if _, err := platform.Clusters().Wait(ctx, cls, cluster.InState(cluster.Created)); err != nil {
		t.Fatal(err)
	}
	contains(t, "get clusters", k.must(ctx, "get", "clusters", "-l", "team=search"), cls, "created")
	// get -w sees the start through the observer's watch.
	wctx, stopWatch := context.WithCancel(ctx)
	var watched, watchErr syncBuffer
	watchDone := make(chan int, 1)
	go func() { watchDone <- k.runTo(wctx, &watched, &watchErr, "get", "clusters", "-w") }()
	waitFor(ctx, t, &watched, "created")
	contains(t, "start --wait", k.must(ctx, "start", cls, "--wait"), "cluster/"+cls+" running")
	waitFor(ctx, t, &watched, "running")
	stopWatch()
	if code := <-watchDone; code != 0 {
		t.Errorf("get -w: exit %d: %s", code, watchErr.String())
	}
	c, err := platform.Clusters().Get(admin, cls)
	if err != nil {
		t.Fatal(err)
	}
	if c.Creator != "alice" {
		t.Errorf("the cluster's creator is %q, want the authenticated user alice", c.Creator)
	}

	// submit a job on the cluster and follow its output.
	jobFile := writeFile(t, "job.yaml", `name: hello-on-cluster
cluster: `+cls+`
tags: {team: search}
package: {cos: "cos://`+cosfake.DefaultBucket+`/hello.zip"}
entrypoint: python main.py
`)
	out := k.must(ctx, "submit", "-f", jobFile, "--follow")
	contains(t, "submit --follow", out, "hello from the cli job", "succeeded")
	run := created(t, out, "run")
	contains(t, "logs", k.must(ctx, "logs", run), "hello from the cli job")

	// An on-demand run that waits for quota: the cluster holds 20 of 24
	// cores, the run needs 12.
	onDemand := writeFile(t, "ondemand.yaml", `name: train-on-demand
onDemand:
  resourcePackage: pkg-1
  resourceGroup: rg-cpu
  environment:
    image: ray-2.46.0-py310-cpu
    headGroup: {name: head, nodeSpec: cu.4c16g}
    workerGroups:
      - {name: cpu, nodeSpec: cu.8c32g, instances: {min: 1, max: 1}}
package: {cos: "cos://`+cosfake.DefaultBucket+`/hello.zip"}
entrypoint: python main.py
`)
	waiting := created(t, k.must(ctx, "submit", "-f", onDemand), "run")
	if _, err := platform.Runs().Wait(admin, waiting, job.InState(job.Waiting)); err != nil {
		t.Fatal(err)
	}
	contains(t, "why", k.must(ctx, "why", waiting), "insufficient unused quota", "Queue Position:  1 (0 ahead)", "Lacks:")
	contains(t, "quota", k.must(ctx, "quota", "rg-cpu"), cls, waiting)
	contains(t, "plan -f job", k.must(ctx, "plan", "-f", onDemand), "run job", "Fits:            no", "RayJob")

	// describe: the details page with pods and the job history.
	contains(t, "describe cluster", k.must(ctx, "describe", "cluster", cls),
		"State:           running", "Pods:", cls+"-head", "Job History:", run, "Events:")
	contains(t, "describe run", k.must(ctx, "describe", "run", run), "State:           succeeded")

	// An error: a missing cluster, exit code 1.
	if _, errOut, code := k.run(ctx, "describe", "cluster", "cls-nosuch"); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("describe of a missing cluster: exit %d, %q", code, errOut)
	}

	// --as: the API server's RBAC applies to the impersonated user, who
	// may read nothing here; the refusal ends the connect (the backend's
	// probe of its lists), not the sync timeout, which is an hour here.
	k.syncTimeout = time.Hour
	_, errOut, code := k.run(ctx, "--as", "bob", "get", "clusters")
	k.syncTimeout = 0
	if code == 0 || !strings.Contains(errOut, `User "bob" cannot list`) {
		t.Errorf("bob, with no role, listed the clusters: exit %d, %q", code, errOut)
	}

	// delete through the CLI: the cluster is deleted with its run.
	contains(t, "delete", k.must(ctx, "delete", "cluster", cls, "--force"), "cluster/"+cls+" deleted")

	// logs after the cluster is gone: the whole log, from COS.
	if _, err := platform.Clusters().Wait(ctx, cls, func(*cluster.Cluster) (bool, error) { return false, nil }); !errors.Is(err, dlc.ErrNotFound) {
		t.Fatalf("waiting for cluster %s to go: %v", cls, err)
	}
	r, err := platform.Runs().Get(admin, run)
	if err != nil {
		t.Fatal(err)
	}
	if r.LogsArchived.IsZero() {
		t.Fatalf("run %s kept no whole log in COS (%s)", run, r.Logs)
	}
	if obj, err := srv.Object(cosfake.DefaultBucket, "dlc-logs/"+run); err != nil || !strings.Contains(string(obj), "hello from the cli job") {
		t.Fatalf("the whole log in COS: %q, %v", obj, err)
	}
	contains(t, "logs after the cluster is gone", k.must(ctx, "logs", run), "hello from the cli job")
}
