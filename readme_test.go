package dlc_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The README's Go block that starts with dlc.New is Example_readme's body, statement for
// statement (spacing and comments aside), so the README's program runs as
// written.
func TestReadmeSnippet(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_client_test.go")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```go\n(c, err := dlc.New\\(\\)\n.*?)```").FindSubmatch(readme)
	body := regexp.MustCompile(`(?s)// --- the README's block\n(.*?)// --- end of the README's block`).FindSubmatch(example)
	if block == nil || body == nil {
		t.Fatal("the README's Go block that starts with dlc.New() or Example_readme's marked body not found")
	}
	if got, want := code(string(body[1])), code(string(block[1])); got != want {
		t.Errorf("Example_readme's body and the README's block differ:\n%s\n---\n%s", got, want)
	}
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
