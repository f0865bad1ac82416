package platform

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/aidlc/dlc/auth"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/queue"
	"github.com/aidlc/dlc/internal/runner"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/scheduler"
	"github.com/aidlc/dlc/storage"
)

// Option configures an Engine (dlc.Option).
type Option func(*options)

type options struct {
	backend   backend.Backend
	clock     backend.Clock
	catalogs  cluster.Catalogs
	policy    scheduler.Policy
	maxWait   time.Duration
	logPrefix string
	workers   int
	retries   int
	baseDelay time.Duration
	maxDelay  time.Duration
	grace     time.Duration
	// settleAt is how many pending holds an account keeps before its
	// reconciler writes their documents and settles them (holds.go).
	settleAt int
	// holdsWait bounds awaitHolds.
	holdsWait time.Duration
	stepTime  time.Duration
	shareTTL  time.Duration // -1: the default
	// reconcileTime bounds one reconcile step.
	reconcileTime time.Duration
	cos           *storage.COSClient
	log           logr.Logger
	registerer    prometheus.Registerer
	resync        time.Duration
	headroom      int
	retention     retention
	// runRetryBase and runRetryMax are a failed run's retry backoff (L3).
	runRetryBase, runRetryMax time.Duration
	// runStartTime bounds how long Ray may keep an accepted job pending
	// (0: no bound).
	runStartTime time.Duration
	// rayUnreachable bounds how long a live run's job may stay unreadable
	// on Ray before the run fails for it (WithRayUnreachableTimeout).
	rayUnreachable time.Duration
	// scheduleFloor is the shortest time a schedule may leave between two
	// ticks (WithScheduleFloor); 0: none.
	scheduleFloor time.Duration
	// maxUnfinished bounds a config's runs that have not ended, past which
	// its schedule's ticks are skipped (WithMaxUnfinishedRuns); 0: none.
	maxUnfinished int
	// probation is WithMemberProbation's.
	probation int
	// authorizer decides user operations (nil: all allowed); the engine
	// holds it for the services of package dlc, which ask it.
	authorizer auth.Authorizer
}

// WithBackend sets the backend; the default is a new memory backend.
func WithBackend(b backend.Backend) Option { return func(o *options) { o.backend = b } }

// WithClock sets the clock the client stamps times with, queues by and
// retries on; pass the backend's clock in tests.
func WithClock(c backend.Clock) Option { return func(o *options) { o.clock = c } }

// WithCatalogs replaces the node spec and image catalogs.
func WithCatalogs(c cluster.Catalogs) Option { return func(o *options) { o.catalogs = c } }

// WithPolicy sets the policy that picks the member of a cluster group
// whose policy is random (group.Random, the default; G3); the default is
// scheduler.NewRandom with a time-based seed. Groups with another policy
// (least-loaded, ordered failover, most free quota) use the scheduler
// package's, which decide the same on every client.
func WithPolicy(p scheduler.Policy) Option { return func(o *options) { o.policy = p } }

// WithMaxWait sets how long an on-demand run may wait before it holds
// back smaller runs behind it in its resource group (0: never).
func WithMaxWait(d time.Duration) Option { return func(o *options) { o.maxWait = d } }

// WithLogsLocation sets the prefix of where runs' logs are kept, e.g.
// "cos://logs-1250000000/dlc"; a run's logs are at <prefix>/<run id>.
func WithLogsLocation(prefix string) Option { return func(o *options) { o.logPrefix = prefix } }

// WithWorkers sets how many goroutines run the reconcilers of clusters,
// runs and schedules (default 8); the resource groups' (admission, the
// quota's repair, settling reservations) have a quarter as many more of
// their own, at least two, so that admitting a run never waits behind
// the steps of the runs admitted before it. Zero starts none: the caller
// runs what is queued with Reconcile, as dlctest.NewMemory does on its
// fake clock, so that every step is deterministic.
func WithWorkers(n int) Option {
	return func(o *options) { o.workers = max(n, 0) }
}

