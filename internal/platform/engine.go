package platform

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aidlc/dlc/auth"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/internal/objects"
	"github.com/aidlc/dlc/internal/queue"
	"github.com/aidlc/dlc/internal/runner"
	"github.com/aidlc/dlc/internal/views"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/scheduler"
	"github.com/aidlc/dlc/storage"
)

// Option configures an Engine (dlc.Option). The options are documented
// once, on package dlc's With functions (and in docs/options.md); New sets
// their defaults and refuses a value out of range, naming the option.
type Option func(*options)

// options are what the With functions set. A field holds what its option
// was given, unchanged; New sets the defaults (its literal, and below it
// the defaults of the options whose 0 means "the default"), then checks
// every value (check) before it derives anything.
type options struct {
	backend   backend.Backend // nil: newBackend's, which dlc.New supplies
	clock     backend.Clock   // nil: the real clock
	catalogs  cluster.Catalogs
	policy    scheduler.Policy // nil: scheduler.NewRandom
	maxWait   time.Duration    // 0: never
	logPrefix string           // "": defaultLogsLocation
	workers   int              // 0: none (Reconcile runs the steps)
	retries   int              // 0: the first failed step gives up
	baseDelay time.Duration    // 0: defaultBaseDelay
	maxDelay  time.Duration    // at least baseDelay
	grace     time.Duration    // above 0
	// settleAt is how many pending holds an account keeps before its
	// reconciler writes their documents and settles them (holds.go); no
	// option sets it.
	settleAt int
	// holdsWait bounds awaitHolds; no option sets it.
	holdsWait time.Duration
	stepTime  time.Duration // above 0
	// shareTTL is WithWorkSharing's (0: off); shareSet says whether it
	// was given, else it is derived from workers.
	shareTTL time.Duration
	shareSet bool
	// reconcileTime bounds one reconcile step (0: defaultReconcileTimeout).
	reconcileTime time.Duration
	// checkPackage checks a job's package where it is (J5); readsCOS
	// says whether it reads packages in COS (else only local files are
	// checked). Local files only by default (localPackages); dlc.WithCOS
	// sets one that reads COS.
	checkPackage PackageCheck
	readsCOS     bool
	logsCOS      *storage.COSClient // nil: no whole logs in COS (logarchive.go)
	// newBackend makes the backend when none was given (WithBackend):
	// the dlc package supplies a memory backend on the client's clock.
	newBackend func(backend.Clock, quota.Catalog) backend.Backend
	log        logr.Logger
	registerer prometheus.Registerer
	resync     time.Duration // 0: only at start
	headroom   int           // 0: Ray's autoscaler not followed
	retention  retention
	// runRetryBase and runRetryMax are a failed run's retry backoff (L3);
	// 0: job.RetryBackoffBase and job.RetryBackoffMax.
	runRetryBase, runRetryMax time.Duration
	// runStartTime bounds how long Ray may keep an accepted job pending
	// (0: no bound).
	runStartTime time.Duration
	// rayUnreachable bounds how long a live run's job may stay unreadable
	// on Ray before the run fails for it (above 0).
	rayUnreachable time.Duration
	// scheduleFloor is the shortest time a schedule may leave between two
	// ticks; 0: none.
	scheduleFloor time.Duration
	// maxUnfinished bounds a config's runs that have not ended, past which
	// its schedule's ticks are skipped; 0: none.
	maxUnfinished int
	// probation is WithMemberProbation's (0: counted at once).
	probation int
	// meterEvery is how often a running cluster's open usage interval is
	// written (meter.go).
	meterEvery time.Duration
	// compactAfter is the age past which a day's usage records are
	// compacted; 0: never.
	compactAfter time.Duration
	// authorizer decides user operations (nil: all allowed); the engine
	// holds it for the services of package dlc, which ask it.
	authorizer auth.Authorizer
	// observer: no reconciler, no work sharing, no resync (WithObserver).
	observer bool
}

