package codec

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/aidlc/dlc/errs"
	yamlv3 "go.yaml.in/yaml/v3"
)

type limitsDoc struct {
	Name string            `json:"name"`
	List []string          `json:"list"`
	Tags map[string]string `json:"tags"`
}

// A document over MaxDocumentSize bytes, or with more than MaxNodes
// separators, is refused before it is parsed; one within both is read.
func TestLimits(t *testing.T) {
	pad := func(doc string, size int) string { return doc + "#" + strings.Repeat("x", size-len(doc)-1) }
	cases := []struct {
		name, doc string
		want      string // a part of the error; "" for none
	}{
		{"32 MiB flat list", "list:\n" + strings.Repeat("- 1\n", 8<<20), "at most 1048576"},
		{"64 MiB string", "name: " + strings.Repeat("a", 64<<20), "at most 1048576"},
		{"one byte over the size", pad("name: a\n", MaxDocumentSize+1), "at most 1048576"},
		{"exactly the size", pad("name: a\n", MaxDocumentSize), ""},
		{"a string of almost 1 MiB", `name: "` + strings.Repeat("名", (MaxDocumentSize-10)/3) + `"`, ""},
		{"flow list over the node limit", "list: [" + strings.Repeat("a,", MaxNodes) + "]", "more than 20000 YAML nodes"},
		{"block list over the node limit", "list:\n" + strings.Repeat("-\n", MaxNodes), "more than 20000 YAML nodes"},
		{"flow map over the node limit", "tags: {" + strings.Repeat("a,", MaxNodes) + "}", "more than 20000 YAML nodes"},
		{"NEL line breaks over the node limit", "list:\u0085" + strings.Repeat("- a\u0085", MaxNodes/2), "more than 20000 YAML nodes"},
		{"flow list at the separator limit, over the walk's", "list: [" + strings.Repeat("a,", MaxNodes-2) + "a]", "more than 20000 nodes"},
		{"list within both limits", "list: [" + strings.Repeat("a,", MaxNodes-100) + "a]", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v limitsDoc
			err := UnmarshalStrict([]byte(tc.doc), &v)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalid saying %q", err, tc.want)
			}
			if len(errs.Fields(err)) > 1 {
				t.Fatalf("one limit, one problem: %v", err)
			}
		})
	}
}

// countNodes counts every node of a document tree.
func countNodes(n *yamlv3.Node) int {
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}

// FuzzSeparatorsBound checks the claim that bounds the parser's work: a
// document with n separators parses into at most 3(n+1) nodes.
func FuzzSeparatorsBound(f *testing.F) {
	for _, s := range []string{"", "a", "a: b", "- a: b", "{a, b, c}", "[? a]", "[a: b, c: d]", "? a\n? b\n",
		"- - - a", "a:\n  b:\n    c: d", "---\na\n---\nb\n...\n", "a: |\n  x\n  y\n", "{? a, ? b}", "[{a}, {b}]",
		"&x a: *x", "!!map {a: !!str b}", "a:\u0085- b\u0085- c", "a:\u2028  - b\u2029  - c", "[[[[[]]]]]", "{{{}}}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := yamlv3.NewDecoder(bytes.NewReader(data))
		nodes := 0
		for range 100 {
			var doc yamlv3.Node
			if dec.Decode(&doc) != nil {
				break
			}
			nodes += countNodes(&doc)
		}
		if bound := 3 * (separators(data, math.MaxInt) + 1); nodes > bound {
			t.Fatalf("%q: %d nodes, more than 3×(%d separators + 1)", data, nodes, separators(data, math.MaxInt))
		}
	})
}

// BenchmarkRefuse measures what refusing a hostile document costs.
func BenchmarkRefuse(b *testing.B) {
	cases := []struct {
		name string
		doc  []byte
	}{
		{"flat list 32 MiB", []byte("list:\n" + strings.Repeat("- 1\n", 8<<20))},
		{"string 64 MiB", []byte("name: " + strings.Repeat("a", 64<<20))},
		{"flow list 1 MiB", []byte("list: [" + strings.Repeat("1,", MaxDocumentSize/2-10) + "]")},
		{"flow list at the separator limit", []byte("list: [" + strings.Repeat("a,", MaxNodes-2) + "a]")},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var v limitsDoc
				if err := UnmarshalStrict(tc.doc, &v); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}