// WithRetries sets how a failing background step is retried: up to
// retries times (default 8), waiting from base (default 10ms) doubling
// up to max (default 30s). After the last retry the object turns
// abnormal (a cluster) or failed (a run) with the error as its reason;
// a delete keeps retrying at the longest wait.
func WithRetries(retries int, base, max time.Duration) Option {
	return func(o *options) { o.retries, o.baseDelay, o.maxDelay = retries, base, max }
}

// WithRunRetryBackoff sets how long a failed run's retry (L3) waits after
// it ended: base after the first attempt, doubling per attempt, at most
// max (defaults job.RetryBackoffBase and job.RetryBackoffMax). Values
// not above 0 keep the defaults.
func WithRunRetryBackoff(base, max time.Duration) Option {
	return func(o *options) { o.runRetryBase, o.runRetryMax = base, max }
}

// DefaultRunStartTimeout is how long, unless WithRunStartTimeout says
// otherwise, Ray may keep a job it accepted pending (its driver not
// started) before the run fails: an hour, four times Ray's own limit
// (RAY_JOB_START_TIMEOUT_SECONDS, 15 min by default), so that a head that
// keeps to its limit fails the job first, with its own reason.
const DefaultRunStartTimeout = time.Hour

// WithRunStartTimeout sets how long Ray may keep a run's job pending
// after it accepted it (its driver not started: Ray reports the job
// PENDING) before the run fails saying so, its job stopped on Ray (default
// DefaultRunStartTimeout; 0: no bound). It is measured from when a client
// recorded Ray's acceptance (job.Run.RayAcceptedAt), on that client's
// clock (a client whose clock is ahead of it by a good part of the bound
// ends the run that much early). A negative value makes New fail with
// ErrInvalid.
func WithRunStartTimeout(d time.Duration) Option { return func(o *options) { o.runStartTime = d } }

// DefaultRayUnreachableTimeout is how long, unless
// WithRayUnreachableTimeout says otherwise, Ray may stay unreachable about
// a live run's job before the run fails: ten minutes, the bound after
// which a cluster's head that does not answer is taken for lost.
const DefaultRayUnreachableTimeout = 10 * time.Minute

// WithRayUnreachableTimeout sets how long a run's job may stay out of
// reach on Ray (a status read or a submit that fails: a head restarting,
// a proxy or an API server that does not answer, which is no word of
// Ray's on the job) before the run fails, saying since when (default
// DefaultRayUnreachableTimeout). Until then the run keeps its state and
// its message says "Ray unreachable since …", and the step is retried
// with backoff, not counted as a failed step (WithRetries); once Ray
// answers, what it says decides, its deadline included (L2: a job that
// ended before its deadline keeps its outcome). It is measured from the
// time the client that first saw the outage recorded, on its clock, to
// the clock of the client that looks again: a skew between the two
// shortens or lengthens it by as much. A value not above 0 makes New
// fail with ErrInvalid.
func WithRayUnreachableTimeout(d time.Duration) Option {
	return func(o *options) { o.rayUnreachable = d }
}

// DefaultScheduleFloor is the shortest time a schedule may leave between
// two ticks unless WithScheduleFloor says otherwise: a minute, crontab's
// own step.
const DefaultScheduleFloor = time.Minute

// WithScheduleFloor sets the shortest time a job config's schedule (L1)
// may leave between two of its ticks (default DefaultScheduleFloor; 0: no
// floor): a config whose schedule fires more often (a six-field cron such
// as "* * * * * *" fires every second) is refused when saved, and one
// stored so by someone else starts nothing and says so in its log. A
// negative value makes New fail with ErrInvalid.
func WithScheduleFloor(d time.Duration) Option { return func(o *options) { o.scheduleFloor = d } }

// DefaultMaxUnfinishedRuns bounds a job config's runs that have not ended
// unless WithMaxUnfinishedRuns says otherwise.
const DefaultMaxUnfinishedRuns = 100

// WithMaxUnfinishedRuns bounds how many runs of one job config may not
// have ended when its schedule starts another (default
// DefaultMaxUnfinishedRuns; 0: no bound): a tick beyond is skipped and
// recorded in the config's log, so that a schedule whose runs wait (on a
// cluster that does not run) leaves a bounded number of them. A negative
// value makes New fail with ErrInvalid.
func WithMaxUnfinishedRuns(n int) Option { return func(o *options) { o.maxUnfinished = n } }

