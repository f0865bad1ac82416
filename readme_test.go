package dlc_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every Go block of the README is code that compiles here, and runs where
// it can: the line before each names a file of this module and a region
// of it (<!-- snippet: FILE REGION -->), between "// snippet REGION" and
// "// end snippet REGION", which holds the block's code statement for
// statement (spacing and comments aside). The regions are in Examples and
// tests, so `go vet` compiles them and `go test` runs them (an Example
// without output, one that would call Tencent COS, is compiled only).
func TestReadmeSnippets(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	marker := regexp.MustCompile(`^<!-- snippet: (\S+) (\S+) -->$`)
	type snippet struct {
		file, region string
		lines        []string
	}
	var snippets []*snippet
	var cur *snippet
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(readme))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && line == "```go":
			m := marker.FindStringSubmatch(prev)
			if m == nil {
				t.Errorf("a Go block of the README after %q names no snippet region (<!-- snippet: FILE REGION -->)", prev)
				m = []string{"", "", ""}
			}
			cur = &snippet{file: m[1], region: m[2]}
			snippets = append(snippets, cur)
		case cur != nil && line == "```":
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
		if strings.TrimSpace(line) != "" {
			prev = line
		}
	}
	if len(snippets) < 9 {
		t.Errorf("%d README snippets found, want every one (9 or more)", len(snippets))
	}
	for _, s := range snippets {
		if s.file == "" {
			continue
		}
		want := code(strings.Join(s.lines, "\n"))
		got, err := regionOf(s.file, s.region)
		if err != nil {
			t.Errorf("%s %s: %v", s.file, s.region, err)
		} else if got != want {
			t.Errorf("%s %s and the README's block differ:\n%s\n---\n%s", s.file, s.region, got, want)
		}
	}
}

// regionOf returns the code of a snippet region of a file.
func regionOf(file, region string) (string, error) {
	src, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		return "", err
	}
	start, end := "// snippet "+region+"\n", "// end snippet "+region
	i := bytes.Index(src, []byte(start))
	j := bytes.Index(src, []byte(end))
	if i < 0 || j < i {
		return "", os.ErrNotExist
	}
	return code(string(src[i+len(start) : j])), nil
}

// code is Go source without comments and with its whitespace folded.
func code(src string) string {
	var lines []string
	for _, l := range strings.Split(src, "\n") {
		if i := strings.Index(l, "//"); i >= 0 && !strings.Contains(l[:i], `"`) {
			l = l[:i]
		}
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
