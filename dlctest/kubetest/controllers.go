package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ControllerNames are the controllers of kube-controller-manager that
// [ControlPlane.StartControllers] runs: the ResourceQuota controller, which
// fills a ResourceQuota's status (without it, the API server's quota
// admission refuses every pod of a namespace with a ResourceQuota, and
// counts nothing), and the garbage collector, which deletes what an owner
// reference ties to a deleted owner (a RayCluster's pods, a RayJob's
// RayCluster, a ComputeCluster's RayCluster); and the ClusterRole
// aggregation controller, which fills the aggregated ClusterRoles (admin,
// edit, view: without it they grant nothing, and a test cannot bind a user
// to a namespace's editors as a cluster would).
var ControllerNames = []string{"resourcequota", "garbagecollector", "clusterrole-aggregation"}

// Controllers is a kube-controller-manager process running
// [ControllerNames] against a control plane: the real controllers, built
// from the Go module proxy by hack/envtest-assets.sh with kube-apiserver.
type Controllers struct {
	cmd  *exec.Cmd
	dir  string
	log  *bytes.Buffer
	done chan struct{} // closed when the process has exited
	err  error         // its exit, once done
	mu   sync.Mutex    // guards log
}

// controllers is the control plane's Controllers, started at most once.
type controllersOnce struct {
	mu  sync.Mutex
	c   *Controllers
	err error
}

// StartControllers starts kube-controller-manager with [ControllerNames]
// on the control plane, or returns the one already running: they are
// cluster-wide, as on a real cluster, so every namespace of the control
// plane has them from then on, and they run until the control plane stops.
// It returns once both work: a ResourceQuota's status is filled, and an
// object whose owner is deleted is deleted (each probed in a namespace of
// its own, for at most a minute). [ControlPlane.StartRayLoop] starts them.
//
// When kube-controller-manager is missing from [AssetsDir], t is skipped
// with instructions, or fails when $CI is true, as for a missing
// kube-apiserver.
func (cp *ControlPlane) StartControllers(t TestingT) *Controllers {
	t.Helper()
	cp.controllers.mu.Lock()
	defer cp.controllers.mu.Unlock()
	if cp.controllers.c != nil || cp.controllers.err != nil {
		if cp.controllers.err != nil {
			t.Fatalf("dlctest: kube-controller-manager: %v", cp.controllers.err)
		}
		return cp.controllers.c
	}
	dir := AssetsDir()
	bin := filepath.Join(dir, "kube-controller-manager")
	if fi, err := os.Stat(bin); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		msg := fmt.Sprintf("dlctest: kube-controller-manager not found in %s: build it with bash hack/envtest-assets.sh", dir)
		if inCI() {
			t.Fatalf("%s", msg)
		} else {
			t.Skipf("%s", msg)
		}
		return nil
	}
	c, err := cp.startControllers(t, bin)
	if err != nil {
		cp.controllers.err = err
		t.Fatalf("dlctest: kube-controller-manager: %v", err)
		return nil
	}
	cp.controllers.c = c
	return c
}

func (cp *ControlPlane) startControllers(t TestingT, bin string) (*Controllers, error) {
	cfg := cp.AddUser(t, "system:kube-controller-manager", "system:masters")
	dir, err := os.MkdirTemp("", "dlctest-kcm-")
	if err != nil {
		return nil, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["kcm"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "kcm"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c := &Controllers{dir: dir, log: &bytes.Buffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(bin,
		"--kubeconfig="+path,
		"--controllers="+strings.Join(ControllerNames, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
		"--concurrent-resource-quota-syncs=5",
		"--v=1",
	)
	c.cmd.Stdout, c.cmd.Stderr = (*lockedWriter)(c), (*lockedWriter)(c)
	if err := c.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	cp.stops = append(cp.stops, c.stop) // under cp.controllers.mu
	if err := c.probe(cp.client); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w; its log ends:\n%s", err, c.tail(4000))
	}
	return c, nil
}

// lockedWriter writes into a Controllers' log.
type lockedWriter Controllers

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.log.Write(p)
}

// tail returns the last n bytes of the process's log.
func (c *Controllers) tail(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.log.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// stop ends the process (SIGTERM, then SIGKILL after 10 s) and removes its
// files.
func (c *Controllers) stop() {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	_ = os.RemoveAll(c.dir)
}

// probe waits until both controllers act, in a namespace of its own.
func (c *Controllers) probe(admin client.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "dlctest-controllers-"}}
	if err := admin.Create(ctx, ns); err != nil {
		return err
	}
	defer func() { _ = admin.Delete(context.Background(), ns) }()
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns.Name},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("1")}}}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns.Name}}
	for _, obj := range []client.Object{rq, owner} {
		if err := admin.Create(ctx, obj); err != nil {
			return err
		}
	}
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", Namespace: ns.Name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	if err := admin.Create(ctx, dep); err != nil {
		return err
	}
	if err := admin.Delete(ctx, owner); err != nil {
		return err
	}
	for {
		select {
		case <-c.done:
			return fmt.Errorf("exited: %v", c.err)
		default:
		}
		quota := admin.Get(ctx, client.ObjectKeyFromObject(rq), rq) == nil && rq.Status.Hard != nil
		err := admin.Get(ctx, client.ObjectKeyFromObject(dep), &corev1.ConfigMap{})
		if quota && apierrors.IsNotFound(err) {
			return nil
		}
		if !pause(ctx) {
			return errors.Join(errors.New("the controllers did not act within a minute (quota status filled: "+
				fmt.Sprint(quota)+"; the dependent of a deleted owner: "+fmt.Sprint(err)+")"), ctx.Err())
		}
	}
}
