// Package dlctest holds the light test fixtures for code that uses the dlc
// SDK, in this repository and in others: the memory client on a fake clock,
// the conformance suite any backend runs, faults and foreign edits, and an
// S3-compatible (COS) server on loopback. It imports no Kubernetes, KubeRay or
// envtest package, so a test that uses only these compiles in what the SDK
// itself costs; the Kubernetes fixtures (a real API server and etcd, KubeRay's
// reconcilers, a kubelet and a Ray head stand-in) are in package
// github.com/aidlc/dlc/dlctest/kubetest. The repository's docs/testing.md
// describes both.
//
// # Memory client
//
// [NewMemory] returns a ready [dlc.Client] on the in-memory backend with a
// fake clock and a seeded scheduling policy: time moves only when the test
// calls Memory.Settle or Memory.Clock.Advance, and memory.RayHooks decide
// how clusters start and how runs end (outcome, message, log lines).
// memory.StoreHooks intercept store writes, e.g. to make one conflict.
// The fixture's clients run no reconciler goroutines: Settle runs their
// queued steps in the test's goroutine between advances of the clock, so
// a test takes the same steps every time. Memory.NewClient starts another
// client on the same backend (a second replica, or a restarted process).
// MemoryOptions.T (the test) closes the clients when the test ends. Code
// under test that blocks on the platform, as an HTTP handler that calls
// Wait or Follow does, needs time to pass meanwhile: Memory.Drive steps
// the fixture from a goroutine of its own until stopped, taking turns
// with the test's own steps.
//
// # Conformance suite
//
// [RunConformance] runs the platform's behaviour against any backend: the
// product rules through the public API, several clients on one store, a
// restart, edits of the stored objects behind the platform's back
// ([EditStored], as kubectl edit would make them), and a fault before and
// after each store write and Ray call of every operation, injected by
// [Faulty], a wrapper any backend can be put in. backend/memory runs it; so will every other backend:
//
//	func TestConformance(t *testing.T) {
//		dlctest.RunConformance(t, dlctest.Harness{
//			NewBackend: func(t *testing.T) dlc.Backend { return memory.New(memory.Options{}) },
//		})
//	}
package dlctest
