// Package auth decides who may do what on a dlc platform: the user a call
// acts as (User, carried in its context), the action it asks (CAM-style
// names such as dlc:StartCluster), and the resource it acts on, with the
// attributes a decision may look at (resource group, cluster groups,
// cluster, creator, tags).
//
// A dlc.Client asks its Authorizer (dlc.WithAuthorizer) before every user
// operation, and lists and watches tell only of what the user may
// describe. Background work (reconcilers, schedules, retries, retention)
// acts for the platform and is not asked. With no authorizer every user
// may do everything, as before.
//
// Two authorizers come with the SDK: a Policy in the shape of Tencent
// Cloud CAM statements (this package), and on Kubernetes one that asks the
// API server with a SubjectAccessReview (backend/kube), so that a platform
// reuses its RBAC.
//
// # Rules of a policy
//
// ParsePolicy and Policy.Validate report every problem at once, each an
// *errs.FieldError with its field path and one of these rule IDs:
//
//	P1  version is "2.0"
//	P2  a policy has 1 to MaxStatements statements
//	P3  effect is allow or deny
//	P4  principal names users and groups (each non-empty, at most MaxValueLen
//	    bytes, at most MaxEntries of each); none: every user
//	P5  action is 1 to MaxEntries patterns "dlc:<Action>", "*" wildcards
//	    allowed, each matching at least one action of Actions()
//	P6  resource is 1 to MaxEntries patterns: "*", "<kind>/<id>" or
//	    "resourcegroup/<rg>/<kind>/<id>" (a kind of Kinds() or "*", "*"
//	    wildcards in ids and resource groups, an optional "qcs::dlc:::"
//	    prefix)
//	P7  condition operators are string_equal, string_not_equal, string_like
//	    or string_not_like; keys are those of ConditionKeys; values 1 to
//	    MaxEntries, "${user}" only in string_equal and string_not_equal
package auth

import (
	"context"
	"slices"
	"strings"

	"github.com/aidlc/dlc/errs"
)

// Anonymous is the user of a context that names none.
const Anonymous = "anonymous"

// User is who a call acts as: a name, and the groups it belongs to (as an
// identity provider or the Kubernetes authenticator says).
type User struct {
	Name   string
	Groups []string
}

type userKey struct{}

// NewContext returns a context that acts as u: the user whose calls the
// authorizer decides, the creator of what it creates and the actor in
// operation logs.
func NewContext(ctx context.Context, u User) context.Context {
	u.Groups = slices.Clone(u.Groups)
	return context.WithValue(ctx, userKey{}, u)
}

// FromContext returns the user of ctx; a context that names none acts as
// Anonymous, in no group.
func FromContext(ctx context.Context) User {
	if u, ok := ctx.Value(userKey{}).(User); ok && u.Name != "" {
		return u
	}
	return User{Name: Anonymous}
}

// Kind is a kind of object an action acts on.
type Kind string

// The kinds.
const (
	KindCluster       Kind = "cluster"       // a compute cluster
	KindGroup         Kind = "group"         // a cluster group
	KindTemplate      Kind = "template"      // a cluster template
	KindJob           Kind = "job"           // a job config
	KindRun           Kind = "run"           // a run of a job config
	KindResourceGroup Kind = "resourcegroup" // a resource group
)

// Kinds returns every kind.
func Kinds() []Kind {
	return []Kind{KindCluster, KindGroup, KindTemplate, KindJob, KindRun, KindResourceGroup}
}

// Action is an operation, named as a Tencent Cloud CAM action:
// "dlc:StartCluster".
type Action string

// The actions. Describe* covers every read of an object (get, wait,
// watch, list, events, details, queue position); a plan is asked as the
// action it plans (PlanStart as StartCluster).
const (
	CreateCluster    Action = "dlc:CreateCluster"    // Clusters().Create, PlanCreate, the copy of Clone (and UseResourceGroup, UpdateGroup of each group it joins)
	DescribeCluster  Action = "dlc:DescribeCluster"  // Get, Wait, Watch, List, Events, Details, the source of Clone, a group's Members
	UpdateCluster    Action = "dlc:UpdateCluster"    // Update, Edit, PlanUpdate, Autoscale, joining or leaving a group (and UseResourceGroup, UpdateGroup when they change)
	StartCluster     Action = "dlc:StartCluster"     // Start, PlanStart
	HibernateCluster Action = "dlc:HibernateCluster" // Hibernate
	DeleteCluster    Action = "dlc:DeleteCluster"    // Delete

	CreateGroup   Action = "dlc:CreateGroup"   // Groups().Create
	DescribeGroup Action = "dlc:DescribeGroup" // Get, List, Members
	UpdateGroup   Action = "dlc:UpdateGroup"   // SetPolicy, Rename, AddMembers, RemoveMembers, the target of Delete
	DeleteGroup   Action = "dlc:DeleteGroup"   // Delete

	SaveTemplate     Action = "dlc:SaveTemplate"     // Templates().Save
	DescribeTemplate Action = "dlc:DescribeTemplate" // Get, List
	DeleteTemplate   Action = "dlc:DeleteTemplate"   // Delete

	CreateJob   Action = "dlc:CreateJob"   // Jobs().Create, Save, the copy of Clone, Client.SaveJob
	DescribeJob Action = "dlc:DescribeJob" // Get, List, ListPage, Events, NextTicks, the source of Clone
	UpdateJob   Action = "dlc:UpdateJob"   // Update, Edit, SuspendSchedule, ResumeSchedule
	DeleteJob   Action = "dlc:DeleteJob"   // Delete
	RunJob      Action = "dlc:RunJob"      // Runs().Create, Jobs().PlanRun, Client.RunJob (on the job config)

	DescribeRun Action = "dlc:DescribeRun" // Runs().Get, Wait, Watch, List, ListPage, Events, Pending
	StopRun     Action = "dlc:StopRun"     // Stop
	ReadRunLogs Action = "dlc:ReadRunLogs" // Logs, Follow

	RegisterResourceGroup Action = "dlc:RegisterResourceGroup" // ResourceGroups().Register
	DescribeResourceGroup Action = "dlc:DescribeResourceGroup" // Get, List, Pending
	DeleteResourceGroup   Action = "dlc:DeleteResourceGroup"   // ResourceGroups().Delete
	// UseResourceGroup is drawing on a resource group's quota and Secrets:
	// asked of the resource group when a cluster is created in it (Create,
	// PlanCreate, Clone) or moved to it (Update), and when an on-demand
	// job config that queues in it is saved, edited or run.
	UseResourceGroup Action = "dlc:UseResourceGroup"
)

