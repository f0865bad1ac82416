package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/aidlc/dlc/backend/kube"
	dlcv1alpha1 "github.com/aidlc/dlc/backend/kube/api/v1alpha1"
)

// TestingT is the part of *testing.T, *testing.B and *testing.F that the
// fixtures use. Skipf and Fatalf must end the calling goroutine, as theirs do
// (runtime.Goexit).
type TestingT interface {
	Helper()
	Cleanup(func())
	Logf(format string, args ...any)
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Environment variables the control-plane fixture reads.
const (
	// EnvAssets names the directory holding the kube-apiserver and etcd
	// binaries, as for envtest; it wins over every other setting.
	EnvAssets = "KUBEBUILDER_ASSETS"
	// EnvAssetsDir is the directory hack/envtest-assets.sh builds into
	// (its override, too), used when EnvAssets is not set.
	EnvAssetsDir = "DLC_ENVTEST_DIR"
	// EnvKubeRayCRDDir overrides the directory KubeRay's CRDs are read from
	// (by default config/crd/bases in the ray-operator module's directory).
	EnvKubeRayCRDDir = "DLC_KUBERAY_CRD_DIR"
	// EnvCI, when true, turns a missing binary from a skip into a failure.
	EnvCI = "CI"
)

// The versions hack/envtest-assets.sh builds by default; its default cache
// directory is named after them.
const (
	kubernetesVersion = "1.37.2"
	etcdVersion       = "3.7.0"
)

const (
	kubeRayModule       = "github.com/ray-project/kuberay/ray-operator"
	defaultStartTimeout = time.Minute
)

// assetNames are the binaries envtest starts.
var assetNames = []string{"kube-apiserver", "etcd"}

// AssetsDir returns the directory StartControlPlane takes kube-apiserver and
// etcd from: $KUBEBUILDER_ASSETS if set, else $DLC_ENVTEST_DIR if set, else the
// directory hack/envtest-assets.sh builds into by default,
// ${XDG_CACHE_HOME:-$HOME/.cache}/dlc/envtest/k8s-1.37.2-etcd-3.7.0/bin.
// It returns "" when none of these can be worked out (no HOME).
func AssetsDir() string {
	if dir := os.Getenv(EnvAssets); dir != "" {
		return dir
	}
	if dir := os.Getenv(EnvAssetsDir); dir != "" {
		return dir
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home := os.Getenv("HOME")
		if home == "" {
			return ""
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "dlc", "envtest",
		"k8s-"+kubernetesVersion+"-etcd-"+etcdVersion, "bin")
}

// Option configures a control plane; pass options to [StartControlPlane], or
// to [RunMain] for the shared one.
type Option func(*options)

type options struct {
	crdDirs      []string
	addToScheme  []func(*runtime.Scheme) error
	startTimeout time.Duration
}

// WithCRDDirs installs the CRDs found in these directories (YAML or JSON
// files), after KubeRay's. A directory that does not exist is an error.
func WithCRDDirs(dirs ...string) Option {
	return func(o *options) { o.crdDirs = append(o.crdDirs, dirs...) }
}

// WithScheme registers more Go types with the control plane's scheme (and so
// with its client), such as the AddToScheme function of a CRD's API package.
// The core Kubernetes types, KubeRay's ray.io/v1 and dlc's dlc.aidlc.io/v1alpha1
// are always registered.
func WithScheme(addToScheme ...func(*runtime.Scheme) error) Option {
	return func(o *options) { o.addToScheme = append(o.addToScheme, addToScheme...) }
}

// WithStartTimeout bounds how long etcd and the API server may each take to
// start, and the CRDs to be served. The default is a minute, unless
// $KUBEBUILDER_CONTROLPLANE_START_TIMEOUT says otherwise.
func WithStartTimeout(d time.Duration) Option {
	return func(o *options) { o.startTimeout = d }
}

func newOptions(opts []Option) *options {
	o := &options{}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// ControlPlane is a running kube-apiserver and etcd with KubeRay's CRDs and
// dlc's own (dlc.aidlc.io, [kube.CRDs]) installed. Its methods are safe for concurrent use; tests that share it
// should each work in a namespace of their own ([ControlPlane.NewNamespace]).
type ControlPlane struct {
	env     *envtest.Environment
	config  *rest.Config
	scheme  *runtime.Scheme
	client  client.Client
	started time.Duration

	usersMu sync.Mutex // envtest's AddUser is not safe for concurrent use

	controllers controllersOnce // kube-controller-manager (StartControllers)
	stops       []func()        // run first to last before the API server stops
}

// Client returns a controller-runtime client for the control plane, with the
// administrator's rights and the control plane's [ControlPlane.Scheme]. It
// talks to the API server directly (no cache), so reads see every write.
func (cp *ControlPlane) Client() client.Client { return cp.client }

// Config returns a copy of the REST configuration of the control plane's
// administrator, for building other clients (client-go, a manager).
func (cp *ControlPlane) Config() *rest.Config { return rest.CopyConfig(cp.config) }

// Scheme returns the scheme the client uses: client-go's core types,
// KubeRay's ray.io/v1, dlc's dlc.aidlc.io/v1alpha1 and whatever [WithScheme]
// added. Treat it as read-only.
func (cp *ControlPlane) Scheme() *runtime.Scheme { return cp.scheme }

// StartupTime reports how long the control plane took to start, CRDs
// included.
func (cp *ControlPlane) StartupTime() time.Duration { return cp.started }

// NewNamespace creates a namespace with a generated name (dlctest-xxxxx) and
// returns its name; it is deleted when t's test ends. The control plane runs no
// namespace controller, so a deleted namespace stays Terminating, with its
// objects, until the control plane stops.
func (cp *ControlPlane) NewNamespace(t TestingT) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "dlctest-"}}
	if err := cp.client.Create(ctx, ns); err != nil {
		t.Fatalf("dlctest: creating a namespace: %v", err)
		return ""
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cp.client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("dlctest: deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// AddUser provisions a user of the control plane named name, in groups,
// and returns a REST configuration that authenticates as that user (by a
// client certificate). The API server authorizes by RBAC, so the user may
// do nothing but what the discovery roles every authenticated user has
// allow until a Role or ClusterRole is bound to it (to the name, or to one
// of the groups): use it to test what a component can do with the
// permissions it is given. Its rate limits are the administrator's.
func (cp *ControlPlane) AddUser(t TestingT, name string, groups ...string) *rest.Config {
	t.Helper()
	cp.usersMu.Lock()
	defer cp.usersMu.Unlock()
	base := &rest.Config{QPS: cp.config.QPS, Burst: cp.config.Burst}
	u, err := cp.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, base)
	if err != nil {
		t.Fatalf("dlctest: adding user %s: %v", name, err)
		return nil
	}
	return rest.CopyConfig(u.Config())
}

// shared is the control plane RunMain shares across its package's tests.
var shared struct {
	mu     sync.Mutex
	active bool // RunMain is running
	opts   []Option
	cp     *ControlPlane
	err    error // the shared start failed; later calls fail at once
}

// StartControlPlane returns a running control plane for t.
//
// Under [RunMain] it is the package's shared control plane, started on first
// use with RunMain's options (options passed here are then a fatal error: a
// differently configured control plane cannot be shared). Otherwise it starts
// a control plane of t's own with opts and stops it when t's test ends.
//
// When kube-apiserver or etcd is missing from [AssetsDir], t is skipped with
// instructions for building them (bash hack/envtest-assets.sh), or, when $CI
// is true, fails with them. Any other failure to start fails t.
func StartControlPlane(t TestingT, opts ...Option) *ControlPlane {
	t.Helper()
	shared.mu.Lock()
	if shared.active {
		defer shared.mu.Unlock()
		return startShared(t, opts)
	}
	shared.mu.Unlock()
	return startPrivate(t, opts)
}

// startPrivate starts a control plane that t's test stops when it ends.
func startPrivate(t TestingT, opts []Option) *ControlPlane {
	t.Helper()
	dir, ok := requireAssets(t)
	if !ok {
		return nil
	}
	cp, err := start(newOptions(opts), dir)
	if err != nil {
		t.Fatalf("dlctest: %v", err)
		return nil
	}
	t.Cleanup(func() {
		if err := cp.stop(); err != nil {
			t.Logf("dlctest: stopping the control plane: %v", err)
		}
	})
	t.Logf("dlctest: control plane up in %v for this test alone (share one per package: os.Exit(kubetest.RunMain(m)) in TestMain)",
		cp.started.Round(time.Millisecond))
	return cp
}

// startShared returns the shared control plane, starting it on first use. The
// caller holds shared.mu.
func startShared(t TestingT, opts []Option) *ControlPlane {
	t.Helper()
	if len(opts) > 0 {
		t.Fatalf("dlctest: StartControlPlane got options under RunMain; pass them to RunMain, which configures the shared control plane")
		return nil
	}
	if shared.cp != nil {
		return shared.cp
	}
	if shared.err != nil {
		t.Fatalf("dlctest: the shared control plane failed to start: %v", shared.err)
		return nil
	}
	dir, ok := requireAssets(t)
	if !ok {
		return nil
	}
	cp, err := start(newOptions(shared.opts), dir)
	if err != nil {
		shared.err = err
		t.Fatalf("dlctest: %v", err)
		return nil
	}
	shared.cp = cp
	t.Logf("dlctest: shared control plane up in %v", cp.started.Round(time.Millisecond))
	return cp
}

// RunMain runs a test package's tests (m is its *testing.M) with one control
// plane shared by every [StartControlPlane] call, configured by opts; it is
// started by the first test that asks for it (so a run that needs none pays
// nothing) and stopped when the tests are done, or when the test binary is
// interrupted (SIGINT, SIGTERM). It returns m.Run's exit code:
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.RunMain(m)) }
func RunMain(m interface{ Run() int }, opts ...Option) int {
	shared.mu.Lock()
	if shared.active {
		shared.mu.Unlock()
		panic("dlctest: RunMain is already running")
	}
	shared.active, shared.opts, shared.cp, shared.err = true, opts, nil, nil
	shared.mu.Unlock()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-signals:
			fmt.Fprintf(os.Stderr, "dlctest: %v: stopping the control plane\n", sig)
			stopShared()
			os.Exit(2)
		case <-done:
		}
	}()

	code := m.Run()

	signal.Stop(signals)
	close(done)
	stopShared()
	return code
}

