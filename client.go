package dlc

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/platform"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/plan"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/scheduler"
	"github.com/aidlc/dlc/storage"
	"github.com/aidlc/dlc/watch"
)

// Client is the platform: clusters, cluster groups, templates, job
// configs, runs, quota and scheduling over one backend. It is safe for
// concurrent use, and several clients (in one process or many) may share
// one store: every decision is a compare-and-swap on a stored object, so
// they decide the same. A user call validates, writes the desired state
// and returns; reconcilers inside the client take each object the rest
// of the way, retrying with backoff. Close stops them.
type Client struct {
	e *platform.Engine
}

// New returns a client; with no options it runs on a new memory backend
// with the real clock. It reads the store once (the snapshot its cache
// starts from), then reconciles every object it found: what another
// client, or this process before a restart, left half-done is finished.
// An option given a value out of its range (docs/options.md) makes it
// fail with ErrInvalid, naming every such option.
func New(opts ...Option) (*Client, error) {
	popts := defaults()
	for _, o := range opts {
		if o.apply != nil { // the zero Option sets nothing
			popts = append(popts, o.apply)
		}
	}
	e, err := platform.New(popts...)
	if err != nil {
		return nil, err
	}
	return &Client{e: e}, nil
}

// Close stops the client's reconcilers and watches; what they had not
// finished is finished by another client on the same store, or by the
// next one started on it. Close waits for the steps in progress.
func (c *Client) Close() error { return c.e.Close() }

// Catalogs returns the node spec and image catalogs the client validates with.
func (c *Client) Catalogs() cluster.Catalogs {
	return c.e.Catalogs()
}

// Reconcile runs every queued reconcile step in the caller's goroutine,
// including the steps they queue, and returns how many it ran. It is for
// clients made WithWorkers(0), such as dlctest.NewMemory's on a fake
// clock; with workers it only competes with them.
func (c *Client) Reconcile() int {
	return c.e.Reconcile()
}

// Ready reports whether the client can serve, for a readiness probe: nil
// when it is not closed, its cache holds the store's snapshot, its
// reconcile workers are running (none has exited), and the store answers a read
// made now (on Kubernetes, a GET of the API server), bounded by ctx;
// otherwise ErrUnavailable, saying what is not ready. It writes nothing,
// and asks no authorizer (a probe has no user).
func (c *Client) Ready(ctx context.Context) error { return c.e.Ready(ctx) }

// CheckQuota audits the reservations in the store itself, both ways, and
// against what Ray runs. In every resource group: no reservation is
// negative, larger than the capacity or dated in the future (further than
// clocks are apart), together they fit the capacity, and none has been
// seen (by this client, on its own clock) for longer than the repair grace
// held by a holder that no longer justifies it (a leak). Every live
// cluster (starting, running, abnormal or hibernating) holds at least
// what it runs in its resource group, and every cluster but one being
// deleted holds at least what the pods Ray runs of it request (the
// provisioner's pods, terminating ones included): a hold missing or short,
// as an edit from outside the platform leaves it, lets the group hand out
// quota in use. It returns every problem found.
func (c *Client) CheckQuota(ctx context.Context) error {
	return c.e.CheckQuota(ctx)
}

// SaveJob saves a job config, as Jobs().Create with a request id; with
// RunJob it makes *Client a job.Submitter.
func (c *Client) SaveJob(ctx context.Context, cfg *job.Config, requestID string) (*job.Record, error) {
	if err := c.mayConfig(ctx, auth.CreateJob, configResource(auth.KindJob, "", UserFrom(ctx), cfg), cfg); err != nil {
		return nil, err
	}
	rec, err := c.e.SaveJob(ctx, cfg, requestID)
	return replayed(ctx, auth.KindJob, requestID, rec, err, recordCreator)
}

// RunJob starts a run, as Runs().Create with a request id.
func (c *Client) RunJob(ctx context.Context, jobID, requestID string) (*job.Run, error) {
	if err := c.mayRun(ctx, jobID); err != nil {
		return nil, err
	}
	r, err := c.e.RunJob(ctx, jobID, requestID)
	return replayed(ctx, auth.KindRun, requestID, r, err, runCreator)
}

// WithUser returns a context that acts as user: the creator of what it
// creates and the actor in operation logs.
func WithUser(ctx context.Context, user string) context.Context { return platform.WithUser(ctx, user) }