var actions = []Action{
	CreateCluster, DescribeCluster, UpdateCluster, StartCluster, HibernateCluster, DeleteCluster,
	CreateGroup, DescribeGroup, UpdateGroup, DeleteGroup,
	SaveTemplate, DescribeTemplate, DeleteTemplate,
	CreateJob, DescribeJob, UpdateJob, DeleteJob, RunJob,
	DescribeRun, StopRun, ReadRunLogs,
	RegisterResourceGroup, DescribeResourceGroup, DeleteResourceGroup, UseResourceGroup,
}

// Actions returns every action.
func Actions() []Action { return slices.Clone(actions) }

// Resource is what an action acts on, with the attributes a decision may
// look at. An object that does not exist (or is being created and has no
// id yet) is its kind with what is known: a Get of a missing object is
// asked with the kind and the id alone, so that a user who may not
// describe it learns nothing of whether it exists.
type Resource struct {
	Kind Kind
	// ID is the object's id (a template's and a resource group's name);
	// "" for one being created.
	ID string
	// ResourceGroup is the resource group it draws on: a cluster's, an
	// on-demand job config's or run's, a resource group's own id; "" for
	// what draws on none itself (a job config that runs on a cluster or a
	// cluster group, a cluster group, a template).
	ResourceGroup string
	// ClusterGroups are a cluster's groups, or the group a job config or
	// run runs on.
	ClusterGroups []string
	// Cluster is the cluster a job config runs on, or a run ran on.
	Cluster string
	// Creator is the user who created it (for one being created, the
	// caller).
	Creator string
	// Tags are its tags (C3, J4).
	Tags map[string]string
}

// Name is the resource's name as policies match it: "<kind>/<id>", with
// "*" for an object being created.
func (r Resource) Name() string {
	id := r.ID
	if id == "" {
		id = "*"
	}
	return string(r.Kind) + "/" + id
}

// Authorizer decides whether a user may do an action on a resource. It
// returns nil to allow, an error that is errors.Is errs.ErrForbidden to
// refuse (Forbidden makes one), or another error when it cannot decide
// now (the call then fails with that error and changes nothing). It is
// called concurrently, on the caller's goroutine, with no lock held.
type Authorizer interface {
	Authorize(ctx context.Context, u User, a Action, r Resource) error
}

// AuthorizerFunc is a function that is an Authorizer.
type AuthorizerFunc func(ctx context.Context, u User, a Action, r Resource) error

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, u User, a Action, r Resource) error {
	return f(ctx, u, a, r)
}

// AllowAll is the authorizer that allows everything: a client's when it is
// given none.
func AllowAll() Authorizer {
	return AuthorizerFunc(func(context.Context, User, Action, Resource) error { return nil })
}

// All returns an authorizer that allows what every one of as allows,
// asking them in order and stopping at the first that refuses or cannot
// decide: a Kubernetes RBAC check and a tag policy together, say.
func All(as ...Authorizer) Authorizer {
	as = slices.Clone(as)
	return AuthorizerFunc(func(ctx context.Context, u User, a Action, r Resource) error {
		for _, z := range as {
			if err := z.Authorize(ctx, u, a, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// Forbidden returns the refusal of a to u on r: an *errs.ForbiddenError
// naming the action and the resource by its name alone.
func Forbidden(u User, a Action, r Resource, reason string) error {
	return &errs.ForbiddenError{User: u.Name, Action: string(a), Resource: r.Name(), Reason: reason}
}

// validKind reports whether k is a kind.
func validKind(k string) bool { return slices.Contains(Kinds(), Kind(k)) }

// trimQCS cuts the CAM resource prefix a pattern may carry.
func trimQCS(s string) string { return strings.TrimPrefix(s, "qcs::dlc:::") }
