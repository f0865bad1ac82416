package dlchttp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// route is one entry of the route table: what the mux registers, what
// the OpenAPI document says, and what serves it. The table (routes) is
// the only list of routes there is.
type route struct {
	method, path string
	id           string // the OpenAPI operationId
	tag          string // the service
	summary      string
	query        []param
	headers      []param
	body         *body
	status       int  // of a success
	result       any  // a value of the success's body type; nil: none
	stream       bool // the success is a text/event-stream
	etag         bool // the success carries the object's ETag
	errors       []int
	public       bool // no Authenticator asked (the OpenAPI document)
	// guard, on a DELETE or an action of an object with an ETag, reads
	// the object's stored version for an If-Match (ifMatchAction).
	guard func(h *Handler, r *http.Request) func() (string, error)
	serve func(h *Handler, w http.ResponseWriter, r *http.Request) error
}

// hIfMatchAction is the If-Match of a guarded route.
var hIfMatchAction = param{name: "If-Match", typ: "string",
	desc: `the ETag the object must have ("*": it must exist); checked just before the action, which itself takes no version`}

// guarded adds to each guarded route its If-Match header and 412.
func guarded(rs []*route) []*route {
	for _, rt := range rs {
		if rt.guard != nil {
			rt.headers = append(rt.headers, hIfMatchAction)
			rt.errors = append(slices.Clone(rt.errors), http.StatusPreconditionFailed)
			slices.Sort(rt.errors)
		}
	}
	return rs
}

// ifMatchAction checks a request's If-Match, when it has one, against the
// stored version current reads: "*" needs the object to exist, tags must
// name its version (else 412). It is evaluated just before the action:
// the SDK's deletes and actions take no version, so a change between the
// check and the action is not caught (a PUT's If-Match is: precondition).
func ifMatchAction(r *http.Request, current func() (string, error)) error {
	versions, star, present := ifMatch(r)
	if !present {
		return nil
	}
	v, err := current()
	if err != nil {
		return err
	}
	if star || slices.Contains(versions, v) {
		return nil
	}
	return errPreconditionFailed
}

// clusterVersion and jobVersion are the guards of a cluster's and a job
// config's routes: the object of the path's id.
func clusterVersion(h *Handler, r *http.Request) func() (string, error) {
	return h.clusterVersion(r, pathID(r))
}

func jobVersion(h *Handler, r *http.Request) func() (string, error) {
	return func() (string, error) {
		rec, err := h.c.Jobs().Get(r.Context(), pathID(r))
		if err != nil {
			return "", err
		}
		return rec.Version, nil
	}
}

func (rt *route) queryParam(name string) *param {
	for i := range rt.query {
		if rt.query[i].name == name {
			return &rt.query[i]
		}
	}
	return nil
}

// param is a query parameter or a request header.
type param struct {
	name, typ, desc    string // typ: string, integer, boolean, date-time
	repeated, required bool
}

// body is a request's body.
type body struct {
	schema any  // a value of its type
	yaml   bool // also read as application/yaml
	desc   string
}

// page is one page of a list; Continue, when set, is the token of the
// next page (the continue query parameter), "" after the last.
type page[T any] struct {
	Items    []T    `json:"items"`
	Continue string `json:"continue,omitempty"`
}

// The bodies of actions.
type (
	nameBody struct {
		Name string `json:"name"`
	}
	autoscaleBody struct {
		Group    string `json:"group"`
		Replicas int    `json:"replicas"`
	}
	autoscaleResult struct {
		Asked        int    `json:"asked"`
		Granted      int    `json:"granted"`
		QuotaRefused bool   `json:"quotaRefused"`
		Reason       string `json:"reason,omitempty"`
	}
	editResult struct {
		Cluster      *cluster.Cluster `json:"cluster"`
		Applied      []string         `json:"applied"`
		NeedsRestart []string         `json:"needsRestart"`
	}
	groupBody struct {
		Name       string            `json:"name"`
		Scheduling *group.Scheduling `json:"scheduling,omitempty"`
	}
	membersBody struct {
		Clusters []string `json:"clusters"`
	}
	registerBody struct {
		Package  string          `json:"package"`
		Capacity quota.Resources `json:"capacity"`
	}
	logsResult struct {
		Lines []string `json:"lines"`
	}
	ticksResult struct {
		Times []time.Time `json:"times"`
	}
)

// Parameters and headers more than one route takes.
var (
	pLimit    = param{name: "limit", typ: "integer", desc: "the most items of the page (default Options.DefaultPageSize, at most Options.MaxPageSize)"}
	pContinue = param{name: "continue", typ: "string", desc: "the previous page's continue token: the page after it"}
	pTag      = param{name: "tag", typ: "string", repeated: true, desc: "key=value: only objects with this tag (repeat for more)"}
	pForce    = param{name: "force", typ: "boolean", desc: "stop the active runs on the cluster (and, for a delete, delete in any state)"}
	pInitial  = param{name: "initial", typ: "boolean", desc: "first send every selected object as ADDED"}
	hIfMatch  = param{name: "If-Match", typ: "string", required: true, desc: `the ETag of the object as read, or "*"; a stale one is 412`}
	hIdem     = param{name: "Idempotency-Key", typ: "string", desc: "a request id (at most 256 bytes): a retry with the same key returns what the first request made"}
)