// UserFrom returns the user of ctx, or "anonymous".
func UserFrom(ctx context.Context) string { return platform.UserFrom(ctx) }

// Option configures a Client: see the With functions, and
// docs/options.md for all of them in one table. An option not given
// keeps its default; given twice, the last one counts. New refuses a
// value out of its option's range with ErrInvalid, naming every such
// option (and parameter) at once.
type Option struct{ apply platform.Option }

// WithBackend sets the backend: the store the client keeps its objects in
// and the Ray it runs them on. The default, and nil, is a new memory
// backend on the client's clock and node spec catalog.
func WithBackend(b Backend) Option { return Option{platform.WithBackend(b)} }

// WithClock sets the clock the client stamps times with, queues by and
// retries on; pass the backend's clock in tests. The default, and nil, is
// the real clock.
func WithClock(c backend.Clock) Option { return Option{platform.WithClock(c)} }

// WithCatalogs replaces the node spec and image catalogs the client
// validates with (Catalogs). A catalog left empty keeps the default:
// quota.DefaultCatalog's node specs, cluster.DefaultImages's images.
func WithCatalogs(c cluster.Catalogs) Option { return Option{platform.WithCatalogs(c)} }

// WithPolicy sets the policy that picks the member of a cluster group
// whose policy is random (group.Random, the default; G3); the default, and
// nil, is scheduler.NewRandom with a time-based seed. Groups with another
// policy (least-loaded, ordered failover, most free quota:
// Groups().SetPolicy) use the scheduler package's, which decide the same
// on every client.
func WithPolicy(p scheduler.Policy) Option { return Option{platform.WithPolicy(p)} }

// WithMaxWait sets how long an on-demand run that does not fit its
// resource group's free quota may wait before it holds back the smaller
// runs behind it in the group's queue, so that the quota freed meanwhile
// adds up until it fits (default 0: never; smaller runs that fit always
// go first). A negative value makes New fail with ErrInvalid.
func WithMaxWait(d time.Duration) Option { return Option{platform.WithMaxWait(d)} }

// WithLogsLocation sets the prefix of where runs' logs are kept, e.g.
// "cos://logs-1250000000/dlc"; a run's logs are at <prefix>/<run id>
// (Run.Logs). The default, and "", is "memory://logs". In COS, and with
// WithCOS, each run's whole log (its last job.MaxArchivedLogBytes) is
// written there when it ends, as plain text, one line per line; with
// WithCOS, a location in COS that is not a COS URL makes New fail with
// ErrInvalid.
func WithLogsLocation(prefix string) Option { return Option{platform.WithLogsLocation(prefix)} }

// WithWorkers sets how many goroutines run the reconcilers of clusters,
// runs and schedules (default 8); the resource groups' (admission, the
// quota's repair, settling reservations) have a quarter as many more of
// their own, at least two, so that admitting a run never waits behind
// the steps of the runs admitted before it. 0 starts none: the caller
// runs what is queued with Reconcile, as dlctest.NewMemory does on its
// fake clock, so that every step is deterministic. A negative value makes
// New fail with ErrInvalid.
func WithWorkers(n int) Option { return Option{platform.WithWorkers(n)} }

// WithRetries sets how a failing background step is retried: up to
// retries times (default 8; 0: the first failure gives up), waiting from
// base (default, and 0, 10ms) doubling up to max (default 30s). After the
// last retry the object turns abnormal (a cluster) or failed (a run) with
// the error as its reason; a delete keeps retrying at the longest wait.
// A step that met only a conflict, or a Ray that did not answer
// (WithRayUnreachableTimeout), is retried with the same backoff without
// counting. A negative retries or base, or a max below base (10ms if base
// is 0), makes New fail with ErrInvalid.
func WithRetries(retries int, base, max time.Duration) Option {
	return Option{platform.WithRetries(retries, base, max)}
}

// WithRunRetryBackoff sets how long a failed run's retry (L3) waits after
// it ended: base after the first attempt, doubling per attempt, at most
// max (defaults, and 0, job.RetryBackoffBase, 10s, and
// job.RetryBackoffMax, 5m). A negative value, or a max below base (each
// taken with its default for 0), makes New fail with ErrInvalid.
func WithRunRetryBackoff(base, max time.Duration) Option {
	return Option{platform.WithRunRetryBackoff(base, max)}
}

