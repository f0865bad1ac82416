package dlc_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
)

// No public package exports an alias of an internal package's type: go
// doc of a public type shows its fields, and what a user holds is
// defined where they can read it.
func TestNoExportedAliasOfAnInternalType(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "internal" || name == "testdata" || name == "hack" || name == "examples") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		internal := map[string]bool{} // import names of internal packages
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains(p, "/internal/") {
				continue
			}
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			internal[name] = true
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				if !ts.Name.IsExported() || !ts.Assign.IsValid() {
					continue
				}
				ast.Inspect(ts.Type, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] {
							t.Errorf("%s: type %s is an alias of %s.%s, an internal type", path, ts.Name.Name, id.Name, sel.Sel.Name)
						}
					}
					return true
				})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The pages and results a service sends on have JSON names as the objects
// in them do (lower-case), not Go's field names.
func TestPagesAndResultsJSON(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want []string
	}{
		{cluster.Page{Items: []*cluster.Cluster{}, Continue: "c"}, []string{`"items":[]`, `"continue":"c"`}},
		{job.RunPage{Items: []*job.Run{}}, []string{`"items":[]`}},
		{job.ListPage{Items: []job.ListEntry{}, Continue: "c"}, []string{`"items":[]`, `"continue":"c"`}},
		{cluster.EditResult{Applied: []string{"tags"}}, []string{`"cluster":null`, `"applied":["tags"]`}},
		{cluster.AutoscaleResult{Asked: 3, Granted: 2, QuotaRefused: true}, []string{`"asked":3`, `"granted":2`, `"quotaRefused":true`}},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%T as JSON: %s, want %s", tc.v, b, w)
			}
		}
	}
}

// A consumer that embeds the SDK on the memory backend, serves it over
// HTTP and tests with the memory fixture links no Kubernetes client,
// controller-runtime, KubeRay, envtest or command-line package: only the
// few utility packages the SDK itself uses (quantities, YAML, a work
// queue).
func TestLightPackagesLinkNoKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-test", "./dlctest", "./dlchttp", "./examples/httpservice").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	heavy := []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/rest", "k8s.io/api/", "sigs.k8s.io/controller-runtime",
		"github.com/ray-project/kuberay", "k8s.io/cli-runtime", "github.com/spf13/cobra", "github.com/aidlc/dlc/backend/kube", "github.com/aidlc/dlc/dlctest/kubetest"}
	for p := range strings.SplitSeq(string(out), "\n") {
		for _, h := range heavy {
			if strings.HasPrefix(p, h) {
				t.Errorf("a memory-only consumer links %s", p)
			}
		}
	}
}
