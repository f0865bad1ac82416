package dlc

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/internal/platform"
	"github.com/aidlc/dlc/job"
)

// ErrForbidden means the client's authorizer refused the caller the
// operation (see WithAuthorizer); the error is a *ForbiddenError.
var ErrForbidden = errs.ErrForbidden

// ForbiddenError names the action and the resource a user was refused.
type ForbiddenError = errs.ForbiddenError

// WithAuthorizer sets who may do what on the client: every user operation
// of its services (create, read, list, update, start, hibernate, delete,
// run, stop, logs, plan, register) asks a, with the user of the call's
// context (WithUser, or auth.NewContext with the user's groups), the
// action (auth.Actions) and the object with its resource group, cluster
// groups, creator and tags. A refusal fails the call with ErrForbidden and
// changes nothing; lists, watches and a group's members tell only of what
// the user may describe (a page is still a full page). Background work —
// reconcilers, schedules, retries, retention, idle hibernation — acts for
// the platform and is not asked. nil, the default, allows everything.
//
// auth.NewPolicyAuthorizer decides by CAM-style statements; on
// Kubernetes, kube.NewAccessReviewAuthorizer asks the API server's RBAC.
func WithAuthorizer(a auth.Authorizer) Option { return Option{platform.WithAuthorizer(a)} }

// gate asks a client's authorizer; the zero gate allows everything
// without reading anything.
type gate struct{ a auth.Authorizer }

// on reports whether calls are asked at all.
func (g gate) on() bool { return g.a != nil }

// allow asks whether ctx's user may do act on r: nil, the refusal
// (ErrForbidden), or why the authorizer could not decide (ErrUnavailable
// unless it says what else).
func (g gate) allow(ctx context.Context, act auth.Action, r auth.Resource) error {
	if g.a == nil {
		return nil
	}
	err := g.a.Authorize(ctx, auth.FromContext(ctx), act, r)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errs.ErrForbidden), errors.Is(err, errs.ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	default:
		return errs.Unavailable("authorize "+string(act)+" on "+r.Name(), err)
	}
}

// filter is what a list keeps: the objects the user may describe. The
// first failure to decide (not a refusal) stops it and fails the list.
// With decided set, the authorizer is asked once per distinct resource
// (a usage report's many records of one cluster as billed).
type filter struct {
	g       gate
	ctx     context.Context
	act     auth.Action
	err     error
	decided map[string]bool
}

func (f *filter) keep(r auth.Resource) bool {
	if f.err != nil {
		return false
	}
	var key string
	if f.decided != nil {
		k, err := json.Marshal(r) // maps in key order: one key per resource, and no two alike
		if err != nil {
			f.err = err
			return false
		}
		key = string(k)
		if ok, seen := f.decided[key]; seen {
			return ok
		}
	}
	err := f.g.allow(f.ctx, f.act, r)
	if err != nil && !errors.Is(err, errs.ErrForbidden) {
		f.err = err
		return false
	}
	if f.decided != nil {
		f.decided[key] = err == nil
	}
	return err == nil
}

// filteredPage is a page that list makes, given what to keep: the
// objects the user may do act to (every one, and nothing asked, when the
// gate is off). A failure to decide fails the page.
func filteredPage[T, P any](ctx context.Context, g gate, act auth.Action, res func(*T) auth.Resource, list func(keep func(*T) bool) (P, error)) (P, error) {
	var keep func(*T) bool
	f := &filter{g: g, ctx: ctx, act: act}
	if g.on() {
		keep = func(v *T) bool { return f.keep(res(v)) }
	}
	p, err := list(keep)
	if err == nil {
		err = f.err
	}
	if err != nil {
		var zero P
		return zero, err
	}
	return p, nil
}

// keepAllowed returns the objects of a list the user may describe.
func keepAllowed[T any](ctx context.Context, g gate, act auth.Action, objs []T, res func(T) auth.Resource) ([]T, error) {
	return keepFiltered(&filter{g: g, ctx: ctx, act: act}, objs, res)
}