// WithRepairGrace sets how long a reservation whose holder no longer
// justifies it (deleted, hibernated, ended: left by a crash between two
// writes) is kept before the quota reconciler releases it (default 30s).
// It is also how long a name claim whose owner does not exist (yet) is
// left to its creator before another may take it over, and the quota
// reconciler audits a resource group's holders at most every quarter of
// it. It is the room a creator has between its two writes: a value not
// above 0 makes New fail with ErrInvalid.
func WithRepairGrace(d time.Duration) Option { return Option{platform.WithRepairGrace(d)} }

// WithAutoscaleHeadroom sets how many workers above what Ray's own
// autoscaler runs an autoscaling worker group's reservation covers, while
// quota allows (default 1): the autoscaler cannot be given more workers
// than are reserved, and using that room is how it asks for more. 0: the
// platform does not follow that autoscaler, which then moves within what
// Clusters().Autoscale grants (from a start: the group's minimum). (Only
// where Ray runs an autoscaler of its own: Kubernetes.) A negative value
// makes New fail with ErrInvalid.
func WithAutoscaleHeadroom(workers int) Option {
	return Option{platform.WithAutoscaleHeadroom(workers)}
}

// WithStepTimeout sets how long a cluster may stay creating, starting or
// hibernating with no progress from Ray (a change of the generation it
// follows, its phase, its pods) before it turns abnormal, saying it timed
// out (default 10m). Each client measures it on its own clock from when
// it first saw the step as it is, so neither a jump of the wall clock nor
// a skew between replicas fails a step. While Ray has not taken the
// change up at all (KubeRay's backlog) the step may take six times as
// long. An abnormal cluster still follows Ray, and leaves abnormal when
// Ray runs it (or has released it) at its generation after all. A
// deleting cluster that Ray still has after this long says so, and the
// delete goes on. A value not above 0 makes New fail with ErrInvalid.
func WithStepTimeout(d time.Duration) Option { return Option{platform.WithStepTimeout(d)} }

// WithWorkSharing sets how clients over one store (the replicas of a
// service) share the background work: each reconciles the objects it owns
// by key among the live clients, so a replica adds throughput, not
// conflicts. A client renews a membership document in the store every
// third of ttl; one that stops renewing (it crashed) is taken for gone
// after ttl and its share taken over; one that closes hands its share over
// at once. Correctness never rests on it: every decision is a
// compare-and-swap. A member counted live that leaves its share undone (a
// membership document forged in the store and kept changing, a replica
// whose workers hang) is found at the periodic resyncs (WithResync): each
// client also takes a step of every key it finds unchanged since the last
// one, and leaves out, for a while, a member whose keys needed such a
// step at two resyncs in a row, taking its share over (it logs it, and
// counts it in dlc_replica_stalled_total). 0 turns sharing off (every
// client reconciles every object). Default: 15 s for a client with
// workers, off for one without (WithWorkers(0)). A negative value makes
// New fail with ErrInvalid.
func WithWorkSharing(ttl time.Duration) Option { return Option{platform.WithWorkSharing(ttl)} }

// WithObserver makes a client that serves and reconciles nothing: its
// services read, write desired state (create, start, submit, edit,
// delete), plan, wait, watch and follow logs as any client's do, from a
// cache of the store, while the reconcilers of the platform's other
// clients take what it writes the rest of the way. It starts no
// reconcile worker, joins no work sharing (it stores no membership, takes
// no share and leaves none undone when it exits) and runs no resync:
// what a command-line tool, a read-only front end or any short-lived
// process wants. WithWorkers, WithWorkSharing and WithResync are then
// ignored, and Reconcile runs nothing. A platform needs at least one
// client that is not an observer.
func WithObserver() Option { return Option{platform.WithObserver()} }

// WithReconcileTimeout bounds one reconcile step, every call it makes to
// the store and to Ray included (default, and 0, 2 min): a step still
// running then is cancelled and retried as a failed step, so that a call
// that hangs cannot hold a worker. The backends bound their own calls
// more tightly (the Kubernetes backend: 10 s to a Ray head, 30 s to the
// API server). A negative value makes New fail with ErrInvalid.
func WithReconcileTimeout(d time.Duration) Option { return Option{platform.WithReconcileTimeout(d)} }

