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
// # Parameters
//
// Environment variables, each with its default:
//
//   - DLC_SCALE (default 200 with make scale; unset: skipped): N, the
//     clusters created and started.
//   - DLC_SCALE_RUNS (default N): runs made.
//   - DLC_SCALE_RUN_MODE (default cluster): cluster: a job config per
//     cluster, run through its head's Jobs API; group: one config on the
//     cluster group every cluster joins; ondemand: an on-demand config per
//     resource group (a RayJob and its own RayCluster per run).
//   - DLC_SCALE_REPLICAS (default 2): clients, each on its own kube.Backend.
//   - DLC_SCALE_CONCURRENCY (default 32): user calls in flight at once.
//   - DLC_SCALE_RESOURCE_GROUPS (default ⌈N/100⌉): resource groups the
//     clusters are spread over (each cluster a cu.4c8g head and one cu.4c8g
//     worker).
//   - DLC_SCALE_BARE (default N): objects of each bare write (0: none).
//   - DLC_SCALE_QPS (default 200, kube.DefaultQPS; burst twice): each
//     replica's client-side limit; negative: none.
//   - DLC_SCALE_CLIENT_WORKERS (default 8): reconcile workers per client.
//   - DLC_SCALE_WORK_SHARING (default the client's, 15 s):
//     dlc.WithWorkSharing's TTL; 0: every replica reconciles every object.
//   - DLC_SCALE_DEADLINE (default 20m): the whole test, set-up included.
//   - SCALE_TIMEOUT (of make; default 3h): go test -timeout, a backstop (the
//     deadline is cut to 2 min before it).
//
// DLC_SCALE_HEAP_PROFILE=<prefix> writes the heap profiles before and after
// each replica whose heap is counted per cluster (<prefix>.N.before.pprof,
// <prefix>.N.after.pprof): go tool pprof -sample_index=inuse_space
// -diff_base BEFORE AFTER says where that replica's bytes go.
//
// DLC_SCALE_REPORT=<file> writes the tables to a file too. docs/scale.md
// ("A scale test") says what each phase measures, how to reproduce a
// figure, and the figures it gave.
package scale
