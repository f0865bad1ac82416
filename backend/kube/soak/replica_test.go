package soak_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/dlctest/kubetest"
)

// Set by the test for the replica processes it starts (doc.go).
const (
	envChild      = "DLC_SOAK_CHILD"            // the replica's name; unset: TestSoakReplica skips
	envKubeconfig = "DLC_SOAK_CHILD_KUBECONFIG" // a kubeconfig file for the API server
	envNamespace  = "DLC_SOAK_CHILD_NAMESPACE"  // the namespace
	envHeads      = "DLC_SOAK_CHILD_HEADS"      // the base URL of the proxy to the head stand-ins
)

// envHeapProfile is a file prefix: each replica process writes its heap
// profile every minute of its life (doc.go).
const envHeapProfile = "DLC_SOAK_HEAP_PROFILE"

// reportMark starts each line a replica prints for the test.
const reportMark = "SOAK-REPLICA "

// replicaReport is what a replica prints every reportEvery: its heap
// after a collection, and its requests to the API server so far.
type replicaReport struct {
	HeapInuse uint64 `json:"heapInuse"`
	HeapAlloc uint64 `json:"heapAlloc"`
	Writes    int64  `json:"writes"`    // API writes (POST, PUT, PATCH, DELETE)
	Conflicts int64  `json:"conflicts"` // of them answered 409
	Requests  int64  `json:"requests"`  // every request, watches included
}

const reportEvery = 10 * time.Second

// TestSoakReplica is a replica of the soak: the test binary run again by
// TestSoak, with the environment above. It runs a client on its own
// kube.Backend until its standard input closes (or it is killed), and
// prints a replicaReport every reportEvery.
func TestSoakReplica(t *testing.T) {
	name := os.Getenv(envChild)
	if name != "" && os.Getenv(envHeapProfile) != "" {
		runtime.MemProfileRate = 4096 // its kinds of objects told apart
	}
	if name == "" {
		t.Skip("a replica of TestSoak, which starts it")
	}
	p, err := readParams()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the test closes stdin, or dies: either way, stop
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(envKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	var writes, conflicts, requests atomic.Int64
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			requests.Add(1)
			if req.Method != http.MethodGet {
				writes.Add(1)
				if err == nil && resp.StatusCode == http.StatusConflict {
					conflicts.Add(1)
				}
			}
			return resp, err
		})
	})
	heads := strings.TrimSuffix(os.Getenv(envHeads), "/")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	be, err := kube.New(ctx, cfg, kube.Options{Namespace: os.Getenv(envNamespace),
		Dashboard: func(_ context.Context, rc *rayv1.RayCluster) (string, *http.Client, error) {
			return fmt.Sprintf("%s/%s/%s/%s", heads, rc.Namespace, rc.Name, rc.UID), hc, nil
		},
		Render: kube.RenderOptions{WorkingDir: pkg.WorkingDir}})
	if err != nil {
		t.Fatalf("kube.New: %v", err)
	}
	defer be.Close()
	c, err := dlc.New(dlc.WithBackend(be), dlc.WithRunRetention(p.retention, p.perJob))
	if err != nil {
		t.Fatalf("dlc.New: %v", err)
	}
	defer func() { _ = c.Close() }()
	report := func() {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		b, _ := json.Marshal(replicaReport{HeapInuse: m.HeapInuse, HeapAlloc: m.HeapAlloc,
			Writes: writes.Load(), Conflicts: conflicts.Load(), Requests: requests.Load()})
		fmt.Printf("%s%s\n", reportMark, b)
	}
	report()
	tick := time.NewTicker(reportEvery)
	defer tick.Stop()
	prefix, began := os.Getenv(envHeapProfile), time.Now()
	profiled := 0 // minutes of its life profiled
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			report()
			if m := int(time.Since(began) / time.Minute); prefix != "" && m > profiled {
				profiled = m
				writeHeapProfile(t, fmt.Sprintf("%s.%s.%d.%02d.pprof", prefix, name, os.Getpid(), m))
			}
		}
	}
}

