package dlchttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
)

// TestErrorMapping: each typed error of the SDK, wrapped as the SDK wraps
// them, answers its status, code and detail; an unknown error says
// nothing of its cause.
func TestErrorMapping(t *testing.T) {
	fields := errs.List{
		errs.Invalid(errs.NewPath("workerGroups").Index(2).Child("instances", "max"), "C8", 9000, "at most 1000"),
		errs.Required(errs.NewPath("name"), "C1", "a cluster needs a name"),
	}.ToError()
	cases := []struct {
		name   string
		err    error
		status int
		code   string
		check  func(t *testing.T, e *Error)
	}{
		{"invalid", fmt.Errorf("create: %w", fields), 422, CodeInvalid, func(t *testing.T, e *Error) {
			want := []FieldError{
				{Path: "workerGroups[2].instances.max", Rule: "C8", Type: "Invalid value", Detail: "at most 1000"},
				{Path: "name", Rule: "C1", Type: "Required value", Detail: "a cluster needs a name"},
			}
			if len(e.Fields) != 2 {
				t.Fatalf("%+v", e.Fields)
			}
			for i, f := range e.Fields {
				w := want[i]
				if f.Path != w.Path || f.Rule != w.Rule || f.Type != w.Type || f.Detail != w.Detail {
					t.Errorf("field %d: %+v, want %+v", i, f, w)
				}
			}
			if b, _ := json.Marshal(e.Fields[0].BadValue); string(b) != "9000" {
				t.Errorf("bad value %s", e.Fields[0].BadValue)
			}
		}},
		{"refused by Ray", &errs.RefusedError{Op: "submit", Status: 400, Reason: "bad runtime_env"}, 422, CodeInvalid, func(t *testing.T, e *Error) {
			if !strings.Contains(e.Message, "bad runtime_env") {
				t.Errorf("Ray's refusal of the caller's job is not said: %q", e.Message)
			}
		}},
		// A backend's own refusal (the API server's text about its
		// objects) names no field of the input: it is logged, not sent.
		{"invalid without fields", fmt.Errorf("kube store update configmaps dlc-system/x: %w: ConfigMap is invalid (apiserver 10.96.0.1)", errs.ErrInvalid), 422, CodeInvalid, func(t *testing.T, e *Error) {
			if strings.Contains(e.Message, "10.96.0.1") || strings.Contains(e.Message, "configmaps") {
				t.Errorf("the backend's text was sent: %q", e.Message)
			}
		}},
		{"not found", fmt.Errorf("get: %w", errs.NotFound("cluster", "cls-1")), 404, CodeNotFound, func(t *testing.T, e *Error) {
			if e.NotFound == nil || *e.NotFound != (NotFoundDetail{Kind: "cluster", ID: "cls-1"}) {
				t.Errorf("%+v", e.NotFound)
			}
		}},
		{"conflict", errs.Conflict("cluster", "cls-1", "name already used"), 409, CodeConflict, nil},
		{"state", &errs.StateError{Kind: "cluster", ID: "cls-1", Op: "start", State: "deleting", Allowed: []string{"created", "hibernated"}}, 409, CodeState,
			func(t *testing.T, e *Error) {
				if e.State == nil || e.State.Op != "start" || e.State.State != "deleting" || !slices.Equal(e.State.Allowed, []string{"created", "hibernated"}) {
					t.Errorf("%+v", e.State)
				}
			}},
		{"quota", &errs.QuotaError{ResourceGroup: "rg-1", Requested: "cpu=8", Available: "cpu=4"}, 409, CodeQuota, func(t *testing.T, e *Error) {
			if e.Quota == nil || e.Quota.ResourceGroup != "rg-1" || e.Quota.Available != "cpu=4" {
				t.Errorf("%+v", e.Quota)
			}
		}},
		{"forbidden", &errs.ForbiddenError{User: "mallory", Action: "dlc:DeleteCluster", Resource: "cluster/cls-1"}, 403, CodeForbidden, func(t *testing.T, e *Error) {
			if e.Forbidden == nil || e.Forbidden.User != "mallory" || e.Forbidden.Action != "dlc:DeleteCluster" {
				t.Errorf("%+v", e.Forbidden)
			}
		}},
		{"forbidden wins", errors.Join(errs.NotFound("cluster", "cls-1"), &errs.ForbiddenError{User: "u"}), 403, CodeForbidden, nil},
		{"unavailable", errs.Unavailable("store update cluster/cls-1", errors.New("dial tcp 10.1.2.3:443: refused")), 503, CodeUnavailable, nil},
		{"deadline", context.DeadlineExceeded, 503, CodeUnavailable, nil},
		{"other", errors.New("pq: password authentication failed for user admin"), 500, CodeInternal, nil},
		{"own", errPreconditionFailed, 412, CodePreconditionFailed, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := toError(c.err)
			if e.Status != c.status || e.Code != c.code {
				t.Fatalf("%d %s, want %d %s", e.Status, e.Code, c.status, c.code)
			}
			if c.status >= 500 && (strings.Contains(e.Message, "10.1.2.3") || strings.Contains(e.Message, "password")) {
				t.Errorf("the message leaks the cause: %q", e.Message)
			}
			if c.check != nil {
				c.check(t, e)
			}
		})
	}
}