// keepFiltered returns the objects of a list that f keeps.
func keepFiltered[T any](f *filter, objs []T, res func(T) auth.Resource) ([]T, error) {
	if !f.g.on() {
		return objs, nil
	}
	out := objs[:0]
	for _, o := range objs {
		if f.keep(res(o)) {
			out = append(out, o)
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	return out, nil
}

// objects is how a service asks of the objects of one kind: get reads
// one, res makes its resource.
type objects[T any] struct {
	g    gate
	kind auth.Kind
	get  func(context.Context, string) (T, error)
	res  func(T) auth.Resource
}

// may reads the object and asks act of it (describe's rules).
func (o objects[T]) may(ctx context.Context, act auth.Action, id string) (T, error) {
	return describe(ctx, o.g, act, o.kind, id, o.get, o.res)
}

// check is may for an operation that reads the object itself: nothing is
// read when the gate is off.
func (o objects[T]) check(ctx context.Context, act auth.Action, id string) error {
	if !o.g.on() {
		return nil
	}
	_, err := o.may(ctx, act, id)
	return err
}

// resourceOf is the resource of object id as stored, or its kind and id
// alone when it cannot be read (gone: a run deleted by retention).
func (o objects[T]) resourceOf(ctx context.Context, id string) auth.Resource {
	if v, err := o.get(ctx, id); err == nil {
		return o.res(v)
	}
	return auth.Resource{Kind: o.kind, ID: id}
}

// describe reads an object with get and asks act of it. A missing object
// is asked as its kind and id alone, so that a user who may not describe
// it does not learn whether it exists: ErrForbidden, else ErrNotFound.
func describe[T any](ctx context.Context, g gate, act auth.Action, kind auth.Kind, id string,
	get func(context.Context, string) (T, error), res func(T) auth.Resource) (T, error) {
	v, err := get(ctx, id)
	if !g.on() {
		return v, err
	}
	var zero T
	if errs.IsNotFound(err) {
		if aerr := g.allow(ctx, act, auth.Resource{Kind: kind, ID: id}); aerr != nil {
			return zero, aerr
		}
		return zero, err
	}
	if err != nil {
		return zero, err
	}
	if err := g.allow(ctx, act, res(v)); err != nil {
		return zero, err
	}
	return v, nil
}

// The resources of the SDK's objects, as the authorizer sees them: copies
// that share nothing with the object.

func clusterResource(cl *cluster.Cluster) auth.Resource {
	return auth.Resource{Kind: auth.KindCluster, ID: cl.ID, ResourceGroup: cl.Spec.ResourceGroup,
		ClusterGroups: slices.Clone(cl.Spec.Groups), Creator: cl.Creator, Tags: maps.Clone(cl.Spec.Tags)}
}

// newClusterResource is a cluster about to be created by ctx's user.
func newClusterResource(ctx context.Context, spec *cluster.Spec) auth.Resource {
	return auth.Resource{Kind: auth.KindCluster, ResourceGroup: spec.ResourceGroup,
		ClusterGroups: slices.Clone(spec.Groups), Creator: UserFrom(ctx), Tags: maps.Clone(spec.Tags)}
}

// configResource is what a job config, or a run of it, draws on.
func configResource(kind auth.Kind, id, creator string, cfg *job.Config) auth.Resource {
	if cfg == nil {
		return auth.Resource{Kind: kind, ID: id, Creator: creator} // refused by the operation (ErrInvalid)
	}
	r := auth.Resource{Kind: kind, ID: id, Cluster: cfg.Cluster, Creator: creator, Tags: maps.Clone(cfg.Tags)}
	if cfg.OnDemand != nil {
		r.ResourceGroup = cfg.OnDemand.ResourceGroup
	}
	if cfg.Group != "" {
		r.ClusterGroups = []string{cfg.Group}
	}
	return r
}

func jobResource(rec *job.Record) auth.Resource {
	return configResource(auth.KindJob, rec.ID, rec.Creator, &rec.Config)
}

func runResource(r *job.Run) auth.Resource {
	res := configResource(auth.KindRun, r.ID, r.Creator, &r.Config)
	if r.ClusterID != "" {
		res.Cluster = r.ClusterID
	}
	return res
}

func groupResource(g *group.Group) auth.Resource {
	return auth.Resource{Kind: auth.KindGroup, ID: g.ID, Creator: g.Creator}
}

func templateResource(name string) auth.Resource {
	return auth.Resource{Kind: auth.KindTemplate, ID: name}
}

func resourceGroupResource(id string) auth.Resource {
	return auth.Resource{Kind: auth.KindResourceGroup, ID: id, ResourceGroup: id}
}

// watchAllowed relays a watch's events that the user may describe: an
// object it may not is not told of, one it could and no longer may (its
// tags changed) is told as Deleted, and a Deleted is told of what was told
// before or what the user may describe by kind and id. A change the
// authorizer cannot decide on now is not told (a watch has no error to
// fail with). It reads in until in closes.
func watchAllowed[E any](ctx context.Context, g gate, act auth.Action, kind auth.Kind, in <-chan E,
	id func(E) string, res func(E) (auth.Resource, bool), gone func(string) E) <-chan E {
	if !g.on() {
		return in
	}
	out := make(chan E)
	go func() {
		defer close(out)
		told := map[string]bool{}
		for e := range in {
			k := id(e)
			r, live := res(e)
			if !live {
				// Told of before, or (a delete of what this watch never
				// told of: a list, then a watch) one the user may
				// describe as its kind and id alone, as a Get of a
				// missing object is asked.
				if !told[k] && g.allow(ctx, act, auth.Resource{Kind: kind, ID: k}) != nil {
					continue
				}
				delete(told, k)
			} else if err := g.allow(ctx, act, r); err == nil {
				told[k] = true
			} else if told[k] && errors.Is(err, errs.ErrForbidden) {
				delete(told, k) // out of the user's view now
				e = gone(k)
			} else {
				continue // not the user's, or the authorizer cannot say now
			}
			select {
			case out <- e:
			case <-ctx.Done():
			}
		}
	}()
	return out
}

// gate returns the gate of the client's authorizer.
func (c *Client) gate() gate { return gate{c.e.Authorizer()} }

// mayConfig asks act of a job config (r) and of what it runs on
// (mayTarget).
func (c *Client) mayConfig(ctx context.Context, act auth.Action, r auth.Resource, cfg *job.Config) error {
	if !c.gate().on() || cfg == nil {
		return nil
	}
	if err := c.gate().allow(ctx, act, r); err != nil {
		return err
	}
	return c.mayTarget(ctx, cfg)
}

// mayTarget asks of what a job config runs on: RunJob of the named
// cluster or the cluster group, UseResourceGroup of the on-demand
// resource group, so that a config may not send code to another team's
// cluster however it is tagged. A target that does not exist is left to
// the operation to report.
func (c *Client) mayTarget(ctx context.Context, cfg *job.Config) error {
	g := c.gate()
	var err error
	switch {
	case cfg.Cluster != "":
		_, err = c.clusters().may(ctx, auth.RunJob, cfg.Cluster)
	case cfg.Group != "":
		_, err = c.groups().may(ctx, auth.RunJob, cfg.Group)
	case cfg.OnDemand != nil:
		err = g.allow(ctx, auth.UseResourceGroup, resourceGroupResource(cfg.OnDemand.ResourceGroup))
	}
	if errs.IsNotFound(err) {
		return nil
	}
	return err
}

// mayRun asks RunJob of a job config as stored, and of what it runs on.
func (c *Client) mayRun(ctx context.Context, jobID string) error {
	if !c.gate().on() {
		return nil
	}
	rec, err := c.jobs().may(ctx, auth.RunJob, jobID)
	if err != nil {
		return err
	}
	return c.mayTarget(ctx, &rec.Config)
}

// The objects of each kind, as the services ask of them.
func (c *Client) clusters() objects[*cluster.Cluster] {
	return objects[*cluster.Cluster]{c.gate(), auth.KindCluster, c.e.Clusters().Get, clusterResource}
}

func (c *Client) groups() objects[*group.Group] {
	return objects[*group.Group]{c.gate(), auth.KindGroup, c.e.Groups().Get, groupResource}
}

func (c *Client) jobs() objects[*job.Record] {
	return objects[*job.Record]{c.gate(), auth.KindJob, c.e.Jobs().Get, jobResource}
}

func (c *Client) runs() objects[*job.Run] {
	return objects[*job.Run]{c.gate(), auth.KindRun, c.e.Runs().Get, runResource}
}

// replayed returns what a call with a request id returned, unless it is
// another user's object (a replay of their request id, with or without an
// authorizer): a request id names one user's request, so another user's
// call with it is a conflict, not theirs to get back (nor to describe: the
// error names the request id, not the object). Nothing was made by such a
// call (the object existed), so nothing is undone.
func replayed[T any](ctx context.Context, kind auth.Kind, requestID string, v *T, err error, creator func(*T) string) (*T, error) {
	if err != nil || v == nil || requestID == "" || creator(v) == UserFrom(ctx) {
		return v, err
	}
	return nil, errs.Conflict(string(kind), "request "+requestID, "another user's request used this request id; use another")
}

func recordCreator(r *job.Record) string        { return r.Creator }
func clusterCreator(cl *cluster.Cluster) string { return cl.Creator }
func runCreator(r *job.Run) string              { return r.Creator }