// WithResync sets how often the client queues every object again, so that
// a change whose notice was lost is still acted on (default 5 min; 0:
// only at start, as dlctest.NewMemory does on its fake clock). With the
// work shared it is also when a client takes up the keys their owner left
// undone (WithWorkSharing): with 0, nothing is, and a joining replica has
// no probation (WithMemberProbation). A negative value makes New fail
// with ErrInvalid.
func WithResync(d time.Duration) Option { return Option{platform.WithResync(d)} }

// WithRunRetention sets how long finished runs are kept (default
// DefaultRunRetention, 7 days, and DefaultRunsPerJob, 1,000). A run that
// has ended, and of which Ray holds nothing any more, is deleted once it
// finished more than maxAge ago; and a job config keeps at most perJob
// finished runs: when one more finishes, the oldest beyond perJob go at
// once. 0 is no bound of that kind: WithRunRetention(0, 0) with
// WithMaxFinishedRuns(0) keeps every run for ever (WithMaxFinishedRuns
// bounds them across job configs). A negative value makes New fail with
// ErrInvalid. Runs that have not finished are never deleted. The run's
// record goes, with its event log and the reference to its logs
// (Run.Logs); a request id that made it no longer finds it, so a retry
// after that makes a new run.
func WithRunRetention(maxAge time.Duration, perJob int) Option {
	return Option{platform.WithRunRetention(maxAge, perJob)}
}

// WithMemberProbation sets how many periodic resyncs (WithResync) a
// replica that joins the work sharing waits before the others count it
// (default DefaultMemberProbation, 2: ten minutes at the default resync;
// 0: at once). Until then the replicas it found still do its share, and
// it does its share too (conflicts, never a key left undone); a
// membership document forged by a writer of the store whose id changes
// faster than that never holds up the work. Set 0 where only the
// backend's identity can write the membership documents and a new
// replica should spare the others at once. A negative value makes New
// fail with ErrInvalid; without periodic resyncs (WithResync(0)) there
// is no probation.
func WithMemberProbation(rounds int) Option { return Option{platform.WithMemberProbation(rounds)} }

// DefaultMemberProbation is WithMemberProbation's default: two periodic
// resyncs.
const DefaultMemberProbation = platform.DefaultMemberProbation

// WithMaxFinishedRuns bounds the finished runs kept across every job
// config (default DefaultMaxFinishedRuns, 100,000; 0: no bound), beside
// WithRunRetention's bounds of age and per job config: when more have
// finished, the oldest of them all go, with a hundredth of the bound
// more, so that every replica's cache of runs stays bounded however many
// job configs there are. A negative value makes New fail with ErrInvalid.
func WithMaxFinishedRuns(n int) Option { return Option{platform.WithMaxFinishedRuns(n)} }

// WithRunStartTimeout sets how long Ray may keep a run's job pending after
// it accepted it (the driver not started: Ray reports the job PENDING)
// before the run fails saying so, its job stopped on Ray (default
// DefaultRunStartTimeout, an hour; 0: no bound). Ray's own limit
// (RAY_JOB_START_TIMEOUT_SECONDS on the head, 15 min by default) fails the
// job first, with Ray's reason, where a head keeps to it; this bound is
// for a head that does not. It is measured from when a client recorded
// Ray's acceptance (Run.RayAcceptedAt), on that client's clock (a client
// whose clock is ahead of it by a good part of the bound ends the run that
// much early). A negative value makes New fail with ErrInvalid.
func WithRunStartTimeout(d time.Duration) Option { return Option{platform.WithRunStartTimeout(d)} }

// WithScheduleFloor sets the shortest time a job config's schedule (L1)
// may leave between two of its ticks (default DefaultScheduleFloor, a
// minute; 0: no floor). A config whose schedule fires more often (the
// six-field "* * * * * *" fires every second) is refused when saved
// (ErrInvalid, rule L1), and one stored so by someone else starts nothing
// and says so in its log. A negative value makes New fail with ErrInvalid.
func WithScheduleFloor(d time.Duration) Option { return Option{platform.WithScheduleFloor(d)} }

// DefaultScheduleFloor is WithScheduleFloor's default: a minute.
const DefaultScheduleFloor = platform.DefaultScheduleFloor

// WithMaxUnfinishedRuns bounds how many runs of one job config may not
// have ended when its schedule starts another (default
// DefaultMaxUnfinishedRuns, 100; 0: no bound): a tick beyond is skipped
// and recorded in the config's log (tick-skipped; the ticks skipped one
// after another for it are one entry, counted), so that a schedule whose
// runs wait, on a cluster that does not run, leaves a bounded number of
// them. A negative value makes New fail with ErrInvalid.
func WithMaxUnfinishedRuns(n int) Option { return Option{platform.WithMaxUnfinishedRuns(n)} }

