// Package loadtest holds what the Kubernetes backend's load tests (the
// scale test, backend/kube/scale, and the soak, backend/kube/soak) share:
// a job package the Ray head stand-ins fetch without a network, and the
// check that each test documents the environment variables it reads.
package loadtest

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/storage"
)

// Package is a job package served to the head stand-ins: Ray fetches no
// cos:// URI (its protocol.py knows https, s3, gs, gcs and file), so the
// backends render each COS package as an https URL under its base
// (WorkingDir, for kube.RenderOptions.WorkingDir), as kube.COSWorkingDir
// presigns one, and Fetch (for kubetest.LoopOptions.Fetch) serves the
// package for any URL under it, and nothing else: the stand-ins dial
// nothing.
type Package struct {
	base string
	zip  []byte
}

// NewPackage returns the package whose main.sh is script, served under
// https://jobs-1250000000.cos.<name>.invalid/.
func NewPackage(name, script string) *Package {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	f, err := zw.Create("main.sh")
	if err == nil {
		_, err = io.WriteString(f, script)
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		panic(err) // a bytes.Buffer does not fail
	}
	return &Package{base: "https://jobs-1250000000.cos." + name + ".invalid/", zip: buf.Bytes()}
}

// WorkingDir is a kube.RenderOptions.WorkingDir: the package's https URL.
func (p *Package) WorkingDir(u kube.PackageUse) (string, error) {
	obj, err := storage.ParseCOSURL(u.Package.COS)
	if err != nil {
		return "", err
	}
	return p.base + obj.Key, nil
}

// Fetch is a kubetest.LoopOptions.Fetch: the package, for any URL under
// its base.
func (p *Package) Fetch(_ context.Context, url string) (io.ReadCloser, error) {
	if !strings.HasPrefix(url, p.base) {
		return nil, fmt.Errorf("loadtest: no package at %q", url)
	}
	return io.NopCloser(bytes.NewReader(p.zip)), nil
}

// ParametersDocumented fails t when a _test file of the current directory
// reads an environment variable named prefix… (as a string literal) that
// doc.go's parameter list ("//   - NAME (") does not name, or mentions
// as NAME=; and when it finds none at all (the pattern no longer matches
// how they are read).
func ParametersDocumented(t *testing.T, prefix string) {
	t.Helper()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	read := regexp.MustCompile(`"(` + regexp.QuoteMeta(prefix) + `[A-Z_]*)"`)
	seen := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range read.FindAllStringSubmatch(string(src), -1) {
			name := m[1]
			if name == prefix+"_" {
				continue // a prefix, not a variable
			}
			seen++
			if !strings.Contains(string(doc), "//   - "+name+" (") && !strings.Contains(string(doc), name+"=") {
				t.Errorf("%s reads %s, which the package documentation's parameters do not list", f, name)
			}
		}
	}
	if seen == 0 {
		t.Fatalf("no %s variable found in the test files: the pattern no longer matches how they are read", prefix)
	}
}

// Table renders a Markdown table with its columns aligned (each at least
// three wide, as a separator row needs).
func Table(head []string, rows [][]string) string {
	w := make([]int, len(head))
	for i, h := range head {
		w[i] = max(3, len([]rune(h)))
	}
	for _, r := range rows {
		for i, c := range r {
			w[i] = max(w[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i, c := range cells {
			fmt.Fprintf(&b, " %s%s |", c, strings.Repeat(" ", w[i]-len([]rune(c))))
		}
		b.WriteString("\n")
	}
	line(head)
	dashes := make([]string, len(head))
	for i := range head {
		dashes[i] = strings.Repeat("-", max(3, w[i]))
	}
	line(dashes)
	for _, r := range rows {
		line(r)
	}
	return b.String()
}

// Anonymiser leaves out of an error's text what names one object or one
// connection (an address, an SDK id, a name the test made with one of its
// prefixes), so that a report counts errors of one kind together.
type Anonymiser []struct {
	re *regexp.Regexp
	as string
}

// NewAnonymiser returns the Anonymiser of a test whose names start with
// test (e.g. "scale": scale_job_…, scale_…).
func NewAnonymiser(test string) Anonymiser {
	return Anonymiser{
		{regexp.MustCompile(`https?://[^/ "]+`), "https://…"},
		{regexp.MustCompile(`\b(cls|run|job|grp|od)-[a-z0-9]+`), "$1-…"},
		{regexp.MustCompile(`\b(` + regexp.QuoteMeta(test) + `_job_|` + regexp.QuoteMeta(test) + `_|rg-|dlctest-)[a-z0-9]+`), "${1}…"},
	}
}

// Anonymise returns s with what names one object or connection left out.
func (a Anonymiser) Anonymise(s string) string {
	for _, x := range a {
		s = x.re.ReplaceAllString(s, x.as)
	}
	return s
}