// The defaults of the options whose 0 (or "") means the default.
const (
	defaultLogsLocation     = "memory://logs"
	defaultBaseDelay        = 10 * time.Millisecond
	defaultReconcileTimeout = 2 * time.Minute
	// defaultShareTTL is WithWorkSharing's default for a client with
	// workers; one without shares nothing.
	defaultShareTTL = 15 * time.Second
)

// check returns every value out of its option's range, each named by its
// option (and parameter): what New refuses. It looks at what the options
// were given, before New derives anything from them.
func (o *options) check() errs.List {
	var l errs.List
	bad := func(option string, v any, detail string) {
		l = append(l, errs.Invalid(errs.NewPath(option), "", v, detail))
	}
	for _, c := range []struct {
		option string
		value  any
		bad    bool
		detail string
	}{
		{"WithMaxWait", o.maxWait, o.maxWait < 0, "must not be negative (0: never)"},
		{"WithWorkers", o.workers, o.workers < 0, "must not be negative (0: none, Reconcile runs the steps)"},
		{"WithRetries.retries", o.retries, o.retries < 0, "must not be negative (0: the first failed step gives up)"},
		{"WithRepairGrace", o.grace, o.grace <= 0, "must be above 0"},
		{"WithAutoscaleHeadroom", o.headroom, o.headroom < 0, "must not be negative (0: Ray's autoscaler is not followed)"},
		{"WithStepTimeout", o.stepTime, o.stepTime <= 0, "must be above 0"},
		{"WithWorkSharing", o.shareTTL, o.shareSet && o.shareTTL < 0, "must not be negative (0: off)"},
		{"WithResync", o.resync, o.resync < 0, "must not be negative (0: only at start)"},
		{"WithRunStartTimeout", o.runStartTime, o.runStartTime < 0, "must not be negative (0: no bound)"},
		{"WithRayUnreachableTimeout", o.rayUnreachable, o.rayUnreachable <= 0, "must be above 0"},
		{"WithScheduleFloor", o.scheduleFloor, o.scheduleFloor < 0, "must not be negative (0: no floor)"},
		{"WithMaxUnfinishedRuns", o.maxUnfinished, o.maxUnfinished < 0, "must not be negative (0: no bound)"},
		{"WithMemberProbation", o.probation, o.probation < 0, "must not be negative (0: counted at once)"},
		{"WithMeteringInterval", o.meterEvery, o.meterEvery < time.Second, "must be at least a second"},
		{"WithUsageCompaction", o.compactAfter, o.compactAfter != 0 && o.compactAfter < time.Hour, "must be 0 (never) or at least an hour"},
	} {
		if c.bad {
			bad(c.option, c.value, c.detail)
		}
	}
	if o.logsCOS != nil && strings.HasPrefix(o.logPrefix, "cos://") {
		if _, err := storage.ParseCOSURL(o.logPrefix + "/run"); err != nil {
			bad("WithLogsLocation", o.logPrefix, "not a COS location for runs' logs: "+err.Error())
		}
	}
	if o.baseDelay < 0 {
		bad("WithRetries.base", o.baseDelay, fmt.Sprintf("must not be negative (0: the default, %s)", defaultBaseDelay))
	} else if base := cmp.Or(o.baseDelay, defaultBaseDelay); o.maxDelay < base {
		bad("WithRetries.max", o.maxDelay, fmt.Sprintf("must not be below base (%s)", base))
	}
	if o.runRetryBase < 0 {
		bad("WithRunRetryBackoff.base", o.runRetryBase, fmt.Sprintf("must not be negative (0: the default, %s)", job.RetryBackoffBase))
	}
	if o.runRetryMax < 0 {
		bad("WithRunRetryBackoff.max", o.runRetryMax, fmt.Sprintf("must not be negative (0: the default, %s)", job.RetryBackoffMax))
	}
	if base, top := cmp.Or(o.runRetryBase, job.RetryBackoffBase), cmp.Or(o.runRetryMax, job.RetryBackoffMax); base > 0 && top > 0 && top < base {
		bad("WithRunRetryBackoff.max", o.runRetryMax, fmt.Sprintf("must not be below base (%s; 0: the default, %s)", base, job.RetryBackoffMax))
	}
	if o.reconcileTime < 0 {
		bad("WithReconcileTimeout", o.reconcileTime, fmt.Sprintf("must not be negative (0: the default, %s)", defaultReconcileTimeout))
	}
	l = append(l, errs.Fields(o.retention.validate())...)
	return l
}

