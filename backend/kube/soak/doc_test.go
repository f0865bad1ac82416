package soak_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestParametersDocumented fails when the test reads an environment
// variable that the package documentation's parameter list does not name.
func TestParametersDocumented(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	read := regexp.MustCompile(`"(DLC_SOAK[A-Z_]*)"`)
	seen := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range read.FindAllStringSubmatch(string(src), -1) {
			name := m[1]
			if name == "DLC_SOAK_" {
				continue // a prefix, not a variable
			}
			seen++
			if !strings.Contains(string(doc), "//   - "+name+" (") && !strings.Contains(string(doc), name+"=") {
				t.Errorf("%s reads %s, which the package documentation's parameters do not list", f, name)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no DLC_SOAK variable found in the test files: the pattern no longer matches how they are read")
	}
}