// DefaultMaxUnfinishedRuns is WithMaxUnfinishedRuns's default: 100.
const DefaultMaxUnfinishedRuns = platform.DefaultMaxUnfinishedRuns

// DefaultRunStartTimeout is WithRunStartTimeout's default: an hour.
const DefaultRunStartTimeout = platform.DefaultRunStartTimeout

// WithRayUnreachableTimeout sets how long a run's job may stay out of
// reach on Ray before the run fails (default
// DefaultRayUnreachableTimeout, ten minutes). A status read or a submit
// that fails (a head restarting, a proxy or API server not answering) is
// no word of Ray's on the job: the run keeps its state, its message says
// "Ray unreachable since …", and the step is retried with backoff without
// counting against WithRetries. Once Ray answers, what it says decides,
// the deadline included: a job that ended before its deadline keeps its
// outcome. The outage is timed from the recording client's clock to the
// looking client's: a skew between them shortens or lengthens it by as
// much. There is no "no bound": a value not above 0 makes New fail with
// ErrInvalid.
func WithRayUnreachableTimeout(d time.Duration) Option {
	return Option{platform.WithRayUnreachableTimeout(d)}
}

// DefaultRayUnreachableTimeout is WithRayUnreachableTimeout's default.
const DefaultRayUnreachableTimeout = platform.DefaultRayUnreachableTimeout

// The defaults of WithRunRetention.
const (
	// DefaultRunRetention is how long a finished run is kept: 7 days.
	DefaultRunRetention = platform.DefaultRunRetention
	// DefaultRunsPerJob is how many finished runs of one job config are
	// kept at most: 1,000.
	DefaultRunsPerJob = platform.DefaultRunsPerJob
	// DefaultMaxFinishedRuns is how many finished runs are kept at most
	// across every job config.
	DefaultMaxFinishedRuns = platform.DefaultMaxFinishedRuns
)

// WithCOS sets the COS client that job packages in COS are inspected with
// when a job config is saved (J5); without it (the default, and nil) only
// local packages are. With the logs' location in COS too
// (WithLogsLocation("cos://<bucket>/<prefix>")), each run's whole log is
// written there when it ends, and Runs().Logs and Follow read it from
// there once Ray no longer has it (after its cluster is gone); without
// both, a run keeps the tail of its log alone (job.Run.LogTail).
func WithCOS(c *storage.COSClient) Option {
	return Option{platform.Join(platform.WithPackageCheck(checkPackage(c), c != nil), platform.WithLogsCOS(c))}
}

// checkPackage checks job packages with c, which reads those in COS (nil:
// only local files).
func checkPackage(c *storage.COSClient) platform.PackageCheck {
	return func(ctx context.Context, pkg storage.Package, opt storage.InspectOptions) error {
		_, err := storage.CheckPackage(ctx, c, pkg, opt)
		return err
	}
}

// defaults are the options New gives every client before the caller's:
// a memory backend on the client's clock when WithBackend gives none.
func defaults() []platform.Option {
	return []platform.Option{
		platform.WithDefaultBackend(func(clk backend.Clock, nodes quota.Catalog) backend.Backend {
			return memory.New(memory.Options{Clock: clk, NodeSpecs: nodes})
		}),
	}
}

// WithLogger sets the logger the client's services and reconcilers write
// to (default, and the zero logr.Logger: discard). It logs one line per
// state change (V(0)) and per failed step (an error, with the retry it
// schedules), with the keys cluster, run, job, resourceGroup, state and
// reason; errors are values. V(1) adds each admission, each run the
// retention deleted, and each backend call that failed. It never logs a
// spec, a credential or a URL.
func WithLogger(l logr.Logger) Option { return Option{platform.WithLogger(l)} }

// WithMetrics registers the client's Prometheus metrics with r (for
// example controller-runtime's metrics.Registry); by default, and with
// nil, none are registered. Labels are bounded: resource groups,
// priorities, states, kinds and operations, never a run or cluster id.
// See docs/operating.md for the list.
func WithMetrics(r prometheus.Registerer) Option { return Option{platform.WithMetrics(r)} }