// WithBackend: see dlc.WithBackend.
func WithBackend(b backend.Backend) Option { return func(o *options) { o.backend = b } }

// WithClock: see dlc.WithClock.
func WithClock(c backend.Clock) Option { return func(o *options) { o.clock = c } }

// WithCatalogs: see dlc.WithCatalogs.
func WithCatalogs(c cluster.Catalogs) Option { return func(o *options) { o.catalogs = c } }

// WithPolicy: see dlc.WithPolicy.
func WithPolicy(p scheduler.Policy) Option { return func(o *options) { o.policy = p } }

// WithMaxWait: see dlc.WithMaxWait.
func WithMaxWait(d time.Duration) Option { return func(o *options) { o.maxWait = d } }

// WithLogsLocation: see dlc.WithLogsLocation.
func WithLogsLocation(prefix string) Option { return func(o *options) { o.logPrefix = prefix } }

// WithWorkers: see dlc.WithWorkers.
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithRetries: see dlc.WithRetries.
func WithRetries(retries int, base, max time.Duration) Option {
	return func(o *options) { o.retries, o.baseDelay, o.maxDelay = retries, base, max }
}

// WithRunRetryBackoff: see dlc.WithRunRetryBackoff.
func WithRunRetryBackoff(base, max time.Duration) Option {
	return func(o *options) { o.runRetryBase, o.runRetryMax = base, max }
}

// DefaultRunStartTimeout is how long, unless WithRunStartTimeout says
// otherwise, Ray may keep a job it accepted pending (its driver not
// started) before the run fails: an hour, four times Ray's own limit
// (RAY_JOB_START_TIMEOUT_SECONDS, 15 min by default), so that a head that
// keeps to its limit fails the job first, with its own reason.
const DefaultRunStartTimeout = time.Hour

// WithRunStartTimeout: see dlc.WithRunStartTimeout.
func WithRunStartTimeout(d time.Duration) Option { return func(o *options) { o.runStartTime = d } }

// DefaultRayUnreachableTimeout is how long, unless
// WithRayUnreachableTimeout says otherwise, Ray may stay unreachable about
// a live run's job before the run fails: ten minutes, the bound after
// which a cluster's head that does not answer is taken for lost.
const DefaultRayUnreachableTimeout = 10 * time.Minute

// WithRayUnreachableTimeout: see dlc.WithRayUnreachableTimeout.
func WithRayUnreachableTimeout(d time.Duration) Option {
	return func(o *options) { o.rayUnreachable = d }
}

// DefaultScheduleFloor is the shortest time a schedule may leave between
// two ticks unless WithScheduleFloor says otherwise: a minute, crontab's
// own step.
const DefaultScheduleFloor = time.Minute

// WithScheduleFloor: see dlc.WithScheduleFloor.
func WithScheduleFloor(d time.Duration) Option { return func(o *options) { o.scheduleFloor = d } }

// DefaultMaxUnfinishedRuns bounds a job config's runs that have not ended
// unless WithMaxUnfinishedRuns says otherwise.
const DefaultMaxUnfinishedRuns = 100

// WithMaxUnfinishedRuns: see dlc.WithMaxUnfinishedRuns.
func WithMaxUnfinishedRuns(n int) Option { return func(o *options) { o.maxUnfinished = n } }

// WithMemberProbation: see dlc.WithMemberProbation.
func WithMemberProbation(rounds int) Option { return func(o *options) { o.probation = rounds } }