// WithMemberProbation sets how many periodic resyncs (WithResync) a
// replica that joins the work sharing waits before the others count it
// (default DefaultMemberProbation, 2; 0: counted at once). A membership document
// forged by a writer of the store with ids that change faster never owns
// a key. A negative value makes New fail with ErrInvalid.
func WithMemberProbation(rounds int) Option { return func(o *options) { o.probation = rounds } }

// WithAuthorizer sets who may do what: every user operation is asked of
// a (see package auth); nil, the default, allows everything.
func WithAuthorizer(a auth.Authorizer) Option { return func(o *options) { o.authorizer = a } }

// Authorizer returns the authorizer the engine was given, nil for none.
func (c *Engine) Authorizer() auth.Authorizer { return c.o.authorizer }

// WithRepairGrace sets how long a reservation whose holder no longer
// justifies it (deleted, hibernated, ended: left by a crash between two
// writes) is kept before the quota reconciler releases it (default 30s).
func WithRepairGrace(d time.Duration) Option { return func(o *options) { o.grace = d } }

// WithAutoscaleHeadroom sets how many workers above what Ray's own
// autoscaler runs an autoscaling worker group's reservation covers, while
// quota allows (default 1): the autoscaler cannot be given more workers
// than are reserved, and using that room is how it asks for more. 0: the
// platform does not follow that autoscaler, which then moves within what
// Clusters().Autoscale grants (from a start: the group's minimum). (Only
// where Ray runs an autoscaler of its own: Kubernetes.)
func WithAutoscaleHeadroom(workers int) Option {
	return func(o *options) { o.headroom = max(workers, 0) }
}

// WithStepTimeout sets how long a cluster may stay creating, starting or
// hibernating with no progress before it turns abnormal, saying it timed
// out (default 10m). Progress is any change in what Ray reports of the
// cluster (its phase, the generation it follows, its pods), measured by
// each client on its own clock from when it first saw the step as it is,
// so neither a jump of the wall clock nor skew between replicas fails a
// step. While Ray has not yet taken the change up at all (KubeRay's
// operator has it in its backlog), the step may wait backlogFactor times
// as long. An abnormal cluster still follows Ray: should the cluster come
// up after all, it runs.
func WithStepTimeout(d time.Duration) Option { return func(o *options) { o.stepTime = d } }

// WithWorkSharing sets how clients over one store share the background
// work: each reconciles the objects it owns by key among the live clients
// (rendezvous hashing), so a replica adds throughput, not conflicts. A
// client renews a membership document in the store every third of ttl; a
// client that stops renewing (it crashed) is taken for gone after ttl and
// its share is taken over; one that closes hands its share over at once.
// Correctness never rests on it: every decision is a compare-and-swap, so
// two clients that both think they own a key (while the members change)
// only conflict. A member counted live that leaves its share undone (a
// membership document forged in the store and kept changing, a replica
// whose workers hang) is found at the periodic resyncs (WithResync): each
// client also takes a step of every key it finds unchanged since the last
// one, and leaves out, for a while, a member whose keys needed such a
// step at two resyncs in a row, taking its share over (it logs it, and
// counts it in dlc_replica_stalled_total). 0 turns sharing off: every
// client reconciles every object. Default: 15 s for a client with
// workers, off for one without (WithWorkers(0), whose Reconcile runs the
// steps on a fake clock).
func WithWorkSharing(ttl time.Duration) Option {
	return func(o *options) { o.shareTTL = max(ttl, 0) }
}

// defaultShareTTL is WithWorkSharing's default for a client with workers.
const defaultShareTTL = 15 * time.Second

// WithReconcileTimeout bounds one reconcile step, every call it makes to
// the store and to Ray included (default 2 min): a step still running then
// is cancelled and retried as a failed step, so that a call that hangs
// cannot hold a worker. The backends bound their own calls more tightly
// (the Kubernetes backend: 10 s to a Ray head, 30 s to the API server).
func WithReconcileTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.reconcileTime = d
		}
	}
}

