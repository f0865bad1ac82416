package dlc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/scheduler"
)

// Store keeps the platform's objects as versioned documents. A Put with
// Version 0 creates (a conflict if the id is taken); otherwise Version
// must be the current one, or the Put is a conflict and changes nothing.
type Store interface {
	Get(ctx context.Context, kind, id string) (backend.Doc, error)
	List(ctx context.Context, kind string) ([]backend.Doc, error)
	Put(ctx context.Context, d backend.Doc) (int64, error)
	Delete(ctx context.Context, kind, id string, version int64) error
	AppendEvent(ctx context.Context, key string, e cluster.Event) error
	Events(ctx context.Context, key string) ([]cluster.Event, error)
}

// Provisioner is the Ray side: it makes Ray clusters follow the platform's
// clusters, runs jobs on them, and reports back to the Observer it is
// given with Watch.
type Provisioner interface {
	Watch(o backend.Observer)
	ApplyCluster(ctx context.Context, c *cluster.Cluster) error
	DeleteCluster(ctx context.Context, id string) error
	SubmitRun(ctx context.Context, r *job.Run, c *cluster.Cluster) error
	StopRun(ctx context.Context, runID string) error
	Pods(ctx context.Context, clusterID string) ([]cluster.Pod, error)
	Logs(ctx context.Context, runID string) ([]string, error)
	Dashboard(ctx context.Context, clusterID string) string
}

// Backend is a Store and a Provisioner, such as *memory.Backend.
type Backend interface {
	Store
	Provisioner
}

// Option configures a Client.
type Option func(*options)

type options struct {
	backend   Backend
	clock     backend.Clock
	catalogs  cluster.Catalogs
	policy    scheduler.Policy
	maxWait   time.Duration
	logPrefix string
}

// WithBackend sets the backend; the default is a new memory backend.
func WithBackend(b Backend) Option { return func(o *options) { o.backend = b } }

// WithClock sets the clock the client stamps times with and queues by;
// pass the backend's clock in tests.
func WithClock(c backend.Clock) Option { return func(o *options) { o.clock = c } }

// WithCatalogs replaces the node spec and image catalogs.
func WithCatalogs(c cluster.Catalogs) Option { return func(o *options) { o.catalogs = c } }

// WithPolicy sets the policy that picks a cluster group's member; the
// default is scheduler.NewRandom with a time-based seed.
func WithPolicy(p scheduler.Policy) Option { return func(o *options) { o.policy = p } }

// WithMaxWait sets how long an on-demand run may wait before it holds
// back smaller runs behind it in its resource group (0: never).
func WithMaxWait(d time.Duration) Option { return func(o *options) { o.maxWait = d } }

// WithLogsLocation sets the prefix of where runs' logs are kept, e.g.
// "cos://logs-1250000000/dlc"; a run's logs are at <prefix>/<run id>.
func WithLogsLocation(prefix string) Option { return func(o *options) { o.logPrefix = prefix } }

type userKey struct{}

// WithUser returns a context that acts as user: the creator of what it
// creates and the actor in operation logs.
func WithUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

// UserFrom returns the user of ctx, or "anonymous".
func UserFrom(ctx context.Context) string {
	if u, ok := ctx.Value(userKey{}).(string); ok && u != "" {
		return u
	}
	return "anonymous"
}

// Client is the platform: clusters, cluster groups, templates, job
// configs, runs, quota and scheduling over one backend. It is safe for
// concurrent use. State changes are serialised inside the client; each
// goes through one place per entity that checks the state machine, the
// quota and the store's version.
type Client struct {
	opts   options
	be     Backend
	clock  backend.Clock
	cat    cluster.Catalogs
	policy scheduler.Policy

	mu      sync.Mutex
	ledger  *quota.Ledger
	queues  map[string]*scheduler.Queue // on-demand runs by resource group
	waiting map[string]uint64           // cluster- and group-mode runs not yet placed, by submission order
	seq     uint64
}

// New returns a client; with no options it runs on a new memory backend
// with the real clock.
func New(opts ...Option) *Client {
	o := options{}
	for _, f := range opts {
		f(&o)
	}
	if o.clock == nil {
		o.clock = backend.RealClock{}
	}
	if o.backend == nil {
		o.backend = memory.New(memory.Options{Clock: o.clock, NodeSpecs: o.catalogs.Nodes})
	}
	if o.catalogs.Nodes.Len() == 0 {
		o.catalogs.Nodes = quota.DefaultCatalog()
	}
	if len(o.catalogs.Images.Names()) == 0 {
		o.catalogs.Images = cluster.DefaultImages()
	}
	if o.policy == nil {
		o.policy = scheduler.NewRandom(time.Now().UnixNano())
	}
	if o.logPrefix == "" {
		o.logPrefix = "memory://logs"
	}
	c := &Client{opts: o, be: o.backend, clock: o.clock, cat: o.catalogs, policy: o.policy,
		ledger: quota.NewLedger(), queues: map[string]*scheduler.Queue{}, waiting: map[string]uint64{}}
	c.be.Watch(observer{c})
	return c
}

// Catalogs returns the node spec and image catalogs the client validates with.
func (c *Client) Catalogs() cluster.Catalogs { return c.cat }

// Kinds of stored documents.
const (
	kindCluster  = "cluster"
	kindGroup    = "group"
	kindTemplate = "template"
	kindJob      = "job"
	kindRun      = "run"
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

func load[T any](ctx context.Context, s Store, kind, id string) (*T, int64, error) {
	d, err := s.Get(ctx, kind, id)
	if err != nil {
		return nil, 0, err
	}
	v := new(T)
	if err := json.Unmarshal(d.Data, v); err != nil {
		return nil, 0, fmt.Errorf("%s %q: corrupt document: %w", kind, id, err)
	}
	return v, d.Version, nil
}

func loadAll[T any](ctx context.Context, s Store, kind string) ([]*T, []int64, error) {
	docs, err := s.List(ctx, kind)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*T, 0, len(docs))
	vs := make([]int64, 0, len(docs))
	for _, d := range docs {
		v := new(T)
		if err := json.Unmarshal(d.Data, v); err != nil {
			return nil, nil, fmt.Errorf("%s %q: corrupt document: %w", kind, d.ID, err)
		}
		out = append(out, v)
		vs = append(vs, d.Version)
	}
	return out, vs, nil
}

func save(ctx context.Context, s Store, kind, id string, version int64, v any) (int64, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	return s.Put(ctx, backend.Doc{Kind: kind, ID: id, Version: version, Data: data})
}

func (c *Client) event(ctx context.Context, key, source, action, msg string) {
	e := cluster.Event{Time: c.clock.Now(), Source: source, Action: action, Message: msg}
	if source == "user" {
		e.Actor = UserFrom(ctx)
	}
	_ = c.be.AppendEvent(context.WithoutCancel(ctx), key, e)
}

// Events returns the operation and event log of an object: kind is
// "cluster", "group", "job" or "run".
func (c *Client) Events(ctx context.Context, kind, id string) ([]cluster.Event, error) {
	return c.be.Events(ctx, kind+"/"+id)
}

// notFound turns a store's not-found into the kind's.
func notFoundAs(err error, kind, id string) error {
	if errs.IsNotFound(err) {
		return errs.NotFound(kind, id)
	}
	return err
}