// WithObserver: see dlc.WithObserver.
func WithObserver() Option { return func(o *options) { o.observer = true } }

// WithAuthorizer: see dlc.WithAuthorizer.
func WithAuthorizer(a auth.Authorizer) Option { return func(o *options) { o.authorizer = a } }

// Authorizer returns the authorizer the engine was given, nil for none.
func (c *Engine) Authorizer() auth.Authorizer { return c.o.authorizer }

// WithRepairGrace: see dlc.WithRepairGrace.
func WithRepairGrace(d time.Duration) Option { return func(o *options) { o.grace = d } }

// WithAutoscaleHeadroom: see dlc.WithAutoscaleHeadroom.
func WithAutoscaleHeadroom(workers int) Option { return func(o *options) { o.headroom = workers } }

// WithMeteringInterval: see dlc.WithMeteringInterval.
func WithMeteringInterval(d time.Duration) Option { return func(o *options) { o.meterEvery = d } }

// WithUsageCompaction: see dlc.WithUsageCompaction.
func WithUsageCompaction(after time.Duration) Option {
	return func(o *options) { o.compactAfter = after }
}

// DefaultMeteringInterval is how often a running cluster's open usage
// interval is written by default: an hour.
const DefaultMeteringInterval = time.Hour

// WithStepTimeout: see dlc.WithStepTimeout.
func WithStepTimeout(d time.Duration) Option { return func(o *options) { o.stepTime = d } }

// WithWorkSharing: see dlc.WithWorkSharing.
func WithWorkSharing(ttl time.Duration) Option {
	return func(o *options) { o.shareTTL, o.shareSet = ttl, true }
}

// WithReconcileTimeout: see dlc.WithReconcileTimeout.
func WithReconcileTimeout(d time.Duration) Option { return func(o *options) { o.reconcileTime = d } }

// WithResync: see dlc.WithResync.
func WithResync(d time.Duration) Option { return func(o *options) { o.resync = d } }

// PackageCheck checks a job's package where it is (J5), reporting its
// problems as field errors (storage.CheckPackage, with or without a COS
// client).
type PackageCheck func(ctx context.Context, pkg storage.Package, opt storage.InspectOptions) error

// localPackages checks local package files only: a package in COS is
// not read without a COS client (dlc.WithCOS).
func localPackages(ctx context.Context, pkg storage.Package, opt storage.InspectOptions) error {
	_, err := storage.CheckPackage(ctx, nil, pkg, opt)
	return err
}

// WithPackageCheck sets how job packages are checked when a job config is
// saved: check, which reads packages in COS when readsCOS (dlc.WithCOS).
func WithPackageCheck(check PackageCheck, readsCOS bool) Option {
	return func(o *options) { o.checkPackage, o.readsCOS = check, readsCOS }
}