// stopShared stops the shared control plane, if it started, and ends sharing.
func stopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cp != nil {
		if err := shared.cp.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "dlctest: stopping the shared control plane: %v\n", err)
		}
	}
	shared.active, shared.opts, shared.cp, shared.err = false, nil, nil, nil
}

// requireAssets returns the directory holding the binaries, or skips (fails,
// in CI) t with instructions and returns false.
func requireAssets(t TestingT) (string, bool) {
	t.Helper()
	dir := AssetsDir()
	err := checkAssets(dir)
	if err == nil {
		return dir, true
	}
	msg := fmt.Sprintf("dlctest: no control plane: %v.\n"+
		"Build kube-apiserver, etcd and kube-controller-manager once (several minutes, from the Go module proxy) with\n"+
		"\tbash hack/envtest-assets.sh\n"+
		"at the root of github.com/aidlc/dlc (from another module: "+
		"bash \"$(go list -m -f '{{.Dir}}' github.com/aidlc/dlc)/hack/envtest-assets.sh\"),\n"+
		"then run the tests again, or point %s at a directory that holds them: export %[2]s=\"$(bash hack/envtest-assets.sh)\".",
		err, EnvAssets)
	if inCI() {
		t.Fatalf("%s", msg)
	} else {
		t.Skipf("%s", msg)
	}
	return "", false
}