// WithResync sets how often the client queues every object again, so that
// a change whose notice was lost is still acted on (default 5 min; 0:
// only at start, as dlctest.NewMemory does on its fake clock). With the
// work shared it is also when a client takes up the keys their owner left
// undone (WithWorkSharing): with 0, nothing is.
func WithResync(d time.Duration) Option { return func(o *options) { o.resync = max(d, 0) } }

// WithCOS sets the COS client that job packages in COS are inspected with
// when a job config is saved (J5); without it only local packages are.
func WithCOS(c *storage.COSClient) Option { return func(o *options) { o.cos = c } }

// WithUser returns a context that acts as user, in no group: the creator
// of what it creates and the actor in operation logs (auth.NewContext
// names the groups too).
func WithUser(ctx context.Context, user string) context.Context {
	return auth.NewContext(ctx, auth.User{Name: user})
}

// UserFrom returns the user of ctx, or "anonymous".
func UserFrom(ctx context.Context) string { return auth.FromContext(ctx).Name }

// Engine is the platform: clusters, cluster groups, templates, job
// configs, runs, quota and scheduling over one backend. It is safe for
// concurrent use, and several clients (in one process or many) may share
// one store: every decision is a compare-and-swap on a stored object, so
// they decide the same. A user call validates, writes the desired state
// and returns; reconcilers inside the client take each object the rest
// of the way, retrying with backoff. Close stops them.
type Engine struct {
	o       options
	store   backend.Store
	ray     backend.Provisioner
	clock   backend.Clock
	cat     cluster.Catalogs
	policy  scheduler.Policy
	cache   *cache
	queues  *queues
	metrics *metrics    // nil: none registered
	reads   latestReads // concurrent reads past the cache, coalesced

	finished *finishedRuns // the finished runs by job config (retention.go)
	trimming atomic.Bool   // a retention step is trimming to the bound across job configs (trimAll)
	order    *runOrder     // each job config's runs in list order (runorder.go)
	load     *runLoad      // each cluster's active runs and last run end (placement.go)

	run    *runner.Runner // runs each kind's reconciler on its queued keys
	ctx    context.Context
	cancel context.CancelFunc

	mu           sync.Mutex
	repaired     map[string]time.Time           // when each resource group's holders were last audited
	tombs        map[string]map[string]seenHold // per resource group, released holds' documents as first seen (tombstones)
	holdVersions versions                       // the newest hold document the cache has seen (awaitHolds)
	seen         map[string]map[string]seenHold // resource group → holder → the hold as first seen, and when
	suspect      map[string]suspicion           // resource group → a mark while its account changed as the platform never changes it (foreign_accounts.go)
	seq          uint64                         // the last run Seq handed out
	dependents   map[string]string              // cluster → the state it last queued its runs for
	idleRefused  map[string]time.Time           // cluster → until when its idle hibernate waits after a refusal (idle.go)
	steps        map[string]stepSeen            // transitional cluster → its step as last seen, and since when
	claimsSeen   map[string]claimSeen           // name claim without its owner → when first seen so
	rep          *replicas                      // the clients sharing the work; nil: this one does it all
	retainSeen   bool                           // a resync has queued every finished run (retention.go)
	stopResync   func() bool

	linesMu sync.Mutex
	lines   map[string]*accountLine // resource group → the changes of its account waiting for the write in flight (accounts.go)
	// drains are the goroutines writing accounts' batches (drainLine),
	// which Close waits for; linesClosed refuses new changes once it has
	// begun to.
	drains      sync.WaitGroup
	linesClosed bool

	watchMu  sync.Mutex                 // serialises changes of watchers
	watchers atomic.Pointer[[]*watcher] // the watches on (watch.go); nil when none
	loaded   atomic.Bool                // the store's snapshot is in the cache (runLoad keeps only ends of cached clusters after)

	// early holds the changes the store's watch told of before the
	// snapshot was in the cache, in order (see onChange); nil once it is.
	earlyMu sync.Mutex
	early   *[]backend.Change
}