// TestErrorAnswers: each error status over HTTP, with its body, provoked
// through the API on the memory backend.
func TestErrorAnswers(t *testing.T) {
	var failStore atomic.Bool
	mallory := auth.AuthorizerFunc(func(_ context.Context, u auth.User, a auth.Action, r auth.Resource) error {
		if u.Name == "mallory" && a != auth.DescribeCluster {
			return auth.Forbidden(u, a, r, "mallory only reads")
		}
		return nil
	})
	m := dlctest.NewMemory(dlctest.MemoryOptions{T: t, Options: []dlc.Option{dlc.WithAuthorizer(mallory)}})
	e := newEnvOn(t, m, m.Client, Options{RetryAfter: 7e9})
	faulty := dlctest.NewFaulty(m.Backend, func(_ int, c dlctest.Call) dlctest.Fault {
		if failStore.Load() && c.Kind == "group" {
			return dlctest.Before
		}
		return dlctest.NoFault
	})
	down := newEnvOn(t, m, m.NewClient(dlc.WithBackend(faulty)), Options{})
	e.register(12000) // room for one cluster of 8 cores: a head of 4 and a worker of 4
	var g struct{ ID string }
	e.must(req{method: "POST", path: "/v1/groups", body: groupBody{Name: "g"}}, 201, &g)
	var cl struct{ ID string }
	e.must(req{method: "POST", path: "/v1/clusters", body: clusterSpec(t, "c1", g.ID)}, 201, &cl)
	e.settle()
	var bigCl struct{ ID string }
	e.must(req{method: "POST", path: "/v1/clusters", body: clusterSpec(t, "c2", g.ID)}, 201, &bigCl)
	e.settle()
	e.must(req{method: "POST", path: "/v1/clusters/" + cl.ID + "/start"}, 200, nil)
	e.settle()

	cases := []struct {
		name   string
		r      req
		status int
		code   string
		check  func(t *testing.T, a resp, e Error)
	}{
		{"invalid spec", req{method: "POST", path: "/v1/clusters",
			body: `{"name":"bad name!","groups":[],"priority":12,"resourcePackage":"pkg-1","resourceGroup":"rg-1","image":"ray-9.9","headGroup":{"name":"head","nodeSpec":"cu.4c16g"},"workerGroups":[{"name":"cpu","nodeSpec":"cu.4c8g","instances":{"min":4,"max":2}}]}`},
			422, CodeInvalid, func(t *testing.T, _ resp, e Error) {
				rules := map[string]string{}
				for _, f := range e.Fields {
					rules[f.Path] = f.Rule
					if f.Type == "" || f.Detail == "" {
						t.Errorf("field %+v: no type or detail", f)
					}
				}
				for path, rule := range map[string]string{"name": "C1", "priority": "C3", "groups": "C2", "image": "C5", "workerGroups[0].instances.max": "C8"} {
					if got, ok := rules[path]; !ok || got != rule {
						t.Errorf("no field %s with rule %s in %v", path, rule, rules)
					}
				}
				for _, f := range e.Fields {
					if b, _ := json.Marshal(f.BadValue); f.Path == "name" && string(b) != `"bad name!"` {
						t.Errorf("bad value of name: %s", f.BadValue)
					}
				}
			}},
		{"invalid YAML", req{method: "POST", path: "/v1/clusters", header: map[string]string{"Content-Type": "application/yaml"},
			body: "name: c2\nbogus: 1\n"}, 422, CodeInvalid, func(t *testing.T, _ resp, e Error) {
			if len(e.Fields) != 1 || e.Fields[0].Path != "bogus" || e.Fields[0].Type != string(errs.TypeUnknown) {
				t.Errorf("%+v", e.Fields)
			}
		}},
		{"not JSON", req{method: "POST", path: "/v1/clusters", body: "name: c2"}, 400, CodeBadRequest, nil},
		{"unknown JSON field", req{method: "POST", path: "/v1/groups", body: `{"name":"x","bogus":1}`}, 400, CodeBadRequest, func(t *testing.T, _ resp, e Error) {
			if !strings.Contains(e.Message, `unknown field "bogus"`) {
				t.Errorf("%q", e.Message)
			}
		}},
		{"two JSON values", req{method: "POST", path: "/v1/groups", body: `{"name":"x"}{}`}, 400, CodeBadRequest, nil},
		{"no body", req{method: "POST", path: "/v1/groups"}, 400, CodeBadRequest, nil},
		{"media type", req{method: "POST", path: "/v1/groups", body: "name: x", header: map[string]string{"Content-Type": "application/yaml"}}, 415, CodeUnsupportedMedia, nil},
		{"unknown query parameter", req{method: "GET", path: "/v1/clusters?colour=red"}, 400, CodeBadRequest, nil},
		{"bad limit", req{method: "GET", path: "/v1/clusters?limit=0"}, 400, CodeBadRequest, nil},
		{"limit over the maximum", req{method: "GET", path: "/v1/clusters?limit=1001"}, 400, CodeBadRequest, nil},
		{"missing target", req{method: "DELETE", path: "/v1/groups/" + g.ID}, 400, CodeBadRequest, nil},
		{"local package", req{method: "POST", path: "/v1/jobs", body: `{"name":"j","cluster":"` + cl.ID + `","package":{"local":"/etc/passwd"},"entrypoint":"python a.py"}`},
			422, CodeInvalid, func(t *testing.T, _ resp, e Error) {
				if len(e.Fields) != 1 || e.Fields[0].Path != "package.local" || e.Fields[0].Rule != "J5" {
					t.Errorf("%+v", e.Fields)
				}
			}},
		{"not found", req{method: "GET", path: "/v1/clusters/cls-nope"}, 404, CodeNotFound, func(t *testing.T, _ resp, e Error) {
			if e.NotFound == nil || e.NotFound.ID != "cls-nope" {
				t.Errorf("%+v", e.NotFound)
			}
		}},
		{"no route", req{method: "GET", path: "/v2/clusters"}, 404, CodeNotFound, nil},
		{"method", req{method: "PATCH", path: "/v1/clusters/" + cl.ID}, 405, CodeMethodNotAllowed, func(t *testing.T, a resp, _ Error) {
			if !strings.Contains(a.header.Get("Allow"), "PUT") {
				t.Errorf("Allow %q", a.header.Get("Allow"))
			}
		}},
		{"name taken", req{method: "POST", path: "/v1/clusters", body: clusterSpec(t, "c1", g.ID)}, 409, CodeConflict, nil},
		{"state", req{method: "POST", path: "/v1/clusters/" + bigCl.ID + "/hibernate"}, 409, CodeState, func(t *testing.T, _ resp, e Error) {
			if e.State == nil || e.State.ID != bigCl.ID || e.State.Op != "hibernate" || e.State.State != "created" || !slices.Contains(e.State.Allowed, "running") {
				t.Errorf("%+v", e.State)
			}
		}},
		{"quota", req{method: "POST", path: "/v1/clusters/" + bigCl.ID + "/start"}, 409, CodeQuota, func(t *testing.T, _ resp, e Error) {
			if e.Quota == nil || e.Quota.ResourceGroup != "rg-1" {
				t.Errorf("%+v", e)
			}
		}},
		{"forbidden", req{method: "DELETE", path: "/v1/clusters/" + cl.ID, user: "mallory"}, 403, CodeForbidden, func(t *testing.T, _ resp, e Error) {
			want := ForbiddenDetail{User: "mallory", Action: string(auth.DeleteCluster), Resource: "cluster/" + cl.ID, Reason: "mallory only reads"}
			if e.Forbidden == nil || *e.Forbidden != want {
				t.Errorf("%+v, want %+v", e.Forbidden, want)
			}
		}},
		{"unauthenticated", req{method: "GET", path: "/v1/clusters", user: "-"}, 401, CodeUnauthenticated, func(t *testing.T, a resp, _ Error) {
			if a.header.Get("WWW-Authenticate") == "" {
				t.Error("no WWW-Authenticate")
			}
		}},
		{"if-match required", req{method: "PUT", path: "/v1/clusters/" + cl.ID, body: clusterSpec(t, "c1", g.ID)}, 428, CodePreconditionRequired, nil},
		{"a query pair that does not parse", req{method: "GET", path: "/v1/clusters?limit=5;x=1"}, 400, CodeBadRequest, nil},
		{"a tag key given twice", req{method: "GET", path: "/v1/clusters?tag=a=1&tag=a=2"}, 400, CodeBadRequest, nil},
		{"idempotency key too long", req{method: "POST", path: "/v1/jobs/j/runs", header: map[string]string{"Idempotency-Key": strings.Repeat("k", 257)}}, 400, CodeBadRequest, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := e.do(c.r)
			if a.status != c.status {
				t.Fatalf("%d %s, want %d", a.status, a.body, c.status)
			}
			if ct := a.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			got := a.err(t)
			if got.Status != c.status || got.Code != c.code || got.Message == "" {
				t.Fatalf("body %s, want status %d code %s", a.body, c.status, c.code)
			}
			if c.check != nil {
				c.check(t, a, got)
			}
		})
	}

	t.Run("unavailable", func(t *testing.T) {
		failStore.Store(true)
		defer failStore.Store(false)
		a := down.do(req{method: "POST", path: "/v1/groups", body: groupBody{Name: "g-down"}})
		got := a.err(t)
		if a.status != http.StatusServiceUnavailable || got.Code != CodeUnavailable || a.header.Get("Retry-After") != "5" {
			t.Fatalf("%d %v %s", a.status, a.header, a.body)
		}
		if strings.Contains(string(a.body), "group") {
			t.Errorf("the body names the backend's operation: %s", a.body)
		}
		a = e.do(req{method: "GET", path: "/v1/clusters/" + cl.ID})
		if a.status != 200 {
			t.Fatalf("the other client: %d", a.status)
		}
	})
	t.Run("retry-after option", func(t *testing.T) {
		w := httptest.NewRecorder()
		e.h.fail(w, httptest.NewRequest("GET", "/v1/clusters", nil), errs.Unavailable("x", errors.New("y")))
		if got := w.Header().Get("Retry-After"); got != "7" || w.Code != 503 {
			t.Fatalf("Retry-After %q", got)
		}
	})
}
