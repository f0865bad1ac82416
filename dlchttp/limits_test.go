package dlchttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/dlctest"
)

// TestBodyTooLarge: a body over the bound is refused with 413, whatever
// its type; one within it is read.
func TestBodyTooLarge(t *testing.T) {
	e := newEnv(t, dlctest.MemoryOptions{}, Options{})
	small := newEnvOn(t, e.m, e.m.Client, Options{MaxBodyBytes: 64})
	huge := `{"name":"` + strings.Repeat("a", DefaultMaxBodyBytes) + `"}`
	for _, c := range []struct {
		name string
		e    *env
		r    req
	}{
		{"default bound, JSON", e, req{method: "POST", path: "/v1/clusters", body: huge}},
		{"default bound, YAML", e, req{method: "POST", path: "/v1/jobs", body: "name: " + strings.Repeat("a", DefaultMaxBodyBytes), header: map[string]string{"Content-Type": "application/yaml"}}},
		{"option", small, req{method: "POST", path: "/v1/groups", body: `{"name":"` + strings.Repeat("a", 64) + `"}`}},
		{"option, action", small, req{method: "PUT", path: "/v1/resourcegroups/rg-1", body: `{"package":"pkg-1","capacity":{"milliCPU":1000,"memory":1073741824,"gpu":0}}`}},
	} {
		a := c.e.do(c.r)
		if a.status != http.StatusRequestEntityTooLarge || a.err(t).Code != CodeTooLarge {
			t.Errorf("%s: %d %.200s", c.name, a.status, a.body)
		}
	}
	small.must(req{method: "POST", path: "/v1/groups", body: `{"name":"g"}`}, 201, nil)
}

// TestAuthentication: a request the authenticator names no user for is
// 401 and reaches no service; the user it names is the context's user of
// the client's calls; the OpenAPI document needs none.
func TestAuthentication(t *testing.T) {
	var mu sync.Mutex
	var seen []auth.User
	authz := auth.AuthorizerFunc(func(_ context.Context, u auth.User, _ auth.Action, _ auth.Resource) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, u)
		return nil
	})
	m := dlctest.NewMemory(dlctest.MemoryOptions{T: t, Options: []dlc.Option{dlc.WithAuthorizer(authz)}})
	e := newEnvOn(t, m, m.Client, Options{})
	for _, c := range []struct {
		name   string
		header map[string]string
	}{
		{"no header", nil},
		{"empty", map[string]string{DefaultUserHeader: " "}},
		{"a name too long", map[string]string{DefaultUserHeader: strings.Repeat("u", auth.MaxValueLen+1)}},
		{"a group too long", map[string]string{DefaultUserHeader: "bob", DefaultGroupsHeader: strings.Repeat("g", 300)}},
	} {
		a := e.do(req{method: "GET", path: "/v1/groups", user: "-", header: c.header})
		if a.status != http.StatusUnauthorized || a.err(t).Code != CodeUnauthenticated {
			t.Errorf("%s: %d %s", c.name, a.status, a.body)
		}
	}
	r := httptest.NewRequest("GET", "/v1/groups", nil)
	r.Header.Set(DefaultUserHeader, "bob\x01")
	if _, err := (InsecureHeaderAuthenticator{}).Authenticate(r); err == nil {
		t.Error("a user name with a control character is a user")
	}
	mu.Lock()
	n := len(seen)
	mu.Unlock()
	if n != 0 {
		t.Fatal("unauthenticated requests reached the authorizer")
	}
	e.must(req{method: "POST", path: "/v1/groups", body: groupBody{Name: "g"}, user: "-",
		header: map[string]string{DefaultUserHeader: "bob", DefaultGroupsHeader: "nlp, ops"}}, 201, nil)
	mu.Lock()
	first := slices.Clone(seen)
	mu.Unlock()
	if len(first) == 0 || first[0].Name != "bob" || strings.Join(first[0].Groups, ",") != "nlp,ops" {
		t.Fatalf("the authorizer saw %+v", first)
	}
	e.must(req{method: "GET", path: "/v1/openapi.json", user: "-"}, 200, nil)

	// An authenticator of one's own; a user with no name is no user.
	custom := newEnvOn(t, m, m.Client, Options{Authenticator: AuthenticatorFunc(func(r *http.Request) (auth.User, error) {
		return auth.User{Name: r.Header.Get("Authorization")}, nil
	})})
	if a := custom.do(req{method: "GET", path: "/v1/groups", user: "-"}); a.status != 401 {
		t.Fatalf("a nameless user: %d", a.status)
	}
	custom.must(req{method: "GET", path: "/v1/groups", user: "-", header: map[string]string{"Authorization": "carol"}}, 200, nil)
}

// TestNew: New refuses what it cannot serve with.
func TestNew(t *testing.T) {
	m := dlctest.NewMemory(dlctest.MemoryOptions{T: t})
	for _, c := range []struct {
		name string
		c    *dlc.Client
		o    Options
	}{
		{"nil client", nil, Options{Authenticator: InsecureHeaderAuthenticator{}}},
		{"no authenticator", m.Client, Options{}},
		{"negative", m.Client, Options{Authenticator: InsecureHeaderAuthenticator{}, MaxBodyBytes: -1}},
		{"page sizes", m.Client, Options{Authenticator: InsecureHeaderAuthenticator{}, DefaultPageSize: 10, MaxPageSize: 5}},
	} {
		if _, err := New(c.c, c.o); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