// WithDefaultBackend sets what makes the backend when WithBackend gives
// none, from the client's clock and node specs (dlc's New supplies a
// memory backend).
func WithDefaultBackend(f func(backend.Clock, quota.Catalog) backend.Backend) Option {
	return func(o *options) { o.newBackend = f }
}

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
	// headroomLevel is, per resource group, what waited in its queue at
	// its last pass as headroom sees it (waitLevel), so that the clusters
	// are queued to follow only when it changes (headroomFollowsQueue).
	headroomMu    sync.Mutex
	headroomLevel map[string]int
	o             options
	store         backend.Store
	ray           backend.Provisioner
	clock         backend.Clock
	cat           cluster.Catalogs
	policy        scheduler.Policy
	cache         *objects.Cache
	configs       *sharedConfigs // the job configs' configs the cache's runs share (cache.go)
	queues        *queues
	metrics       *metrics    // nil: none registered
	meters        meterNotes  // when this client first saw each change of a meter not yet recorded
	acc           *access     // typed reads and writes of the stored objects
	archive       *logArchive // nil: runs' whole logs are not kept in COS (logarchive.go)

	finished *finishedRuns // the finished runs by job config (retention.go)
	trimming atomic.Bool   // a retention step is trimming to the bound across job configs (trimAll)
	order    *runOrder     // each job config's runs in list order (runorder.go)
	load     *runLoad      // each cluster's active runs and last run end (placement.go)

	run    *runner.Runner // runs each kind's reconciler on its queued keys
	ctx    context.Context
	cancel context.CancelFunc

	ledger *ledger       // the quota accounts' I/O (ledger.go)
	share  *workSharing  // the work shared with the other clients on the store (replicas.go)
	notes  *clusterNotes // what this client remembers of each cluster between its steps (cluster_reconciler.go)

	// The entities: each kind's service, which owns the kind's write
	// paths; the reconcilers and the other kinds reach them here.
	clusters *ClusterService
	groups   *GroupService
	jobs     *JobService
	runs     *RunService
	names    *names // the claims of cluster and group names (names.go)

	mu         sync.Mutex
	seq        uint64 // the last run Seq handed out
	retainSeen bool   // a resync has queued every finished run (retention.go)
	stopResync func() bool

	views  *views.Hub  // the watches and waits of callers
	loaded atomic.Bool // the store's snapshot is in the cache (runLoad keeps only ends of cached clusters after)

	// early holds the changes the store's watch told of before the
	// snapshot was in the cache, in order (see onChange); nil once it is.
	earlyMu sync.Mutex
	early   *[]backend.Change
}

