package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServe: the example serves the API on a listener until its context
// ends: a resource group, a cluster group and a cluster made over HTTP.
func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	do := func(method, path, body string, want int) map[string]any {
		t.Helper()
		r, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("X-Dlc-User", "alice")
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, b, want)
		}
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		return out
	}
	do("PUT", "/v1/resourcegroups/rg-1", `{"package":"pkg-1","capacity":{"milliCPU":16000,"memory":68719476736}}`, 200)
	g := do("POST", "/v1/groups", `{"name":"训练组"}`, 201)
	spec := `name: 集群_1
groups: [` + g["id"].(string) + `]
resourcePackage: pkg-1
resourceGroup: rg-1
image: ray-2.46.0-py310-cpu
headGroup: {name: head, nodeSpec: cu.4c16g}
workerGroups: [{name: cpu, nodeSpec: cu.4c8g, instances: {min: 1, max: 2}}]
`
	r, _ := http.NewRequest("POST", base+"/v1/clusters", strings.NewReader(spec))
	r.Header.Set("X-Dlc-User", "alice")
	r.Header.Set("Content-Type", "application/yaml")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 201 || res.Header.Get("ETag") == "" {
		t.Fatalf("create from YAML: %d, ETag %q", res.StatusCode, res.Header.Get("ETag"))
	}
	if doc := do("GET", "/v1/openapi.json", "", 200); doc["openapi"] == nil {
		t.Fatal("no OpenAPI document")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a bound, not a wait
		t.Fatal("serve did not return once its context ended")
	}
}
