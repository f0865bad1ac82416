// Command rulesdoc writes the catalog of package rules, as Markdown, to
// the file its one argument names (docs/rules.md: go generate ./rules).
package main

import (
	"fmt"
	"os"

	"github.com/aidlc/dlc/rules"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: rulesdoc FILE")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], rules.Markdown(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
