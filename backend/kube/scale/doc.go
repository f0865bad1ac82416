// Package scale holds the scale test of the Kubernetes backend (its only
// code is in _test files): N clusters and N runs through R replicas, each
// a dlc.Client on its own kube.Backend over one namespace of an envtest
// control plane with Ray in the loop (KubeRay's reconcilers, the kubelet
// stand-in and a Ray head stand-in per cluster), timing each phase and
// printing the figures as tables.
//
// It is not part of CI: `go test ./...` skips it unless DLC_SCALE is set.
// Run it with `make scale` (DLC_SCALE=200 by default), or
//
//	DLC_SCALE=50 DLC_SCALE_REPLICAS=2 KUBEBUILDER_ASSETS="$(bash hack/envtest-assets.sh)" \
//		go test ./backend/kube/scale -run '^TestScale$' -v -count=1 -timeout 90m
//
// docs/scale.md ("A scale test") lists its parameters and the figures it
// gave.
package scale