// New returns a client; with no options it runs on a new memory backend
// with the real clock. It reads the store once (the snapshot its cache
// starts from), then reconciles every object it found: what another
// client, or this process before a restart, left half-done is finished.
func New(opts ...Option) (*Engine, error) {
	o := options{workers: 8, retries: 8, baseDelay: 10 * time.Millisecond, maxDelay: 30 * time.Second,
		grace: 30 * time.Second, settleAt: 32, holdsWait: 5 * time.Second, headroom: 1, stepTime: 10 * time.Minute, reconcileTime: 2 * time.Minute, log: logr.Discard(), resync: 5 * time.Minute, shareTTL: -1,
		retention: retention{maxAge: DefaultRunRetention, perJob: DefaultRunsPerJob, total: DefaultMaxFinishedRuns}, runStartTime: DefaultRunStartTimeout, rayUnreachable: DefaultRayUnreachableTimeout,
		scheduleFloor: DefaultScheduleFloor, maxUnfinished: DefaultMaxUnfinishedRuns, probation: DefaultMemberProbation}
	for _, f := range opts {
		f(&o)
	}
	if err := o.retention.validate(); err != nil {
		return nil, fmt.Errorf("dlc: %w", err)
	}
	if o.runStartTime < 0 {
		return nil, fmt.Errorf("dlc: %w", errs.List{errs.Invalid(errs.NewPath("WithRunStartTimeout"), "", o.runStartTime, "must not be negative (0: no bound)")}.ToError())
	}
	if o.rayUnreachable <= 0 {
		return nil, fmt.Errorf("dlc: %w", errs.List{errs.Invalid(errs.NewPath("WithRayUnreachableTimeout"), "", o.rayUnreachable, "must be above 0")}.ToError())
	}
	if o.scheduleFloor < 0 {
		return nil, fmt.Errorf("dlc: %w", errs.List{errs.Invalid(errs.NewPath("WithScheduleFloor"), "", o.scheduleFloor, "must not be negative (0: no floor)")}.ToError())
	}
	if o.probation < 0 {
		return nil, fmt.Errorf("dlc: %w", errs.List{errs.Invalid(errs.NewPath("WithMemberProbation"), "", o.probation, "must not be negative (0: counted at once)")}.ToError())
	}
	if o.maxUnfinished < 0 {
		return nil, fmt.Errorf("dlc: %w", errs.List{errs.Invalid(errs.NewPath("WithMaxUnfinishedRuns"), "", o.maxUnfinished, "must not be negative (0: no bound)")}.ToError())
	}
	if o.shareTTL < 0 {
		o.shareTTL = 0
		if o.workers > 0 {
			o.shareTTL = defaultShareTTL
		}
	}
	if o.clock == nil {
		o.clock = backend.RealClock{}
	}
	if o.catalogs.Nodes.Len() == 0 {
		o.catalogs.Nodes = quota.DefaultCatalog()
	}
	if len(o.catalogs.Images.Names()) == 0 {
		o.catalogs.Images = cluster.DefaultImages()
	}
	if o.backend == nil {
		o.backend = memory.New(memory.Options{Clock: o.clock, NodeSpecs: o.catalogs.Nodes})
	}
	if o.policy == nil {
		o.policy = scheduler.NewRandom(time.Now().UnixNano())
	}
	if o.logPrefix == "" {
		o.logPrefix = "memory://logs"
	}
	if o.runRetryBase <= 0 {
		o.runRetryBase = job.RetryBackoffBase
	}
	if o.runRetryMax <= 0 {
		o.runRetryMax = job.RetryBackoffMax
	}
	if o.baseDelay <= 0 {
		o.baseDelay = 10 * time.Millisecond
	}
	if o.maxDelay < o.baseDelay {
		o.maxDelay = o.baseDelay
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Engine{o: o, store: o.backend, ray: o.backend, clock: o.clock, cat: o.catalogs, policy: o.policy,
		cache: newCache(), queues: newQueues(queue.QueueOptions{MaxWait: o.maxWait}), finished: newFinishedRuns(), order: newRunOrder(), load: newRunLoad(), ctx: ctx, cancel: cancel, repaired: map[string]time.Time{}, seen: map[string]map[string]seenHold{}, suspect: map[string]suspicion{}, tombs: map[string]map[string]seenHold{}, dependents: map[string]string{}, idleRefused: map[string]time.Time{}, steps: map[string]stepSeen{}, claimsSeen: map[string]claimSeen{}, lines: map[string]*accountLine{}}
	m, err := newMetrics(o.registerer, c)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("dlc: registering metrics: %w", err)
	}
	ro := runner.Options{Clock: o.clock, Workers: o.workers, Retries: o.retries, StepTimeout: o.reconcileTime,
		BaseDelay: o.baseDelay, MaxDelay: o.maxDelay, Log: o.log, Admission: admission, Transient: transient, Sharing: sharing{c}}
	if m != nil {
		c.metrics = m
		ib := instrumented{Backend: o.backend, m: m, log: o.log}
		c.store, c.ray = ib, ib
		ro.Metrics = m
	}
	c.run = runner.New(ctx, ro, c.newReconcilers())
	if o.shareTTL > 0 {
		probation := uint64(o.probation)
		if o.resync == 0 {
			probation = 0 // no rounds
		}
		c.rep = newReplicas(o.shareTTL, probation)
	}
	c.early = &[]backend.Change{}
	snap, err := c.store.Watch(ctx, c.onChange)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("dlc: watching the store: %w", err)
	}
	for _, d := range snap {
		if d.Kind != kindReplica {
			c.observed(d, false)
		}
		if d.Kind == kindResourceGroup {
			// Its first sight: what it was before this client came is
			// not known, so its first change looks at the live clusters
			// (foreign_accounts.go).
			c.markSuspect(d.ID, d.Version)
		}
	}
	c.applyEarly()
	// The snapshot's runs came in any order beside their clusters: the
	// ends kept of clusters it does not have are dropped now, and later
	// ones as they come (observeRunEnd).
	c.loaded.Store(true)
	c.load.keepOnly(func(id string) bool { _, ok := c.cache.get(kindCluster, id); return ok })
	if c.rep != nil {
		c.startReplicas(snap)
	}
	c.ray.Observe(ctx, func(kind, id string) { c.enqueue(kind + "/" + id) })
	c.periodicResync() // the first round: what later ones find unchanged since
	if o.resync > 0 {
		var tick func()
		tick = func() {
			if ctx.Err() != nil {
				return
			}
			c.periodicResync()
			c.mu.Lock()
			c.stopResync = c.clock.AfterFunc(o.resync, tick)
			c.mu.Unlock()
		}
		c.mu.Lock()
		c.stopResync = c.clock.AfterFunc(o.resync, tick)
		c.mu.Unlock()
	}
	c.run.Start()
	return c, nil
}

