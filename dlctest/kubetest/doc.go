// Package kubetest holds the Kubernetes test fixtures for code that uses the
// dlc SDK, in this repository and in others: a real API server and etcd
// (envtest) with KubeRay's CRDs, KubeRay's own reconcilers in process, a
// kubelet stand-in, and a Ray head stand-in that speaks the Ray Jobs API. The
// light fixtures (the memory client, the conformance suite) are in package
// github.com/aidlc/dlc/dlctest, which imports none of this. Each fixture takes
// a small [TestingT] interface rather than *testing.T (or none, where nothing
// needs stopping), so tests, benchmarks and fuzz targets can all use it.
// The repository's docs/testing.md describes both.
//
// # Ray head stand-in
//
// [NewRayHead] starts an HTTP server on loopback that speaks Ray's Jobs
// REST API (submit, status, logs, stop, delete), the state API's driver
// log and token authentication, and refuses what a real Ray refuses, with
// Ray's codes and texts, as Ray 2.41, 2.46 or 2.52
// ([RayHeadOptions].RayVersion). It runs each entrypoint as a real local
// process in its unpacked working_dir, so packages, entrypoints, logs and
// exit codes are real without a Ray wheel:
//
//	head := kubetest.NewRayHead(t, kubetest.RayHeadOptions{})
//	c := &kube.JobsClient{Base: head.URL}
//
// # Control plane
//
// [StartControlPlane] starts a real Kubernetes API server and etcd
// (sigs.k8s.io/controller-runtime/pkg/envtest) with KubeRay's CRDs
// (ray.io/v1 RayCluster, RayJob, RayService) installed, and hands back a
// [ControlPlane] with a controller-runtime client whose scheme knows the core
// Kubernetes types and KubeRay's. The API server checks every object against
// the CRDs' OpenAPI schemas and CEL rules and applies their defaults, as a real
// cluster would; there is no kubelet, no controller manager and no KubeRay
// operator, so nothing reconciles what you create.
// [ControlPlane.StartControllers] adds kube-controller-manager's
// ResourceQuota controller and garbage collector (the real ones, built by
// hack/envtest-assets.sh beside the API server), cluster-wide; the kubelet
// stand-in and the Ray loop start them.
//
// A start takes about ten seconds, so share one control plane across a test
// package with [RunMain]:
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.RunMain(m)) }
//
//	func TestSomething(t *testing.T) {
//		cp := kubetest.StartControlPlane(t) // the package's shared control plane
//		ns := cp.NewNamespace(t)           // a namespace of this test's own
//		_ = cp.Client().Create(t.Context(), &rayv1.RayCluster{ /* … */ })
//	}
//
// Without RunMain, each StartControlPlane call starts a control plane of its
// own and stops it when the test ends.
//
// The API server and etcd run as children of the test process, so that a
// benchmark can count what its operations cost them: [CPUNow] reads their
// CPU time and the process's own from /proc (Linux).
//
// The API server, etcd and controller-manager binaries are not downloaded
// (envtest's usual download needs network access); build them once from the
// Go module proxy with
//
//	bash hack/envtest-assets.sh
//
// at the root of github.com/aidlc/dlc (from another module:
// bash "$(go list -m -f '{{.Dir}}' github.com/aidlc/dlc)/hack/envtest-assets.sh").
// It takes several minutes the first time, caches the binaries outside the
// work tree and prints their directory. StartControlPlane looks for them in
// $KUBEBUILDER_ASSETS, else in $DLC_ENVTEST_DIR, else in the script's default
// cache directory (see [AssetsDir]). When they are missing the test is
// skipped with instructions, or fails when $CI is true, so a run never passes
// without having had a control plane.
//
// # Ray in the loop
//
// [ControlPlane.StartRayLoop] closes the loop from a RayCluster to a
// running job on a control plane that has no kubelet and no Ray: KubeRay's
// own RayCluster and RayJob reconcilers, in process ([ControlPlane.StartKubeRay]),
// a kubelet stand-in that marks the pods they make Running and Ready with
// IPs and can fail one ([ControlPlane.StartKubelet]), a Job controller
// stand-in that completes KubeRay's Redis-cleanup Jobs, so that a RayCluster
// with GCS fault tolerance can be deleted ([ControlPlane.StartRedisCleanupJobs]),
// and a Ray head stand-in per RayCluster, which follows its head pod: down
// (503, its running drivers lost) while no head pod runs, up again when a
// new one does (with its job records if the cluster has GCS fault
// tolerance, with none if not), and hears of each worker pod that joins
// (see [RayHead.NodeJoined]). The head stand-in refuses what a real Ray
// head refuses, as a given Ray version ([RayHeadOptions].RayVersion). Give its [RayLoop.Dashboard] to
// kube.Options.Dashboard and the Kubernetes backend submits, watches and
// stops real local processes through KubeRay's objects:
//
//	loop := cp.StartRayLoop(t, kubetest.LoopOptions{Namespaces: []string{ns}})
//	be, err := kube.New(ctx, cp.Config(), kube.Options{Namespace: ns, Dashboard: loop.Dashboard})
//
// [ControlPlane.BindRBAC] installs the backend's RBAC (config/rbac) in a
// namespace and returns a rest.Config of its ServiceAccount, to run the
// backend with exactly the rights it ships with.
//
// KubeRay's CRDs are read from the module cache, from the version of
// github.com/ray-project/kuberay/ray-operator that the calling module builds
// with (found with go list; $DLC_KUBERAY_CRD_DIR overrides it). Add more CRD
// directories with [WithCRDDirs] and their Go types with [WithScheme].
package kubetest