// Error statuses by kind of route.
var (
	eRead   = []int{400, 401, 403, 404, 500, 503}
	eList   = []int{400, 401, 403, 422, 500, 503}
	eAction = []int{400, 401, 403, 404, 409, 500, 503}
	eBody   = []int{400, 401, 403, 404, 409, 413, 415, 422, 500, 503}
	eUpdate = []int{400, 401, 403, 404, 409, 412, 413, 415, 422, 428, 500, 503}
	ePlan   = []int{400, 401, 403, 404, 409, 412, 413, 415, 422, 500, 503} // an update's plan: If-Match optional
)

// ctxOf and pathID shorten the handlers.
func pathID(r *http.Request) string { return r.PathValue("id") }

func created(w http.ResponseWriter, location string, version string, v any) error {
	w.Header().Set("Location", location)
	setETag(w, version)
	writeJSON(w, http.StatusCreated, v)
	return nil
}

func ok(w http.ResponseWriter, v any) error {
	writeJSON(w, http.StatusOK, v)
	return nil
}

func noContent(w http.ResponseWriter, status int) error {
	w.WriteHeader(status)
	return nil
}

// idempotencyKey reads the request id of a create: the Idempotency-Key
// scoped to the authenticated user (a hash of both), so that two callers'
// keys never name one request, whatever the SDK does with a request id
// another user made (it refuses it: ErrConflict). "" without a key.
func idempotencyKey(r *http.Request) (string, error) {
	k := r.Header.Get("Idempotency-Key")
	if len(k) > maxIdempotencyKeyBytes {
		return "", httpError(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("Idempotency-Key has %d bytes; at most %d", len(k), maxIdempotencyKeyBytes))
	}
	if k == "" {
		return "", nil
	}
	h := sha256.Sum256([]byte(auth.FromContext(r.Context()).Name + "\x00" + k))
	return "http-" + hex.EncodeToString(h[:16]), nil
}

func clusterLocation(id string) string { return "/v1/clusters/" + url.PathEscape(id) }

// clusterStates reads the state filter.
func clusterStates(q query) ([]cluster.State, error) {
	var out []cluster.State
	for _, s := range q.Values["state"] {
		st := cluster.State(s)
		if !slices.Contains([]cluster.State{cluster.Creating, cluster.Created, cluster.Starting, cluster.Running,
			cluster.Hibernating, cluster.Hibernated, cluster.Deleting, cluster.Abnormal}, st) {
			return nil, badParam("state", fmt.Sprintf("%q is no cluster state", s))
		}
		out = append(out, st)
	}
	return out, nil
}

func runStates(q query) ([]job.RunState, error) {
	var out []job.RunState
	for _, s := range q.Values["state"] {
		st := job.RunState(s)
		if !slices.Contains([]job.RunState{job.Queued, job.Waiting, job.Provisioning, job.Running, job.Succeeded, job.Failed, job.Stopped}, st) {
			return nil, badParam("state", fmt.Sprintf("%q is no run state", s))
		}
		out = append(out, st)
	}
	return out, nil
}

// decodeSpec reads a cluster spec, as JSON or YAML.
func decodeSpec(r *http.Request) (*cluster.Spec, error) {
	spec := new(cluster.Spec)
	err := decode(r, spec, func(b []byte) error {
		s, err := cluster.UnmarshalYAML(b)
		if err == nil {
			spec = s
		}
		return err
	})
	return spec, err
}

// decodeConfig reads a job config, as JSON or YAML, and refuses a local
// package unless the options allow it.
func (h *Handler) decodeConfig(r *http.Request) (*job.Config, error) {
	cfg := new(job.Config)
	err := decode(r, cfg, func(b []byte) error {
		c, err := job.UnmarshalYAML(b)
		if err == nil {
			cfg = c
		}
		return err
	})
	if err == nil && cfg.Package.Local != "" && !h.o.AllowLocalPackages {
		err = errs.List{errs.Forbidden(errs.NewPath("package").Child("local"), "J5",
			"a package on the server's file system is not accepted over HTTP; put it in COS (package.cos)")}.ToError()
	}
	return cfg, err
}

// clusterResult answers a cluster with its ETag, or the error.
func clusterResult(w http.ResponseWriter) func(*cluster.Cluster, error) error {
	return func(cl *cluster.Cluster, err error) error {
		if err != nil {
			return err
		}
		setETag(w, cl.Version)
		return ok(w, cl)
	}
}

// recordResult answers a job config with its ETag, or the error.
func recordResult(w http.ResponseWriter) func(*job.Record, error) error {
	return func(rec *job.Record, err error) error {
		if err != nil {
			return err
		}
		setETag(w, rec.Version)
		return ok(w, rec)
	}
}

// eventsResult answers an event log as a list.
func eventsResult(w http.ResponseWriter) func([]event.Event, error) error {
	return func(es []event.Event, err error) error {
		if err != nil {
			return err
		}
		return ok(w, page[event.Event]{Items: nonNil(es)})
	}
}

// clusterVersion reads a cluster's stored version, for a precondition.
func (h *Handler) clusterVersion(r *http.Request, id string) func() (string, error) {
	return func() (string, error) {
		cl, err := h.c.Clusters().Get(r.Context(), id)
		if err != nil {
			return "", err
		}
		return cl.Version, nil
	}
}

// nonNil makes an empty list [] in JSON, not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func nameMismatch(body, path string) error {
	return errs.List{errs.Invalid(errs.NewPath("name"), "C6", body,
		fmt.Sprintf("the body names %q, the path %q; give the path's name or none", body, path))}.ToError()
}