// Close stops the client's reconcilers and watches; what they had not
// finished is finished by another client on the same store, or by the
// next one started on it. Close waits for the steps in progress.
func (c *Engine) Close() error {
	c.cancel()
	c.mu.Lock()
	if c.stopResync != nil {
		c.stopResync()
	}
	c.mu.Unlock()
	c.run.Stop()
	c.linesMu.Lock()
	c.linesClosed = true
	c.linesMu.Unlock()
	c.drains.Wait()
	c.stopReplicas()
	return nil
}

// Catalogs returns the node spec and image catalogs the client validates with.
func (c *Engine) Catalogs() cluster.Catalogs { return c.cat }

// Kinds of stored documents.
const (
	kindCluster       = "cluster"
	kindGroup         = "group"
	kindTemplate      = "template"
	kindJob           = "job"
	kindRun           = "run"
	kindResourceGroup = "resourcegroup"
	kindName          = "name"
)

func newID(prefix string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + "-" + string(b)
}

// idFor derives an object id from a request id, so a retried call finds
// the object the first attempt made.
func idFor(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return prefix + "-r" + hex.EncodeToString(h.Sum(nil))[:16]
}

// decode reads a document's content into a new T, with the fields the
// platform derives from others derived again (see normalise).
func decode[T any](d backend.Doc) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(d.Data, v); err != nil {
		return nil, fmt.Errorf("%s %q: corrupt document: %w", d.Kind, d.ID, err)
	}
	normalise(v)
	return v, nil
}

// exists says whether kind/id is stored: from the cache, or, on a miss,
// from the store itself (see cached).
func (c *Engine) exists(ctx context.Context, kind, id string) (bool, error) {
	if _, ok := c.cache.get(kind, id); ok {
		return true, nil
	}
	if c.cache.deleted(kind, id) {
		return false, nil
	}
	_, err := c.store.Get(ctx, kind, id)
	switch {
	case err == nil:
		return true, nil
	case errs.IsNotFound(err):
		return false, nil
	}
	return false, err
}

