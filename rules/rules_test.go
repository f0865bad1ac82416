package rules_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aidlc/dlc/rules"
)

// module is the module's root, from this package's directory.
const module = ".."

var ruleLiteral = regexp.MustCompile(`^"([CJGLPU][0-9]{1,2})"$`)

// source is what the module's Go files declare and emit.
type source struct {
	declared map[string]bool            // "dir.Name" and "dir.Type.Method"
	emitters map[string]map[string]bool // rule ID → declarations whose code holds it as a literal
	tested   map[string]bool            // rule IDs a test file names
}

// scan reads every Go file of the module.
func scan(t *testing.T) source {
	t.Helper()
	s := source{declared: map[string]bool{}, emitters: map[string]map[string]bool{}, tested: map[string]bool{}}
	word := regexp.MustCompile(`\b[CJGLPU][0-9]{1,2}\b`)
	err := filepath.WalkDir(module, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != module || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir, err := filepath.Rel(module, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir = filepath.ToSlash(dir)
		if dir == "." {
			dir = "dlc"
		}
		if strings.HasSuffix(path, "_test.go") {
			if dir != "rules" {
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				for _, id := range word.FindAll(data, -1) {
					s.tested[string(id)] = true
				}
			}
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if dir == "rules" {
			return nil // the catalog itself
		}
		for _, decl := range f.Decls {
			for _, part := range declParts(decl) {
				for _, name := range part.names {
					s.declared[dir+"."+name] = true
				}
				ast.Inspect(part.node, func(n ast.Node) bool {
					l, ok := n.(*ast.BasicLit)
					if !ok || l.Kind != token.STRING {
						return true
					}
					m := ruleLiteral.FindStringSubmatch(l.Value)
					if m == nil {
						return true
					}
					if s.emitters[m[1]] == nil {
						s.emitters[m[1]] = map[string]bool{}
					}
					for _, name := range part.names {
						s.emitters[m[1]][dir+"."+name] = true
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
	return s
}

// declPart is a piece of a declaration and the names it declares.
type declPart struct {
	node  ast.Node
	names []string
}

// declParts splits decl into what it declares: a function, a method as
// "Type.Method", or each spec of a type, variable or constant
// declaration with its names.
func declParts(decl ast.Decl) []declPart {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil {
			return []declPart{{d, []string{d.Name.Name}}}
		}
		t := d.Recv.List[0].Type
		if star, ok := t.(*ast.StarExpr); ok {
			t = star.X
		}
		switch x := t.(type) {
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		}
		if id, ok := t.(*ast.Ident); ok {
			return []declPart{{d, []string{id.Name + "." + d.Name.Name}}}
		}
	case *ast.GenDecl:
		var out []declPart
		for _, spec := range d.Specs {
			switch sp := spec.(type) {
			case *ast.TypeSpec:
				out = append(out, declPart{sp, []string{sp.Name.Name}})
			case *ast.ValueSpec:
				p := declPart{node: sp}
				for _, n := range sp.Names {
					p.names = append(p.names, n.Name)
				}
				out = append(out, p)
			}
		}
		return out
	}
	return nil
}

func TestCatalog(t *testing.T) {
	seen := map[string]bool{}
	var areas []rules.Area
	for _, r := range rules.All() {
		if seen[r.ID] {
			t.Errorf("%s: listed twice", r.ID)
		}
		seen[r.ID] = true
		if !ruleLiteral.MatchString(`"` + r.ID + `"`) {
			t.Errorf("%s: not an ID of the form J5, C14, G3, L1, P7 or U1", r.ID)
		}
		if r.Statement == "" || strings.Contains(r.Statement, "\n") || !strings.HasSuffix(r.Statement, ".") {
			t.Errorf("%s: the statement is to be one sentence on one line: %q", r.ID, r.Statement)
		}
		if len(r.Enforced) == 0 {
			t.Errorf("%s: enforced nowhere", r.ID)
		}
		if len(areas) == 0 || areas[len(areas)-1] != r.Area {
			if slices.Contains(areas, r.Area) {
				t.Errorf("%s: area %q is not contiguous in the catalog", r.ID, r.Area)
			}
			areas = append(areas, r.Area)
		}
		got, ok := rules.Lookup(r.ID)
		if !ok || got.Statement != r.Statement {
			t.Errorf("Lookup(%q) = %+v, %v", r.ID, got, ok)
		}
	}
	for _, id := range []string{"", "J0", "X1", "j5"} {
		if _, ok := rules.Lookup(id); ok {
			t.Errorf("Lookup(%q) found a rule", id)
		}
	}
	// What All and Lookup return is the caller's to change.
	r, _ := rules.Lookup("J5")
	r.Enforced[0] = "changed"
	if again, _ := rules.Lookup("J5"); again.Enforced[0] == "changed" {
		t.Error("Lookup returned the catalog's own slice")
	}
}

// Every rule ID the code emits is in the catalog, every declaration that
// emits one is listed under it, every listed place is declared, and a test
// names every rule.
func TestCatalogMatchesTheCode(t *testing.T) {
	s := scan(t)
	for id, by := range s.emitters {
		r, ok := rules.Lookup(id)
		if !ok {
			t.Errorf("rule %s is emitted by %v and not in the catalog", id, keys(by))
			continue
		}
		for place := range by {
			if !slices.Contains(r.Enforced, place) {
				t.Errorf("rule %s is emitted by %s, which its Enforced does not list", id, place)
			}
		}
	}
	for _, r := range rules.All() {
		for _, place := range r.Enforced {
			if !s.declared[place] {
				t.Errorf("rule %s: %s is not declared in the module", r.ID, place)
			}
		}
		if !s.tested[r.ID] {
			t.Errorf("rule %s: no test names it", r.ID)
		}
	}
}

// docs/rules.md is the catalog as Markdown renders it: go generate ./rules.
func TestRulesDocIsFresh(t *testing.T) {
	got, err := os.ReadFile(filepath.Join(module, "docs", "rules.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, rules.Markdown()) {
		t.Fatal("docs/rules.md is stale: run go generate ./rules and commit it")
	}
	for _, r := range rules.All() {
		if !bytes.Contains(got, []byte(`<a id="`+r.ID+`"></a>`)) {
			t.Errorf("docs/rules.md has no anchor for %s", r.ID)
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