// New returns a client over the backend WithBackend gives (or
// WithDefaultBackend makes: dlc.New supplies a memory one), on the real
// clock unless WithClock says otherwise. It reads the store once (the snapshot its cache
// starts from), then reconciles every object it found: what another
// client, or this process before a restart, left half-done is finished.
func New(opts ...Option) (*Engine, error) {
	// The defaults: the options' that have a value of their own, then,
	// once the values are checked, those whose 0 means the default and
	// those derived from other options.
	o := options{checkPackage: localPackages, workers: 8, retries: 8, maxDelay: 30 * time.Second, grace: 30 * time.Second, settleAt: 32,
		holdsWait: 5 * time.Second, headroom: 1, stepTime: 10 * time.Minute, log: logr.Discard(), resync: 5 * time.Minute,
		retention: retention{maxAge: DefaultRunRetention, perJob: DefaultRunsPerJob, total: DefaultMaxFinishedRuns}, runStartTime: DefaultRunStartTimeout, rayUnreachable: DefaultRayUnreachableTimeout,
		scheduleFloor: DefaultScheduleFloor, maxUnfinished: DefaultMaxUnfinishedRuns, probation: DefaultMemberProbation,
		meterEvery: DefaultMeteringInterval}
	for _, f := range opts {
		f(&o)
	}
	if err := o.check().ToError(); err != nil {
		return nil, fmt.Errorf("dlc: %w", err)
	}
	if o.observer {
		// Reconciles nothing: no worker, no share of the work, no resync.
		o.workers, o.shareTTL, o.resync = 0, 0, 0
	}
	if !o.shareSet && o.workers > 0 {
		o.shareTTL = defaultShareTTL
	}
	o.baseDelay = cmp.Or(o.baseDelay, defaultBaseDelay)
	o.runRetryBase = cmp.Or(o.runRetryBase, job.RetryBackoffBase)
	o.runRetryMax = cmp.Or(o.runRetryMax, job.RetryBackoffMax)
	o.reconcileTime = cmp.Or(o.reconcileTime, defaultReconcileTimeout)
	o.logPrefix = cmp.Or(o.logPrefix, defaultLogsLocation)
	if o.clock == nil {
		o.clock = backend.RealClock{}
	}
	if o.catalogs.Nodes.Len() == 0 {
		o.catalogs.Nodes = quota.DefaultCatalog()
	}
	if len(o.catalogs.Images.Names()) == 0 {
		o.catalogs.Images = cluster.DefaultImages()
	}
	if o.backend == nil && o.newBackend != nil {
		o.backend = o.newBackend(o.clock, o.catalogs.Nodes)
	}
	if o.backend == nil {
		return nil, fmt.Errorf("dlc: %w", errs.List{errs.Required(errs.NewPath("WithBackend"), "", "a backend (the dlc package supplies a memory one by default)")}.ToError())
	}
	if o.policy == nil {
		o.policy = scheduler.NewRandom(time.Now().UnixNano())
	}
	ctx, cancel := context.WithCancel(context.Background())
	configs := newSharedConfigs()
	c := &Engine{o: o, store: o.backend, ray: o.backend, clock: o.clock, cat: o.catalogs, policy: o.policy,
		configs: configs, cache: objects.New(derivers(configs)), queues: newQueues(queue.QueueOptions{MaxWait: o.maxWait}), finished: newFinishedRuns(), order: newRunOrder(), load: newRunLoad(), ctx: ctx, cancel: cancel, notes: newClusterNotes(), headroomLevel: map[string]int{}}
	c.clusters, c.groups, c.jobs, c.runs = &ClusterService{c}, &GroupService{c}, &JobService{c}, &RunService{c}
	c.archive = newLogArchive(&o)
	m, err := newMetrics(o.registerer, c)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("dlc: registering metrics: %w", err)
	}
	ro := runner.Options{Clock: o.clock, Workers: o.workers, Retries: o.retries, StepTimeout: o.reconcileTime,
		BaseDelay: o.baseDelay, MaxDelay: o.maxDelay, Log: o.log, Admission: admission, Transient: transient}
	if m != nil {
		c.metrics = m
		ib := instrumented{Backend: o.backend, m: m, log: o.log}
		c.store, c.ray = ib, ib
		ro.Metrics = m
	}
	c.acc = &access{store: c.store, backend: o.backend, cache: c.cache, readBound: o.reconcileTime}
	c.names = newNames(c.acc, o.clock, o.grace)
	c.ledger = newLedger(c.acc, o.clock, o.log, o.grace, o.holdsWait, c)
	c.acc.bind, c.acc.awaitBound = c.ledger.bind, c.ledger.awaitBound
	c.share = &workSharing{acc: c.acc, clock: o.clock, log: o.log, ctx: ctx, metrics: c.metrics, walk: c.walk}
	if o.shareTTL > 0 {
		probation := uint64(o.probation)
		if o.resync == 0 {
			probation = 0 // no rounds
		}
		c.share.rep = newReplicas(o.shareTTL, probation)
	}
	ro.Sharing = sharing{c.share}
	reconcilers := c.newReconcilers()
	if o.observer {
		reconcilers = nil // no key is queued (Runner.Enqueue)
	}
	c.run = runner.New(ctx, ro, reconcilers)
	c.share.run = c.run
	c.views = views.NewHub(c.cache, ctx.Done())
	c.early = &[]backend.Change{}
	snap, err := c.store.Watch(ctx, c.onChange)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("dlc: watching the store: %w", err)
	}
	// Job configs first: their runs then share their configs (sharedConfigs).
	jobsFirst := func(d backend.Doc) int {
		if d.Kind == kindJob {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(snap, func(a, b backend.Doc) int { return cmp.Compare(jobsFirst(a), jobsFirst(b)) })
	for _, d := range snap {
		if d.Kind != kindReplica && !isMetered(d) {
			c.observed(d, false)
		}
		if d.Kind == kindResourceGroup {
			// Its first sight: what it was before this client came is
			// not known, so its first change looks at the live clusters
			// (foreign_accounts.go).
			c.ledger.markSuspect(d.ID, d.Version)
		}
	}
	if c.share.rep != nil {
		c.share.seedReplicas(snap)
	}
	c.applyEarly()
	// The snapshot's runs came in any order beside their clusters: the
	// ends kept of clusters it does not have are dropped now, and later
	// ones as they come (observeRunEnd).
	c.loaded.Store(true)
	c.load.keepOnly(func(id string) bool { _, ok := c.cache.Get(kindCluster, id); return ok })
	if c.share.rep != nil {
		c.share.startReplicas()
	}
	if o.observer {
		return c, nil // its cache and views only: no reconciler to start
	}
	c.ray.Observe(ctx, func(kind, id string) {
		c.enqueue(kind + "/" + id)
		if kind == kindCluster {
			c.enqueue(kindMeter + "/" + id) // what runs of it may have changed
		}
	})
	c.share.periodicResync() // the first round: what later ones find unchanged since
	if o.resync > 0 {
		var tick func()
		tick = func() {
			if ctx.Err() != nil {
				return
			}
			c.share.periodicResync()
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
	c.ledger.close()
	c.share.stopReplicas()
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

// normalise derives again what a stored object repeats of its other
// fields, as the platform computes it when it writes, so that an edit
// from outside (anyone with edit rights on the store) cannot make the
// copy disagree with what it copies: a cluster's quota group is its live
// resource group's, its worker counts lie within the live ranges, what
// drains is above them (and nothing without a live environment); a run's
// priority is its config's. (A run's demand needs the catalog: see
// RunService.rederive.)
func normalise(v any) {
	switch x := v.(type) {
	case *cluster.Cluster:
		if x.Live == nil {
			x.Draining = nil
			return
		}
		x.QuotaGroup = x.Live.ResourceGroup
		for _, w := range x.Live.Workers {
			if n, ok := x.Replicas[w.Name]; ok {
				x.Replicas[w.Name] = min(max(n, w.Instances.Min), w.Instances.MaxOrMin())
			}
		}
		// What drains is above a live group's ceiling, or nothing.
		for g, n := range x.Draining {
			if cur, ok := x.Replicas[g]; !ok || n <= cur {
				delete(x.Draining, g)
			}
		}
		if len(x.Draining) == 0 {
			x.Draining = nil
		}
	case *job.Run:
		x.Priority = x.Config.Priority()
	}
}

// decodeInto reads JSON into v.
func decodeInto(data []byte, v any) error { return json.Unmarshal(data, v) }

// event makes a log entry; user entries name the caller.
func (c *Engine) event(ctx context.Context, source, action, msg string) event.Event {
	e := event.Event{Time: c.clock.Now(), Source: source, Action: action, Message: msg}
	if source == "user" {
		e.Actor = UserFrom(ctx)
	}
	return e
}

// nilInput is the error of an operation given nil for what at path:
// ErrInvalid, naming what was wanted; nothing is changed.
func nilInput(path, want string) error {
	return errs.List{errs.Required(errs.Path(path), "", want+" is required; nil was passed")}.ToError()
}

// conflictRetries bounds compare-and-swap loops on one object.
const conflictRetries = 16

// Ready reports whether the client can serve, for a readiness probe: nil
// when it is not closed, its cache holds the store's snapshot, its
// reconcile workers are running (none has exited), and the store answers a read
// made now (past its cache where the store can: on Kubernetes, a GET of
// the API server), bounded by ctx. Otherwise ErrUnavailable, saying what
// is not ready. It writes nothing.
func (c *Engine) Ready(ctx context.Context) error {
	const op = "ready"
	switch {
	case c.ctx.Err() != nil:
		return errs.Unavailable(op, errClosed)
	case !c.loaded.Load():
		return errs.Unavailable(op, errors.New("the store's snapshot is not in the cache yet"))
	}
	if live, want := c.run.Workers(); live != want {
		return errs.Unavailable(op, fmt.Errorf("%d of %d reconcile workers take keys", live, want))
	}
	if _, err := c.acc.latest(ctx, kindName, "ready-probe"); err != nil && !errs.IsNotFound(err) {
		return errs.Unavailable(op, fmt.Errorf("the store does not answer: %w", err))
	}
	return nil
}