// normalise derives again what a stored object repeats of its other
// fields, as the platform computes it when it writes, so that an edit
// from outside (anyone with edit rights on the store) cannot make the
// copy disagree with what it copies: a cluster's quota group is its live
// resource group's, its worker counts lie within the live ranges; a
// run's priority is its config's. (A run's demand needs the catalog: see
// Engine.rederive.)
func normalise(v any) {
	switch x := v.(type) {
	case *cluster.Cluster:
		if x.Live == nil {
			return
		}
		x.QuotaGroup = x.Live.ResourceGroup
		for _, w := range x.Live.Workers {
			if n, ok := x.Replicas[w.Name]; ok {
				x.Replicas[w.Name] = min(max(n, w.Instances.Min), w.Instances.MaxOrMin())
			}
		}
	case *job.Run:
		x.Priority = x.Config.Priority()
	}
}

// decodeInto reads JSON into v.
func decodeInto(data []byte, v any) error { return json.Unmarshal(data, v) }

// cached returns a copy of kind/id from the cache. The cache decodes each
// version once, as an informer keeps typed objects; every caller gets a
// deep copy of its own. A miss is not taken for "gone": the cache may not
// have seen a write another replica (or this one, on another kind's
// watch) made a moment ago, so the store itself is asked before the
// answer is a typed not-found, unless the watch saw the document deleted.
func cached[T any](ctx context.Context, c *Engine, kind, id string) (*T, string, error) {
	v, version, err := fromCache[T](c, kind, id)
	if errs.IsNotFound(err) && !c.cache.deleted(kind, id) {
		return fresh[T](ctx, c, kind, id)
	}
	if err == nil {
		err = c.awaitBound(ctx, v)
	}
	return v, version, err
}

// awaitBound waits, for an account, until the cache has its settled
// holds (awaitHolds).
func (c *Engine) awaitBound(ctx context.Context, v any) error {
	if a, ok := v.(*quota.Account); ok {
		return c.awaitHolds(ctx, a)
	}
	return nil
}

// fromCache returns a copy of kind/id from the cache only, or a typed
// not-found: for what walks the cache itself (metrics, queues), where a
// miss is a document deleted meanwhile.
func fromCache[T any](c *Engine, kind, id string) (*T, string, error) {
	d, ok := c.cache.get(kind, id)
	if !ok {
		return nil, "", errs.NotFound(kind, id)
	}
	v, shared, err := sharedObject[T](c, d)
	if err != nil || !shared {
		return v, d.Version, err
	}
	return deepCopy(v), d.Version, nil
}

// sharedObject returns the cache's decoded form of document d, shared with
// the cache (shared: not to be changed), or, when the cache has moved on
// from d's version, d decoded afresh (not shared).
func sharedObject[T any](c *Engine, d backend.Doc) (v *T, shared bool, err error) {
	obj, ok, err := c.cache.object(d.Kind, d.ID, d.Version, func(d backend.Doc) (any, error) {
		v, err := decode[T](d)
		if err == nil {
			c.bind(v)
		}
		return v, err
	})
	if err != nil {
		return nil, false, err
	}
	if v, isT := obj.(*T); ok && isT {
		return v, true, nil
	}
	v, err = decode[T](d) // changed meanwhile: this version, decoded
	if err == nil {
		c.bind(v)
	}
	return v, false, err
}

// deepCopy copies a stored object so that the caller shares nothing with
// the cache.
func deepCopy[T any](v *T) *T {
	if x, ok := any(v).(interface{ DeepCopy() *T }); ok {
		return x.DeepCopy()
	}
	data, _ := json.Marshal(v)
	out := new(T)
	_ = json.Unmarshal(data, out)
	return out
}

