package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// The output formats of -o.
const (
	outTable = ""
	outWide  = "wide"
	outYAML  = "yaml"
	outJSON  = "json"
)

func checkOutput(o string) error {
	switch o {
	case outTable, outWide, outYAML, outJSON:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use yaml, json or wide", o)
}

// checkPageOutput is checkOutput for the commands that print a page, not
// a table (why, quota, plan): no wide.
func checkPageOutput(o string) error {
	switch o {
	case outTable, outYAML, outJSON:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use yaml or json", o)
}

// printObject writes v as YAML or JSON.
func printObject(w io.Writer, format string, v any) error {
	switch format {
	case outJSON:
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	default:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
}

// list is how -o yaml|json prints several objects.
type list[T any] struct {
	Items []T `json:"items"`
}

// table writes aligned columns, as kubectl's tables (its tab writer).
type table struct {
	w interface {
		io.Writer
		Flush() error
	}
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: printers.GetNewTabWriter(w)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// row writes one row; an empty cell is written <none>.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			c = "<none>"
		}
		if i > 0 {
			io.WriteString(t.w, "\t")
		}
		io.WriteString(t.w, oneLine(c))
	}
	io.WriteString(t.w, "\n")
}

func (t *table) flush() error { return t.w.Flush() }

// oneLine keeps a cell on one line, without tabs, at most 120 characters.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > 120 {
		s = string(r[:119]) + "…"
	}
	return s
}

// age writes how long ago t was, as kubectl's AGE column.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// tags writes a map as "k=v,k2=v2", sorted by key.
func tags(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// kv writes "Key:   value" lines of a describe page, aligned.
type kv struct {
	w      io.Writer
	indent string
}

func (k kv) line(key, value string) {
	fmt.Fprintf(k.w, "%s%-16s %s\n", k.indent, key+":", value)
}

func (k kv) section(title string) {
	fmt.Fprintf(k.w, "%s%s:\n", k.indent, title)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func when(now, t time.Time) string {
	if t.IsZero() {
		return "<none>"
	}
	return t.UTC().Format(time.RFC3339) + " (" + age(now, t) + " ago)"
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