// writeHeapProfile writes the heap profile as of the last collection
// (report's) to file: two of them, minutes apart, say what a replica's
// heap grew by (go tool pprof -sample_index=inuse_space -diff_base).
func writeHeapProfile(t *testing.T, file string) {
	f, err := os.Create(file)
	if err != nil {
		t.Errorf("heap profile: %v", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Errorf("heap profile: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// writeKubeconfig writes cfg (the envtest administrator's) as a kubeconfig
// file in dir, for the replica processes.
func writeKubeconfig(cfg *rest.Config, dir string) (string, error) {
	read := func(data []byte, file string) ([]byte, error) {
		if len(data) > 0 || file == "" {
			return data, nil
		}
		return os.ReadFile(file)
	}
	ca, err := read(cfg.CAData, cfg.CAFile)
	if err != nil {
		return "", err
	}
	cert, err := read(cfg.CertData, cfg.CertFile)
	if err != nil {
		return "", err
	}
	key, err := read(cfg.KeyData, cfg.KeyFile)
	if err != nil {
		return "", err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: ca}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// headProxy lets the replica processes reach the head stand-ins, which
// live in the test process: /<namespace>/<RayCluster>/<UID>/<path> goes to
// that RayCluster's head (started on first use, as RayLoop.Dashboard
// does), read from KubeRay's cache.
type headProxy struct {
	loop  *kubetest.RayLoop
	mu    sync.Mutex
	heads map[types.UID]*url.URL
	rp    *httputil.ReverseProxy
}

type targetKey struct{}

func newHeadProxy(loop *kubetest.RayLoop) *headProxy {
	hp := &headProxy{loop: loop, heads: map[types.UID]*url.URL{}}
	hp.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(targetKey{}).(*url.URL)
			pr.SetURL(target)
			pr.Out.Host = target.Host
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
	}
	return hp
}

func (hp *headProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 4)
	if len(parts) < 3 {
		http.NotFound(w, r)
		return
	}
	ns, name, uid := parts[0], parts[1], types.UID(parts[2])
	rest := "/"
	if len(parts) == 4 {
		rest += parts[3]
	}
	hp.mu.Lock()
	base := hp.heads[uid]
	hp.mu.Unlock()
	if base == nil {
		var rc rayv1.RayCluster
		if err := hp.loop.KubeRay.Manager.GetClient().Get(r.Context(), types.NamespacedName{Namespace: ns, Name: name}, &rc); err != nil || rc.UID != uid {
			http.NotFound(w, r) // no such cluster (yet, in the cache, or any more): as a service of none
			return
		}
		s, _, err := hp.loop.Dashboard(r.Context(), &rc)
		if err == nil {
			base, err = url.Parse(s)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		hp.mu.Lock()
		hp.heads[uid] = base
		hp.mu.Unlock()
	}
	out := r.Clone(context.WithValue(r.Context(), targetKey{}, base))
	out.URL.Path, out.URL.RawPath = rest, ""
	hp.rp.ServeHTTP(w, out)
}

// replica is a replica process as the test sees it.
type replica struct {
	name string
	mu   sync.Mutex
	cmd  *exec.Cmd
	in   io.Closer // its stdin: closed, it stops
	done chan struct{}
	last replicaReport
	at   time.Time
	// Writes and conflicts of the processes before this one (killed),
	// as they last reported them.
	pastWrites, pastConflicts int64
	starts                    int
}

// start starts the replica's process.
func (rp *replica) start(env []string, logDir string) error {
	cmd := exec.Command(os.Args[0], "-test.run=^TestSoakReplica$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, envChild+"="+rp.name)
	setPdeathsig(cmd)
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	rp.mu.Lock()
	rp.starts++
	n := rp.starts
	rp.mu.Unlock()
	logf, err := os.Create(filepath.Join(logDir, fmt.Sprintf("%s.%d.log", rp.name, n)))
	if err != nil {
		return err
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	rp.mu.Lock()
	rp.cmd, rp.in, rp.done = cmd, in, done
	rp.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), reportMark)
			if !ok {
				fmt.Fprintln(logf, sc.Text())
				continue
			}
			var r replicaReport
			if json.Unmarshal([]byte(line), &r) == nil {
				rp.mu.Lock()
				rp.last, rp.at = r, time.Now()
				rp.mu.Unlock()
			}
		}
		_ = cmd.Wait()
		logf.Close()
		rp.mu.Lock()
		rp.pastWrites += rp.last.Writes
		rp.pastConflicts += rp.last.Conflicts
		rp.last = replicaReport{}
		rp.mu.Unlock()
		close(done)
	}()
	return nil
}

// kill kills the process at once (a crash) and waits until it is gone.
func (rp *replica) kill(ctx context.Context) error {
	rp.mu.Lock()
	cmd, done := rp.cmd, rp.done
	rp.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Kill()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("replica %s: still running after SIGKILL", rp.name)
	}
}

// stop closes the process's stdin, so that it closes its client, and
// waits for it to exit for up to wait; then kills it.
func (rp *replica) stop(wait time.Duration) {
	rp.mu.Lock()
	in, done := rp.in, rp.done
	rp.mu.Unlock()
	if in == nil {
		return
	}
	_ = in.Close()
	select {
	case <-done:
	case <-time.After(wait):
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rp.kill(ctx)
	}
}

// reported waits until the running process has reported, until ctx ends.
func (rp *replica) reported(ctx context.Context, after time.Time) bool {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		rp.mu.Lock()
		ok := rp.at.After(after)
		rp.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false
		}
	}
}

// figures returns the last heap reported and the writes so far, over
// every process of the replica.
func (rp *replica) figures() (heap uint64, writes, conflicts int64) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.last.HeapInuse, rp.pastWrites + rp.last.Writes, rp.pastConflicts + rp.last.Conflicts
}