// checkAssets reports what is missing from dir.
func checkAssets(dir string) error {
	if dir == "" {
		return fmt.Errorf("cannot tell where the envtest binaries are: neither %s, %s nor HOME is set",
			EnvAssets, EnvAssetsDir)
	}
	var missing []string
	for _, name := range assetNames {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s not found in %s", strings.Join(missing, " and "), dir)
	}
	return nil
}

func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv(EnvCI))
	return ci
}

// kubeRayCRDDir finds KubeRay's CRDs: $DLC_KUBERAY_CRD_DIR, else
// config/crd/bases in the directory of the ray-operator module the current
// module builds with.
func kubeRayCRDDir() (string, error) {
	if dir := os.Getenv(EnvKubeRayCRDDir); dir != "" {
		return dir, nil
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", kubeRayModule)
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && len(exit.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(exit.Stderr)))
		}
		return "", fmt.Errorf("finding KubeRay's CRDs with go list -m %s (or set %s): %w",
			kubeRayModule, EnvKubeRayCRDDir, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s is not in the module cache: run go mod download %s, or set %s",
			kubeRayModule, kubeRayModule, EnvKubeRayCRDDir)
	}
	return filepath.Join(dir, "config", "crd", "bases"), nil
}

// start starts a control plane from the binaries in dir.
func start(o *options, dir string) (*ControlPlane, error) {
	began := time.Now()

	scheme := runtime.NewScheme()
	adders := append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, rayv1.AddToScheme, dlcv1alpha1.AddToScheme}, o.addToScheme...)
	for _, add := range adders {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}

	kuberay, err := kubeRayCRDDir()
	if err != nil {
		return nil, err
	}
	ours, err := kube.CRDs()
	if err != nil {
		return nil, err
	}

	timeout := o.startTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	useExisting := false
	env := &envtest.Environment{
		Scheme:                scheme,
		CRDDirectoryPaths:     append([]string{kuberay}, o.crdDirs...),
		ErrorIfCRDPathMissing: true,
		CRDs:                  ours,
		CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: timeout},
		BinaryAssetsDirectory: dir,
		// Never fall through to a real cluster, whatever USE_EXISTING_CLUSTER says.
		UseExistingCluster: &useExisting,
	}
	if o.startTimeout > 0 || os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = timeout
	}
	env.ControlPlane.GetAPIServer().Path = filepath.Join(dir, "kube-apiserver")
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(dir, "etcd")}

	cfg, err := env.Start()
	if err != nil {
		if stopErr := env.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping what had started: %w", stopErr))
		}
		return nil, fmt.Errorf("starting the control plane from %s: %w", dir, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("creating a client: %w", err), env.Stop())
	}
	return &ControlPlane{
		env:     env,
		config:  cfg,
		scheme:  scheme,
		client:  c,
		started: time.Since(began),
	}, nil
}

func (cp *ControlPlane) stop() error {
	cp.controllers.mu.Lock()
	stops := cp.stops
	cp.stops = nil
	cp.controllers.mu.Unlock()
	for _, f := range stops {
		f()
	}
	return cp.env.Stop()
}