// Store is the backend's store of the platform's objects: see
// backend.Store.
type Store = backend.Store

// Provisioner is the backend's Ray side: see backend.Provisioner.
type Provisioner = backend.Provisioner

// LatestReader is what a Store served from a cache adds: see
// backend.LatestReader.
type LatestReader = backend.LatestReader

// LatestLister is what a Store whose lists are served from a cache adds:
// see backend.LatestLister.
type LatestLister = backend.LatestLister

// AwaitingCreator is what a Store whose writes wait for its own cache
// adds, a create with that wait apart: see backend.AwaitingCreator.
type AwaitingCreator = backend.AwaitingCreator

// RunForgetter is what a Provisioner that keeps a finished run's Ray
// record adds, so that a run deleted by its retention leaves nothing
// there: see backend.RunForgetter.
type RunForgetter = backend.RunForgetter

// Backend is a Store and a Provisioner, such as *memory.Backend: see
// backend.Backend.
type Backend = backend.Backend

// DeleteOptions modify a delete or a hibernate: see cluster.DeleteOptions.
type DeleteOptions = cluster.DeleteOptions

// ClusterCreateOptions modify Clusters().Create: see cluster.CreateOptions.
type ClusterCreateOptions = cluster.CreateOptions

// HibernateOptions modify Clusters().Hibernate: Force stops the active
// runs. The same type as DeleteOptions.
type HibernateOptions = cluster.DeleteOptions

// EditResult says what an edit changed at once and what waits for the
// cluster's next start: see cluster.EditResult.
type EditResult = cluster.EditResult

// AutoscaleResult is the answer to a scale request of Ray's autoscaler:
// see cluster.AutoscaleResult.
type AutoscaleResult = cluster.AutoscaleResult

// SaveOptions modify Jobs().Create: see job.SaveOptions.
type SaveOptions = job.SaveOptions

// RunOptions modify Runs().Create: see job.RunOptions.
type RunOptions = job.RunOptions

// RunListOptions select the runs Runs().List returns: see
// job.RunListOptions.
type RunListOptions = job.RunListOptions

// EventType says what became of an object in a watch event: Added,
// Modified or Deleted.
type EventType = watch.EventType

// Watch event types.
const (
	Added    = watch.Added
	Modified = watch.Modified
	Deleted  = watch.Deleted
)

// ClusterEvent is a change of a cluster, as Clusters().Watch tells it:
// see watch.ClusterEvent.
type ClusterEvent = watch.ClusterEvent

// Plan is what an operation would do, found without writing anything
// (Clusters().PlanCreate and PlanStart, Jobs().PlanRun): the objects the
// backend would write, the quota the operation reserves beside what its
// resource group holds, whether it fits now, and where an on-demand run
// that does not would wait: see package plan.
type Plan = plan.Plan

// QuotaPlan is an operation's effect on its resource group's quota: see
// plan.Quota.
type QuotaPlan = plan.Quota

// Manifest is one object a plan says the backend would write.
type Manifest = backend.Manifest

// ClusterWatchOptions select the clusters Clusters().Watch tells of.
type ClusterWatchOptions = watch.ClusterOptions

// RunEvent is a change of a run, as Runs().Watch tells it: see
// watch.RunEvent.
type RunEvent = watch.RunEvent

// RunWatchOptions select the runs Runs().Watch tells of.
type RunWatchOptions = watch.RunOptions

// RunPage is one page of runs: see job.RunPage.
type RunPage = job.RunPage

// ClusterListOptions select the clusters Clusters().ListPage returns: see
// cluster.ListOptions.
type ClusterListOptions = cluster.ListOptions

// ClusterPage is one page of clusters: see cluster.Page.
type ClusterPage = cluster.Page

// JobListOptions select the job configs Jobs().List and ListPage return:
// see job.ListOptions.
type JobListOptions = job.ListOptions

// JobListPage is one page of the job list: see job.ListPage.
type JobListPage = job.ListPage

// oneOptions returns the options a call was given (a List, a Create): none
// is the zero value; more than one is refused (ErrInvalid), not merged.
func oneOptions[T any](opts []T) (T, error) {
	var o T
	switch len(opts) {
	case 0:
		return o, nil
	case 1:
		return opts[0], nil
	}
	return o, errs.List{errs.Invalid(errs.NewPath("opts"), "", len(opts), "at most one options value")}.ToError()
}
