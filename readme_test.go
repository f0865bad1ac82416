package dlc_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The README is a front page of at most this many lines; the rest of the
// documentation is in docs/.
const maxReadmeLines = 250

// docFiles returns the README and every docs/*.md file but the generated
// docs/rules.md: the files whose Go blocks are snippets.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, f := range docs {
		if filepath.Base(f) != "rules.md" {
			files = append(files, filepath.ToSlash(f))
		}
	}
	return files
}

// A Go block of a documentation file and the region of code it shows.
type snippet struct {
	doc          string // the Markdown file
	line         int    // the line of its opening fence
	file, region string
	lines        []string
}

// snippetsOf returns the Go blocks of a Markdown file; a block without a
// snippet marker on the line before it is an error.
func snippetsOf(t *testing.T, doc string) []*snippet {
	t.Helper()
	text, err := os.ReadFile(filepath.FromSlash(doc))
	if err != nil {
		t.Fatal(err)
	}
	marker := regexp.MustCompile(`^<!-- snippet: (\S+) (\S+) -->$`)
	var snippets []*snippet
	var cur *snippet
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && line == "```go":
			m := marker.FindStringSubmatch(prev)
			if m == nil {
				t.Errorf("%s:%d: a Go block after %q names no snippet region (<!-- snippet: FILE REGION -->)", doc, n, prev)
				m = []string{"", "", ""}
			}
			cur = &snippet{doc: doc, line: n, file: m[1], region: m[2]}
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
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return snippets
}

// Every Go block of the README and of docs/*.md (but the generated
// docs/rules.md) is code that compiles here, and runs where it can: the
// line before each names a file of this module and a region of it
// (<!-- snippet: FILE REGION -->, FILE relative to the module's root),
// between "// snippet REGION" and "// end snippet REGION", which holds the
// block's code statement for statement (spacing and comments aside). The
// regions are in Examples and tests, so `go vet` compiles them and
// `go test` runs them (an Example without output, one that would call
// Tencent COS, is compiled only).
func TestReadmeSnippets(t *testing.T) {
	var snippets []*snippet
	for _, doc := range docFiles(t) {
		s := snippetsOf(t, doc)
		if doc == "README.md" && len(s) == 0 {
			t.Error("README.md shows no snippet, want its first program")
		}
		snippets = append(snippets, s...)
	}
	if len(snippets) < 13 {
		t.Errorf("%d snippets found in README.md and docs/*.md, want every one (13 or more)", len(snippets))
	}
	for _, s := range snippets {
		if s.file == "" {
			continue
		}
		want := code(strings.Join(s.lines, "\n"))
		got, err := regionOf(s.file, s.region)
		if err != nil {
			t.Errorf("%s:%d: %s %s: %v", s.doc, s.line, s.file, s.region, err)
		} else if got != want {
			t.Errorf("%s %s and the block at %s:%d differ:\n%s\n---\n%s", s.file, s.region, s.doc, s.line, got, want)
		}
	}
}

// The README is a front page: what dlc is, the two set-up commands, a
// first program, the packages and where the rest of the documentation is.
func TestReadmeLength(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, want at most %d: move the rest into docs/", n, maxReadmeLines)
	}
	for _, want := range []string{"go run ./examples/quickstart", "make test"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("README.md lacks its set-up command %q", want)
		}
	}
}

// Every relative link of the README and of docs/*.md names a file or
// directory of the repository, and a fragment of a link to a Markdown
// file names one of its headings (as GitHub makes their anchors) or an
// <a id> of it. Links in code are not links.
func TestDocLinks(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	scheme := regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	links := 0
	for _, doc := range append([]string{"README.md"}, docs...) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		prose := proseOf(string(text))
		for _, m := range link.FindAllStringSubmatchIndex(prose, -1) {
			target := prose[m[2]:m[3]]
			n := strings.Count(prose[:m[0]], "\n") + 1
			if scheme.MatchString(target) {
				continue // http:, https:, mailto:
			}
			links++
			path, frag, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), filepath.FromSlash(path))
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: link to %s: no such file (%s)", doc, n, target, file)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			anchors, err := anchorsOf(file)
			if err != nil {
				t.Error(err)
			} else if !anchors[frag] {
				t.Errorf("%s:%d: link to %s: %s has no heading with the anchor #%s", doc, n, target, file, frag)
			}
		}
	}
	if links == 0 {
		t.Error("no relative link found: the README's Documentation list links docs/")
	}
}

// proseOf returns a Markdown text with fenced code blocks emptied and
// inline code spans removed (a span may go over a line break), so that what
// is left is prose; its lines stay where they were.
func proseOf(text string) string {
	lines := strings.Split(text, "\n")
	fence := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			lines[i] = ""
		} else if fence {
			lines[i] = ""
		}
	}
	span := regexp.MustCompile("`[^`]*`")
	return span.ReplaceAllStringFunc(strings.Join(lines, "\n"), func(s string) string {
		return strings.Repeat("\n", strings.Count(s, "\n"))
	})
}

// anchorsOf returns the anchors of a Markdown file: its headings' as
// GitHub makes them (lower case, punctuation dropped, spaces as hyphens, a
// repeated one suffixed -1, -2, …) and the ids of its <a id="…"> tags.
func anchorsOf(file string) (map[string]bool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	id := regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
	fence := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range id.FindAllStringSubmatch(l, -1) {
			anchors[m[1]] = true
		}
		h := strings.TrimLeft(l, "#")
		if len(h) == len(l) || len(l)-len(h) > 6 || !strings.HasPrefix(h, " ") {
			continue
		}
		slug := slugOf(strings.TrimSpace(h))
		if k := seen[slug]; k > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, k)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors, nil
}

// slugOf is a heading's anchor as GitHub makes it.
func slugOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), unicode.IsMark(r), r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
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
