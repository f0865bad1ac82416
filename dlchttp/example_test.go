package dlchttp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/dlchttp"
)

// The handler over a client on the memory backend, served on loopback:
// a resource group registered, a cluster group created, an invalid
// cluster refused with every field error, and a request without a user
// refused.
func ExampleNew() {
	// snippet handler
	c, err := dlc.New() // the memory backend; or dlc.New(dlc.WithBackend(…), dlc.WithAuthorizer(…))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	h, err := dlchttp.New(c, dlchttp.Options{
		Authenticator: dlchttp.InsecureHeaderAuthenticator{}, // believes X-Dlc-User: tests and development only
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h) // or http.ListenAndServe(":8080", h)
	defer srv.Close()
	// end snippet handler

	call := func(method, path, user, body string) (int, []byte) {
		r, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if user != "" {
			r.Header.Set("X-Dlc-User", user)
		}
		res, err := srv.Client().Do(r)
		if err != nil {
			log.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}

	status, _ := call("PUT", "/v1/resourcegroups/rg-1", "alice", `{"package":"pkg-1","capacity":{"cpu":"16","memory":"64Gi"}}`)
	fmt.Println("register:", status)
	status, b := call("POST", "/v1/groups", "alice", `{"name":"训练组"}`)
	var g struct{ Name, Creator string }
	_ = json.Unmarshal(b, &g)
	fmt.Println("group:", status, g.Name, g.Creator)

	status, b = call("POST", "/v1/clusters", "alice", `{"name":"bad name!","groups":[],"resourcePackage":"pkg-1","resourceGroup":"rg-1",
		"image":"ray-2.46.0-py310-cpu","headGroup":{"name":"head","nodeSpec":"cu.4c16g"},"workerGroups":[{"name":"cpu","nodeSpec":"cu.4c8g","instances":{"min":1,"max":2}}]}`)
	var e dlchttp.Error
	_ = json.Unmarshal(b, &e)
	fmt.Println("invalid cluster:", status, e.Code)
	for _, f := range e.Fields {
		fmt.Printf("  %s [%s] %s\n", f.Path, f.Rule, f.Type)
	}

	status, b = call("GET", "/v1/clusters", "", "")
	_ = json.Unmarshal(b, &e)
	fmt.Println("no user:", status, e.Code)
	// Output:
	// register: 200
	// group: 201 训练组 alice
	// invalid cluster: 422 invalid
	//   name [C1] Invalid value
	//   groups [C2] Required value
	// no user: 401 unauthenticated
}

// An authenticator from a function: here one that believes a bearer
// token's table (a platform verifies its own tokens or certificates).
func ExampleAuthenticatorFunc() {
	tokens := map[string]auth.User{"t0k3n": {Name: "alice", Groups: []string{"team-a"}}}
	// snippet authenticator
	authn := dlchttp.AuthenticatorFunc(func(r *http.Request) (auth.User, error) {
		u, ok := tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			return auth.User{}, errors.New("no such token")
		}
		return u, nil
	})
	// end snippet authenticator
	r := httptest.NewRequest("GET", "/v1/clusters", nil)
	r.Header.Set("Authorization", "Bearer t0k3n")
	u, err := authn.Authenticate(r)
	fmt.Println(u.Name, u.Groups, err)
	// Output: alice [team-a] <nil>
}
