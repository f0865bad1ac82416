package kube

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/errs"
)

// AccessReviewOptions tunes an AccessReviewAuthorizer. The zero value
// takes the kube-apiserver's own defaults for its webhook authorizer's
// cache (--authorization-webhook-cache-authorized-ttl 5m,
// --authorization-webhook-cache-unauthorized-ttl 30s).
type AccessReviewOptions struct {
	AllowedTTL time.Duration // how long an allow is remembered; 0: 5m, <0: not at all
	DeniedTTL  time.Duration // how long a refusal is remembered; 0: 30s, <0: not at all
	MaxEntries int           // decisions remembered at most; 0: 10,000 (the cache starts over when full)
	// Now is the clock the TTLs are measured on; nil: time.Now.
	Now func() time.Time
}

// AccessReviewAuthorizer decides dlc's user operations by asking the
// Kubernetes API server (a SubjectAccessReview), so that a platform
// decides who may do what with its RBAC: an action is a verb on one of
// the SDK's kinds (group dlc.aidlc.io) in the backend's namespace, with
// the object's id as the resource name (see AccessReviewAttributes). RBAC
// sees no tags, creators or resource groups: a platform that decides by
// them uses auth.PolicyAuthorizer, or both (with auth.All).
//
// The identity that asks needs "create" on
// subjectaccessreviews.authorization.k8s.io (config/rbac/access-review).
// Decisions are remembered for a while, as the API server remembers a
// webhook's; an object asked about by name is first asked about as its
// kind, so that a user RBAC allows every object of a kind costs one review
// per verb, not one per object of a list.
type AccessReviewAuthorizer struct {
	c         client.Client
	namespace string
	o         AccessReviewOptions

	mu   sync.Mutex
	seen map[string]review // by user, groups, attributes
}

type review struct {
	allowed bool
	reason  string
	until   time.Time
}

// NewAccessReviewAuthorizer returns an authorizer that asks the API server
// c talks to about the SDK's objects in namespace.
func NewAccessReviewAuthorizer(c client.Client, namespace string, o AccessReviewOptions) (*AccessReviewAuthorizer, error) {
	var l errs.List
	if c == nil {
		l = append(l, errs.Required(errs.NewPath("client"), "", "a client of the API server"))
	}
	if namespace == "" {
		l = append(l, errs.Required(errs.NewPath("namespace"), "", "the backend's namespace"))
	}
	if o.MaxEntries < 0 {
		l = append(l, errs.Invalid(errs.NewPath("MaxEntries"), "", o.MaxEntries, "must not be negative"))
	}
	if err := l.ToError(); err != nil {
		return nil, err
	}
	if o.AllowedTTL == 0 {
		o.AllowedTTL = 5 * time.Minute
	}
	if o.DeniedTTL == 0 {
		o.DeniedTTL = 30 * time.Second
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = 10000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &AccessReviewAuthorizer{c: c, namespace: namespace, o: o, seen: map[string]review{}}, nil
}

// AccessReviewAttributes returns what an action on a resource is asked
// as: a verb (create, get, update, delete, and the SDK's own start,
// hibernate, run and stop), the SDK kind's resource (computeclusters,
// clustergroups, clustertemplates, jobconfigs, runs, resourcegroups), a
// subresource (log, for a run's logs) and the object's id as the name.
func AccessReviewAttributes(a auth.Action, r auth.Resource, namespace string) authorizationv1.ResourceAttributes {
	ra := authorizationv1.ResourceAttributes{Namespace: namespace, Group: "dlc.aidlc.io", Name: r.ID}
	ra.Resource = map[auth.Kind]string{
		auth.KindCluster: "computeclusters", auth.KindGroup: "clustergroups", auth.KindTemplate: "clustertemplates",
		auth.KindJob: "jobconfigs", auth.KindRun: "runs", auth.KindResourceGroup: "resourcegroups",
	}[r.Kind]
	name := strings.TrimPrefix(string(a), "dlc:")
	switch {
	case a == auth.ReadRunLogs:
		ra.Verb, ra.Subresource = "get", "log"
	case a == auth.SaveTemplate, a == auth.RegisterResourceGroup:
		ra.Verb = "update" // both create or replace
	case a == auth.RunJob:
		ra.Verb = "run"
	case a == auth.StopRun:
		ra.Verb = "stop"
	case strings.HasPrefix(name, "Describe"):
		ra.Verb = "get"
	default: // Create, Update, Delete, Start, Hibernate
		for _, v := range []string{"Create", "Update", "Delete", "Start", "Hibernate"} {
			if strings.HasPrefix(name, v) {
				ra.Verb = strings.ToLower(v)
			}
		}
	}
	return ra
}

// Authorize asks the API server whether u may do a on r.
func (z *AccessReviewAuthorizer) Authorize(ctx context.Context, u auth.User, a auth.Action, r auth.Resource) error {
	ra := AccessReviewAttributes(a, r, z.namespace)
	if ra.Name != "" {
		kind := ra
		kind.Name = ""
		rv, err := z.review(ctx, u, kind)
		if err != nil {
			return err
		}
		if rv.allowed {
			return nil
		}
	}
	rv, err := z.review(ctx, u, ra)
	if err != nil {
		return err
	}
	if !rv.allowed {
		return auth.Forbidden(u, a, r, rv.reason)
	}
	return nil
}

// review asks one question, or remembers its answer.
func (z *AccessReviewAuthorizer) review(ctx context.Context, u auth.User, ra authorizationv1.ResourceAttributes) (review, error) {
	groups := slices.Clone(u.Groups)
	slices.Sort(groups)
	key := strings.Join([]string{u.Name, strings.Join(groups, "\x00"), ra.Verb, ra.Resource, ra.Subresource, ra.Name}, "\x01")
	now := z.o.Now()
	z.mu.Lock()
	rv, ok := z.seen[key]
	z.mu.Unlock()
	if ok && now.Before(rv.until) {
		return rv, nil
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, Groups: groups, ResourceAttributes: &ra}}
	if err := z.c.Create(ctx, sar); err != nil {
		return review{}, errs.Unavailable("subject access review "+ra.Verb+" "+ra.Resource+"/"+ra.Name, err)
	}
	rv = review{allowed: sar.Status.Allowed && !sar.Status.Denied, reason: clip([]byte(sar.Status.Reason))}
	if sar.Status.EvaluationError != "" && !rv.allowed {
		// RBAC could not read every binding: not a refusal to remember.
		return review{}, errs.Unavailable("subject access review "+ra.Verb+" "+ra.Resource+"/"+ra.Name, errors.New(clip([]byte(sar.Status.EvaluationError))))
	}
	ttl := z.o.DeniedTTL
	if rv.allowed {
		ttl = z.o.AllowedTTL
	}
	if ttl > 0 {
		rv.until = now.Add(ttl)
		z.mu.Lock()
		if len(z.seen) >= z.o.MaxEntries {
			clear(z.seen)
		}
		z.seen[key] = rv
		z.mu.Unlock()
	}
	return rv, nil
}
