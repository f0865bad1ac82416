package kube_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/job"
)

// ownAddress returns an IPv4 address of this machine that is not
// loopback (the API server refuses loopback endpoints), or skips t.
func ownAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("this machine has no IPv4 address but loopback: the API server cannot proxy to a test head")
	return ""
}

// listenOn starts an httptest server on addr (port chosen by the system).
func listenOn(t *testing.T, addr string) func(http.Handler) *httptest.Server {
	return func(h http.Handler) *httptest.Server {
		t.Helper()
		l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		srv := httptest.NewUnstartedServer(h)
		srv.Listener.Close()
		srv.Listener = l
		srv.Start()
		return srv
	}
}

// headBehindProxy makes a head service with no selector whose dashboard
// port's endpoint is srv (on this machine's own address), and a RayCluster
// whose head is ready behind that service, as KubeRay would show it; it
// returns the cluster's id.
func headBehindProxy(t *testing.T, cp *kubetest.ControlPlane, ns string, srv *httptest.Server) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := cp.Client()
	host, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	const svcName = "hostile-head-svc"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svcName, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dashboard", Port: 8265, TargetPort: intstr.FromInt32(int32(port))}}}}
	// The service proxy resolves a service by its Endpoints, and takes an
	// address only when it names a pod of the namespace with that IP.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hostile-head", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head", Image: "users-own/ray:latest"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.PodIP, pod.Status.PodIPs = host, []corev1.PodIP{{IP: host}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eps := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: svcName, Namespace: ns}, //lint:ignore SA1019 the API server's service proxy reads Endpoints
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: host, //lint:ignore SA1019 as above
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name}}},
			Ports: []corev1.EndpointPort{{Name: "dashboard", Port: int32(port)}}}}} //lint:ignore SA1019 as above
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: svcName + "-1", Namespace: ns,
		Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name}}},
		Ports: []discoveryv1.EndpointPort{{Name: new("dashboard"), Port: new(int32(port))}}}
	if err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, eps); err != nil {
		t.Fatalf("Endpoints on %s:%s: %v", host, portStr, err)
	}
	if err := c.Create(ctx, slice); err != nil {
		t.Fatalf("EndpointSlice on %s:%s: %v", host, portStr, err)
	}

	rc := renderCases()[0].render(t, ns).(*rayv1.RayCluster)
	if err := c.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	rc.Status.ObservedGeneration = rc.Generation
	rc.Status.Head.ServiceName = svcName
	for _, cond := range []rayv1.RayClusterConditionType{rayv1.RayClusterProvisioned, rayv1.HeadPodReady} {
		meta.SetStatusCondition(&rc.Status.Conditions, metav1.Condition{Type: string(cond), Status: metav1.ConditionTrue, Reason: "Test"})
	}
	if err := c.Status().Update(ctx, rc); err != nil {
		t.Fatal(err)
	}
	return rc.Annotations[kube.KeyClusterID]
}

// A hostile head behind the real API server's service proxy answers every
// Jobs API call with a 307 to another server. The backend, as its own
// ServiceAccount (config/rbac) with a bearer token on its config, gets a
// clear error for each call, and the other server gets nothing: no
// request, no credential, no submission. (The API server passes the
// head's foreign Location on; before, the proxy's client followed it.)
func TestServiceProxyFollowsNoRedirect(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	addr := ownAddress(t)
	ns := cp.NewNamespace(t)
	cfg := cp.BindRBAC(t, ns, rbacDir)
	// The ServiceAccount authenticates by certificate here; a token is what
	// a pod's config carries, and what must never leave the API server.
	cfg.BearerToken = "sa-token-must-not-leave-the-api-server"

	thief := newRecorder(t, listenOn(t, addr))
	var headCalls atomic.Int64
	head := listenOn(t, addr)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headCalls.Add(1)
		w.Header().Set("Location", thief.srv.URL+"/steal"+r.URL.Path)
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	defer head.Close()
	id := headBehindProxy(t, cp, ns, head)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	be, err := kube.New(ctx, cfg, kube.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	run := &job.Run{ID: "run-hostile", JobID: "job-1", State: job.Running, ClusterID: id,
		Config: job.Config{Name: "x", Entrypoint: "python main.py", Cluster: id,
			Runtime: job.RuntimeEnv{EnvVars: map[string]string{"TOKEN": "s3cr3t-env"}}}}
	data, _ := json.Marshal(run)
	if _, err := be.Create(ctx, backend.Doc{Kind: "run", ID: run.ID, Labels: map[string]string{"phase": "active"}, Data: data}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the backend's cache to show the run and the ready head", func() bool {
		base, err := be.Dashboard(ctx, id)
		_, gerr := be.Get(ctx, "run", run.ID)
		return err == nil && base != "" && gerr == nil
	})

	calls := []struct {
		name string
		do   func() error
	}{
		// The cluster at the generation its RayCluster was rendered at: a
		// submit on an older one is refused before any call.
		{"submit", func() error { return be.SubmitRun(ctx, run, &cluster.Cluster{ID: id, Generation: 3}) }},
		{"status", func() error { _, err := be.RunStatus(ctx, run.ID); return err }},
		{"logs", func() error { _, err := be.Logs(ctx, run.ID); return err }},
		{"stop", func() error { return be.StopRun(ctx, run.ID) }},
	}
	for _, call := range calls {
		before := headCalls.Load()
		err := call.do()
		if err == nil || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("%s: %v, want an error saying the head redirected", call.name, err)
		}
		if headCalls.Load() == before {
			t.Errorf("%s did not reach the head through the proxy: %v", call.name, err)
		}
		t.Logf("%s: %v", call.name, err)
	}
	if got := thief.got(); len(got) != 0 {
		t.Fatalf("the redirect target received %d requests: %q", len(got), got)
	}
}
