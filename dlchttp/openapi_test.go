package dlchttp

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aidlc/dlc/dlctest"
)

// TestOpenAPI: the document served at /v1/openapi.json is valid JSON of
// OpenAPI 3, and its paths and methods are exactly the handler's routes,
// both ways: every documented operation is routed to the pattern the
// handler registered for it, no method the document does not give is
// routed on its paths, and every registered pattern is documented. Each
// operation names its path parameters and its answers, and every schema
// it refers to is in the document.
func TestOpenAPI(t *testing.T) {
	e := newEnv(t, dlctest.MemoryOptions{}, Options{})
	a := e.must(req{method: "GET", path: "/v1/openapi.json", user: "-"}, 200, nil)
	if !json.Valid(a.body) {
		t.Fatal("the document is not valid JSON")
	}
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Info       map[string]any                       `json:"info"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	a.decode(t, &doc)
	if !strings.HasPrefix(doc.OpenAPI, "3.") || doc.Info["title"] == nil || doc.Info["version"] == nil {
		t.Fatalf("openapi %q, info %v", doc.OpenAPI, doc.Info)
	}

	var documented []string
	ids := map[string]bool{}
	wildcard := regexp.MustCompile(`\{[^}]+\}`)
	for path, ops := range doc.Paths {
		for method, op := range ops {
			m := strings.ToUpper(method)
			pattern := m + " " + path
			documented = append(documented, pattern)

			// The handler routes the documented operation to it.
			concrete := wildcard.ReplaceAllString(path, "x1")
			if _, got := e.h.mux.Handler(httptest.NewRequest(m, concrete, nil)); got != pattern {
				t.Errorf("%s %s is routed to %q, the document says %q", m, concrete, got, pattern)
			}
			// And no method the document does not give.
			for _, other := range []string{"GET", "POST", "PUT", "DELETE", "PATCH"} {
				if _, ok := ops[strings.ToLower(other)]; ok {
					continue
				}
				if _, got := e.h.mux.Handler(httptest.NewRequest(other, concrete, nil)); got != "" && strings.HasSuffix(got, " "+path) {
					t.Errorf("%s %s is routed to %q, which the document does not give", other, concrete, got)
				}
			}

			id, _ := op["operationId"].(string)
			if id == "" || ids[id] {
				t.Errorf("%s: operationId %q missing or repeated", pattern, id)
			}
			ids[id] = true
			var inPath []string
			params, _ := op["parameters"].([]any)
			for _, p := range params {
				p := p.(map[string]any)
				if p["in"] == "path" {
					inPath = append(inPath, "{"+p["name"].(string)+"}")
					if p["required"] != true {
						t.Errorf("%s: path parameter %v not required", pattern, p["name"])
					}
				}
				if p["schema"] == nil {
					t.Errorf("%s: parameter %v has no schema", pattern, p["name"])
				}
			}
			if want := wildcard.FindAllString(path, -1); !slices.Equal(inPath, want) {
				t.Errorf("%s: path parameters %v, want %v", pattern, inPath, want)
			}
			responses, _ := op["responses"].(map[string]any)
			success := false
			for code := range responses {
				success = success || strings.HasPrefix(code, "2")
			}
			if !success {
				t.Errorf("%s: no success answer in %v", pattern, responses)
			}
			if _, ok := responses["401"]; !ok && id != "openAPI" {
				t.Errorf("%s: no 401", pattern)
			}
		}
	}
	slices.Sort(documented)
	registered := slices.Sorted(slices.Values(e.h.patterns))
	for _, p := range registered {
		if _, ok := slices.BinarySearch(documented, p); !ok {
			t.Errorf("route %s is not documented", p)
		}
	}
	for _, p := range documented {
		if _, ok := slices.BinarySearch(registered, p); !ok {
			t.Errorf("documented %s is no route", p)
		}
	}
	if len(documented) != len(e.h.routes) {
		t.Errorf("%d documented operations, %d routes", len(documented), len(e.h.routes))
	}

	// Every $ref resolves.
	refs := regexp.MustCompile(`"\$ref":\s*"#/components/schemas/([^"]+)"`).FindAllStringSubmatch(string(a.body), -1)
	if len(refs) == 0 {
		t.Fatal("no schema is referred to")
	}
	for _, r := range refs {
		if doc.Components.Schemas[r[1]] == nil {
			t.Errorf("$ref %s: no such schema", r[1])
		}
	}
	for _, name := range []string{"dlchttp.Error", "cluster.Spec", "cluster.Cluster", "job.Config", "job.Run"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("no schema %s", name)
		}
	}
}

// TestDocsListEveryRoute: docs/http.md's tables list exactly the routes.
func TestDocsListEveryRoute(t *testing.T) {
	b, err := os.ReadFile("../docs/http.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| (GET|POST|PUT|DELETE) \\| `([^`]+)` \\|")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		listed = append(listed, m[1]+" "+m[2])
	}
	var want []string
	for _, rt := range routes() {
		want = append(want, rt.method+" "+rt.path)
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("docs/http.md lists %d routes:\n%v\nthe table has %d:\n%v", len(listed), listed, len(want), want)
	}
}