// fresh reads kind/id from the store itself, at its newest version where
// the store can (LatestReader): after a conflict, and before a missing
// object or reservation is taken for gone, when the cache may be behind.
// The cache is left to the watch: a read may race a newer change and must
// not put an older version back.
func fresh[T any](ctx context.Context, c *Engine, kind, id string) (*T, string, error) {
	d, err := c.latest(ctx, kind, id)
	if err != nil {
		return nil, "", err
	}
	v, err := decode[T](d)
	if err == nil {
		c.bind(v)
		err = c.awaitBound(ctx, v)
	}
	return v, d.Version, err
}

func encode(kind, id, version string, labels map[string]string, v any) (backend.Doc, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return backend.Doc{}, err
	}
	return backend.Doc{Kind: kind, ID: id, Version: version, Labels: labels, Data: data}, nil
}

// create stores a new object and returns its version.
func (c *Engine) create(ctx context.Context, kind, id string, labels map[string]string, v any) (string, error) {
	d, err := encode(kind, id, "", labels, v)
	if err != nil {
		return "", err
	}
	version, err := c.store.Create(ctx, d)
	if err == nil {
		noteWrite(ctx, kind, id, version)
	}
	return version, err
}

// update stores v over version and returns the new version.
func (c *Engine) update(ctx context.Context, kind, id, version string, labels map[string]string, v any) (string, error) {
	d, err := encode(kind, id, version, labels, v)
	if err != nil {
		return "", err
	}
	version, err = c.store.Update(ctx, d)
	if err == nil {
		noteWrite(ctx, kind, id, version)
	}
	return version, err
}

// event makes a log entry; user entries name the caller.
func (c *Engine) event(ctx context.Context, source, action, msg string) cluster.Event {
	e := cluster.Event{Time: c.clock.Now(), Source: source, Action: action, Message: msg}
	if source == "user" {
		e.Actor = UserFrom(ctx)
	}
	return e
}

// notFoundAs turns a store's not-found into the kind's.
func notFoundAs(err error, kind, id string) error {
	if errs.IsNotFound(err) {
		return errs.NotFound(kind, id)
	}
	return err
}

// get reads kind/id as a T (from the cache, or the store on a miss) and
// its version; a not-found names it as what.
func get[T any](ctx context.Context, c *Engine, kind, what, id string) (*T, string, error) {
	v, version, err := cached[T](ctx, c, kind, id)
	if err != nil {
		return nil, "", notFoundAs(err, what, id)
	}
	return v, version, nil
}

// list returns copies of the cached objects of kind that sel selects, by
// id; versioned (when not nil) is given each with its version.
func list[T any](c *Engine, kind string, sel map[string]string, versioned func(*T, string)) ([]*T, error) {
	objs, versions, err := cachedObjects[T](c, kind, sel)
	if err != nil {
		return nil, err
	}
	for i, v := range objs {
		objs[i] = deepCopy(v)
		if versioned != nil {
			versioned(objs[i], versions[i])
		}
	}
	return objs, nil
}

// listLatest returns the documents of kind (a cluster or a run: a kind
// whose labels the platform derives) that sel selects, by id, as the
// store has them now: past its cache where the store can (LatestLister),
// else its List. For a decision that must know every such document: a
// delete refused while a dependent exists, which the cache may not show
// yet. Each document's labels are derived from its content, as the
// cache's are, and selected on again.
func (c *Engine) listLatest(ctx context.Context, kind string, sel map[string]string) ([]backend.Doc, error) {
	var docs []backend.Doc
	var err error
	if ll, ok := c.o.backend.(backend.LatestLister); ok {
		t := time.Now()
		docs, err = ll.ListLatest(ctx, kind, sel)
		if in, ok := c.store.(instrumented); ok {
			in.done("store_list_latest", t, err)
		}
	} else {
		docs, err = c.store.List(ctx, kind, sel)
	}
	if err != nil {
		return nil, err
	}
	out := docs[:0]
	for _, d := range docs {
		if d, _ = derived(d); backend.Matches(d.Labels, sel) {
			out = append(out, d)
		}
	}
	return out, nil
}

// nilInput is the error of an operation given nil for what at path:
// ErrInvalid, naming what was wanted; nothing is changed.
func nilInput(path, want string) error {
	return errs.List{errs.Required(errs.Path(path), "", want+" is required; nil was passed")}.ToError()
}

// conflictRetries bounds compare-and-swap loops on one object.
const conflictRetries = 16
