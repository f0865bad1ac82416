package dlchttp_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/dlchttp"
)

// The handler over a client on the memory backend, served on loopback:
// a resource group registered, a cluster group created, an invalid
// cluster refused with every field error, and a request without a user
// refused.
func ExampleNew() {
	c, err := dlc.New() // the memory backend
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
	srv := httptest.NewServer(h)
	defer srv.Close()

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

	status, _ := call("PUT", "/v1/resourcegroups/rg-1", "alice", `{"package":"pkg-1","capacity":{"milliCPU":16000,"memory":68719476736}}`)
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
