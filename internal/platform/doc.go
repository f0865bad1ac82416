// Package platform is the engine behind package dlc's public surface: the
// entities (clusters, cluster groups, templates, job configs, runs,
// resource groups), each with its services, its one write path and its
// reconciler; the cache of the store and the labels that index it; name
// claims; the queues and admission; the quota ledger (accounts, holds,
// settling, repair); the work sharing among replicas; and the metrics.
// Package dlc's services check who may act and delegate here; nothing
// outside the module imports it. The controller runtime that runs the
// reconcilers is package internal/runner, the callers' watches and waits
// package internal/views.
//
// # Rooms
//
// Each concern is a type with its own state behind its own lock, given
// what it depends on: access (typed reads and writes through the cache),
// ledger (the quota accounts' I/O; it asks the entities what justifies a
// hold through the holders interface), names (name claims), workSharing
// (membership, ownership of keys, adoption), the services (the entities:
// each kind's operations and write paths), one reconciler per kind, and
// the indexes derived from the watch (queues, runOrder, finishedRuns,
// runLoad). The Engine wires them and keeps the store's watch. DESIGN.md
// ("Where is it decided?") maps each question to its type and file.
//
// # Words
//
// The engine's words, as its comments use them:
//
//   - store: the backend's documents, the only truth; every decision is
//     a compare-and-swap on a stored document's version.
//   - cache: this client's copy of the store, kept by the store's watch
//     (an informer's cache); reads come from it, decisions go to the store.
//   - account: a resource group's document of its reservations: the sum,
//     and the holds changed since they were last settled.
//   - hold: one holder's reservation in a resource group (a cluster, or an
//     on-demand run's cluster), made before its compute starts and
//     released once Ray runs none of it ("reserve first, act second").
//   - settle: writing holds out of the account into documents of their
//     own (kind "hold"), so that the account stays small (holds.go).
//   - line: the changes of one account waiting for the write in flight,
//     written together in one compare-and-swap (accounts.go).
//   - repair: giving back a hold whose holder no longer needs it, once it
//     has been seen so for the repair grace; restore: putting back a hold a
//     live cluster needs and someone else removed.
//   - fence: what makes a delete and a concurrent create of what depends
//     on it exclusive across clients: the delete marks, lists in the store
//     and deletes on the marked version; the create reads again once
//     stored (fences.go). A fenced-off write is one a newer generation
//     made stale.
//   - mark: a note on a stored object that a delete (or a suspicion of a
//     foreign edit) is in progress, with the time and the client.
//   - lane: one of the runner's two queues; admission has its own.
//   - owner: the replica that reconciles a key (rendezvous hashing over
//     the live members); adopt: take one step of a key whose owner left it
//     idle for a round (adoption.go).
//   - generation: a cluster's spec version, which Ray's observation
//     carries back, so that a stale answer never moves a newer spec.
package platform
