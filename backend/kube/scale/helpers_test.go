package scale_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/internal/loadtest"
)

// The harness's own arithmetic and naming, which run without a control
// plane (and so in CI, where TestScale skips).
func TestHarnessHelpers(t *testing.T) {
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]time.Duration{0.5: 5, 0.9: 9, 0.99: 10, 1: 10} {
		if got := quantile(ds, q); got != want {
			t.Errorf("quantile(1..10, %v) = %v, want %v", q, got, want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile(nil) = %v", got)
	}

	for path, want := range map[string]string{
		"PUT /apis/dlc.aidlc.io/v1alpha1/namespaces/ns/resourcegroups/rg-0/status": "write PUT resourcegroups/status",
		"PATCH /apis/ray.io/v1/namespaces/ns/rayclusters/cls-abc":                  "write PATCH rayclusters",
		"POST /api/v1/namespaces/ns/events":                                        "write POST events",
		"GET /api/v1/namespaces/ns/pods?watch=true":                                "watch pods",
		"GET /apis/dlc.aidlc.io/v1alpha1/namespaces/ns/runs/run-1":                 "read GET runs",
		"GET /apis": "read discovery",
	} {
		method, url, _ := strings.Cut(path, " ")
		req, err := http.NewRequest(method, "https://127.0.0.1:6443"+url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestKey(req); got != want {
			t.Errorf("requestKey(%s) = %q, want %q", path, got, want)
		}
	}
	c := counts{"write PUT runs/status 409": 3, "write PUT runs/status": 2, "write POST events": 1, "read GET runs 404": 7}
	if n := c.sum(isAPIConflict); n != 3 {
		t.Errorf("conflicts: %d", n)
	}
	if n := c.sum(isAPIWrite); n != 6 {
		t.Errorf("writes: %d", n)
	}
	if n := c.sum(isAPIFailure); n != 0 {
		t.Errorf("failures: %d", n)
	}
	if got := (counts{"a": 5, "b": 1}).sub(counts{"a": 2, "b": 1}); len(got) != 1 || got["a"] != 3 {
		t.Errorf("sub: %v", got)
	}

	err := `store update cluster/cls-zzrjrtt6u2 (status): unavailable: Put "https://127.0.0.1:41231/apis/x/namespaces/dlctest-qcgvx/computeclusters/cls-zzrjrtt6u2/status": deadline; scale_job_000012 scale_000013 rg-3`
	want := `store update cluster/cls-… (status): unavailable: Put "https://…/apis/x/namespaces/dlctest-…/computeclusters/cls-…/status": deadline; scale_job_… scale_… rg-…`
	if got := anonymise(err); got != want {
		t.Errorf("anonymise:\n got %s\nwant %s", got, want)
	}

	if n := countIn("running 190, abnormal 3, starting 7", "abnormal"); n != 3 {
		t.Errorf("countIn: %d", n)
	}
	if got := stateList(map[string]int{"running": 2, "created": 5, "gone": 0}); got != "created 5, running 2" {
		t.Errorf("stateList: %q", got)
	}
	tab := loadtest.Table([]string{"a", "bb"}, [][]string{{"ccc", "d"}})
	if want := "| a   | bb  |\n| --- | --- |\n| ccc | d   |\n"; tab != want {
		t.Errorf("table:\n%s\nwant\n%s", tab, want)
	}
}

// TestCountingBackendWrapsEveryInterface: the client finds a backend's
// optional interfaces by type assertion, so a method of *kube.Backend
// that countingBackend does not wrap itself is promoted and called past
// the count. Every method of an optional interface *kube.Backend
// implements must be declared on countingBackend.
func TestCountingBackendWrapsEveryInterface(t *testing.T) {
	fs := token.NewFileSet()
	f, err := parser.ParseFile(fs, "count_test.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
			continue
		}
		if id, ok := fd.Recv.List[0].Type.(*ast.Ident); ok && id.Name == "countingBackend" {
			declared[fd.Name.Name] = true
		}
	}
	kb := reflect.TypeFor[*kube.Backend]()
	for _, it := range []reflect.Type{reflect.TypeFor[backend.LatestReader](), reflect.TypeFor[backend.LatestLister](),
		reflect.TypeFor[backend.AwaitingCreator](), reflect.TypeFor[backend.RunForgetter]()} {
		if !kb.Implements(it) {
			continue
		}
		for m := range it.Methods() {
			if !declared[m.Name] {
				t.Errorf("countingBackend does not wrap %s.%s: the client's calls of it go uncounted", it.Name(), m.Name)
			}
		}
	}
}
