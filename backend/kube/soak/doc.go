// Package soak holds the soak test of the Kubernetes backend (its only
// code is in _test files): for a set time, two replicas — each its own
// process, a dlc.Client on its own kube.Backend over one namespace of an
// envtest control plane with Ray in the loop (KubeRay's reconcilers, the
// kubelet stand-in and a Ray head stand-in per cluster) — run job configs
// on minute schedules over standing clusters, some of which hibernate when
// idle and are started again by the test, with run retention on and the
// runs' log tails kept; every restart interval one replica is killed
// (SIGKILL, as a crash) and started again, the two in turn. Every minute
// it prints a row: each replica's heap, the stored objects by kind (count
// and bytes), the replicas' API writes per second, the runs made and
// ended, and the invariants. At the end it prints the rows and a verdict
// per series: flat, or growing.
//
// It is not part of CI: `go test ./...` skips it unless DLC_SOAK is set.
// Run it with `make soak` (DLC_SOAK=1h by default), or
//
//	DLC_SOAK=10m DLC_SOAK_CONFIGS=100 KUBEBUILDER_ASSETS="$(bash hack/envtest-assets.sh)" \
//		go test ./backend/kube/soak -run '^TestSoak$' -v -count=1 -timeout 30m
//
// # What it checks
//
// The invariants, each minute and at the end, from a watch of the store
// (every version of every document, deletions included) that the test
// process keeps beside the replicas:
//
//   - each tick once: no two runs (first attempts) of one config carry
//     the same schedule tick (job.Run.Tick), over every run the watch ever
//     saw, those retention deleted included; and every tick a config
//     handled (through its ScheduleStatus.LastTick) made a run or was
//     counted missed (ScheduleStatus.Missed): a tick neither is
//     "unaccounted" (each minute a tick may be in flight; at the end,
//     once the watch has caught up, none may be). Ticks more than a
//     minute overdue and not yet handled are shown as "behind": the
//     replicas not keeping up.
//   - nothing over capacity: every resource group's reservations fit its
//     capacity (ResourceGroups().List through an observer client), and
//     CheckQuota finds nothing (a problem it reports at two checks in a
//     row, a minute apart, breaks the invariant; one seen once is shown).
//   - nothing stuck: no cluster in a transitional state (creating,
//     starting, hibernating, deleting) and no run not ended for longer
//     than DLC_SOAK_STUCK; no cluster abnormal.
//
// Flat: the series are compared after the first retention period
// (DLC_SOAK_RETENTION, the longest a finished run is kept): the mean of
// the rows of the last third of what follows it against the mean of the
// middle third; a series whose last third is above the middle third by
// more than DLC_SOAK_TOLERANCE (and by more than a small absolute floor
// per series: 8 MiB of heap, 64 objects, 256 KiB, 2 writes/s) grows. The
// test fails when an invariant was broken, and when a series grows unless
// DLC_SOAK_NOFAIL is set (the report still says which).
//
// # Parameters
//
// Environment variables, each with its default:
//
//   - DLC_SOAK (default 1h with make soak; unset: skipped): how long the
//     workload runs, set-up not included.
//   - DLC_SOAK_CONFIGS (default 1000): job configs, each on a minute
//     schedule (* * * * *), spread over the clusters in turn, their
//     concurrency policies Allow, Forbid and Replace in turn; each run
//     prints a few lines and ends.
//   - DLC_SOAK_CLUSTERS (default 50): standing clusters the configs run on
//     (a cu.4c8g head and one cu.4c8g worker each).
//   - DLC_SOAK_RESOURCE_GROUPS (default 5): resource groups the clusters
//     are spread over, each with exactly the capacity of its clusters.
//   - DLC_SOAK_IDLE_CLUSTERS (default a tenth of the clusters): how many of
//     them hibernate when idle; the test starts a hibernated cluster again
//     as soon as a run waits for it.
//   - DLC_SOAK_IDLE_TIMEOUT (default 20s): their idle timeout (whole
//     seconds).
//   - DLC_SOAK_RESTART (default 5m): a replica is killed and started again
//     this often (each interval jittered by up to a tenth either way, so
//     that kills land at every phase of the minute), the two in turn; 0:
//     never.
//   - DLC_SOAK_RETENTION (default 10m): dlc.WithRunRetention's maxAge, and
//     the first retention period of the flat verdict.
//   - DLC_SOAK_RUNS_PER_JOB (default 5): dlc.WithRunRetention's perJob.
//   - DLC_SOAK_STUCK (default 90s): longer than this in a transitional
//     state is stuck (a run of the workload takes seconds; a mark left by
//     a killed replica held runs back for two minutes before 2026-12-08).
//   - DLC_SOAK_TOLERANCE (default 0.10): how much a series may grow, as a
//     fraction of its middle third's mean, and still be flat.
//   - DLC_SOAK_NOFAIL (default unset): set, a growing series is reported
//     but does not fail the test (a broken invariant still does).
//   - DLC_SOAK_HEAP_PROFILE (default unset): a file prefix; each replica
//     process writes its heap profile every minute of its life, to
//     <prefix>.<replica>.<pid>.<minute>.pprof (go tool pprof
//     -sample_index=inuse_space -diff_base EARLIER LATER says what it
//     grew by).
//   - DLC_SOAK_REPORT (default unset): a file to write the report to,
//     besides stdout; it is rewritten every minute.
//   - SOAK_TIMEOUT (of make; default DLC_SOAK plus 30m): go test -timeout.
//
// The test sets these for the replica processes it starts (the test binary
// run again with -test.run=^TestSoakReplica$), which read the parameters
// above from the environment they inherit:
//
//   - DLC_SOAK_CHILD (default unset: TestSoakReplica skips): the replica's
//     name.
//   - DLC_SOAK_CHILD_KUBECONFIG (no default): a kubeconfig file for the
//     envtest API server.
//   - DLC_SOAK_CHILD_NAMESPACE (no default): the namespace.
//   - DLC_SOAK_CHILD_HEADS (no default): the base URL of the test process's
//     proxy to the Ray head stand-ins.
//
// docs/scale.md ("A soak") says what a run gave.
package soak
