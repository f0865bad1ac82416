// Package codec reads and writes dlc's specs as YAML and JSON. Decoding is
// strict: an unknown field, a duplicate key or a value of the wrong shape
// is an error that names the field's path and its line.
//
// Decoding is bounded: a document over MaxDocumentSize bytes is refused
// before it is read, one that may hold more than MaxNodes nodes is refused
// by a linear scan before it is parsed, and the walk stops at MaxNodes.
package codec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/aidlc/dlc/errs"
	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// MaxDocumentSize is the largest document, in bytes (1 MiB), that
// decoding reads; a larger one is refused before it is parsed. A spec is
// a few kilobytes.
const MaxDocumentSize = 1 << 20

// MaxNodes bounds how many YAML nodes one document may hold, so that a
// hostile document (a huge flat list, deep nesting) cannot make decoding
// slow. A document is refused before it is parsed when it has more than
// MaxNodes bytes that can begin a node (see separators), and while it is
// walked when it has more than MaxNodes nodes.
const MaxNodes = 200000

// MarshalYAML writes v as YAML, with the field names of its JSON tags.
func MarshalYAML(v any) ([]byte, error) { return yaml.Marshal(v) }

// MarshalJSON writes v as indented JSON.
func MarshalJSON(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }

// UnmarshalStrict decodes YAML or JSON into v (a pointer to a struct).
// Every unknown field, duplicate key and shape mismatch is reported at
// once, each as an *errs.FieldError with its path and line; the error is
// errors.Is ErrInvalid. v is only written when the data is clean.
func UnmarshalStrict(data []byte, v any) error {
	if len(data) > MaxDocumentSize {
		return invalid(errs.TypeTooLong, len(data), fmt.Sprintf(
			"the document has %d bytes; a document has at most %d (1 MiB)", len(data), MaxDocumentSize))
	}
	if n := separators(data); n > MaxNodes {
		return invalid(errs.TypeTooMany, n, fmt.Sprintf(
			"the document has more than %d YAML nodes or separators; a spec has far fewer", MaxNodes))
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return errs.List{errs.Invalid("", "", nil, "not valid YAML or JSON: "+err.Error())}.ToError()
	}
	w := walker{budget: MaxNodes}
	if len(doc.Content) > 0 {
		w.walk(doc.Content[0], reflect.TypeOf(v).Elem(), "")
	}
	if err := w.list.ToError(); err != nil {
		return err
	}
	// The document has the right shape; let the JSON decoder fill v.
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		msg := strings.TrimPrefix(err.Error(), "error unmarshaling JSON: while decoding JSON: ")
		return errs.List{errs.Invalid("", "", nil, msg)}.ToError()
	}
	return nil
}

// Decode is UnmarshalStrict into a new T.
func Decode[T any](data []byte) (*T, error) {
	v := new(T)
	if err := UnmarshalStrict(data, v); err != nil {
		return nil, err
	}
	return v, nil
}

func invalid(t errs.ErrorType, bad any, detail string) error {
	return errs.List{{Type: t, BadValue: bad, Detail: detail}}.ToError()
}

// separators counts the bytes of data that can begin a YAML node or
// separate two: the flow indicators '[', '{' and ',', the indicators ':'
// and '?', a '-' not followed by an ASCII non-blank (a block sequence
// entry), and line breaks (LF, CR, NEL, LS, PS). Every node but the first
// few follows one of them, and none is followed by more than three new
// nodes, so a document with n separators parses into at most 3(n+1)
// nodes: counting them first bounds the parser's work, in one pass over
// the bytes and without allocating.
func separators(data []byte) int {
	n := 0
	for i, c := range data {
		switch c {
		case '[', '{', ',', ':', '?', '\n', '\r':
			n++
		case '-':
			if i+1 == len(data) || !asciiNonBlank(data[i+1]) {
				n++
			}
		case 0x85: // NEL is C2 85
			if i > 0 && data[i-1] == 0xC2 {
				n++
			}
		case 0xA8, 0xA9: // LS and PS are E2 80 A8 and E2 80 A9
			if i > 1 && data[i-1] == 0x80 && data[i-2] == 0xE2 {
				n++
			}
		}
	}
	return n
}

func asciiNonBlank(c byte) bool { return c < 0x80 && c != ' ' && c != '\t' && c != '\n' && c != '\r' }

type walker struct {
	list   errs.List
	budget int
}

// MaxProblems bounds how many problems one decode reports.
const MaxProblems = 100

func (w *walker) fail(n *yamlv3.Node, p errs.Path, t errs.ErrorType, detail string) {
	switch {
	case len(w.list) > MaxProblems:
		return
	case len(w.list) == MaxProblems:
		w.list = append(w.list, &errs.FieldError{Path: p, Type: errs.TypeTooMany,
			Detail: fmt.Sprintf("line %d: more than %d problems; fix these first", n.Line, MaxProblems)})
		return
	}
	w.list = append(w.list, &errs.FieldError{Path: p, Type: t,
		Detail: fmt.Sprintf("line %d: %s", n.Line, detail)})
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

func (w *walker) walk(n *yamlv3.Node, t reflect.Type, p errs.Path) {
	if w.budget--; w.budget < 0 {
		if w.budget == -1 {
			w.fail(n, p, errs.TypeTooMany, fmt.Sprintf("the document has more than %d nodes", MaxNodes))
		}
		return
	}
	if n.Kind == yamlv3.AliasNode {
		w.fail(n, p, errs.TypeInvalid, "YAML aliases are not supported; write the value out")
		return
	}
	if n.Kind == yamlv3.ScalarNode && n.Tag == "!!null" {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if !w.expect(n, yamlv3.MappingNode, p, "a mapping") {
			return
		}
		fields := fieldsOf(t)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			fp := p.Child(k.Value)
			if seen[k.Value] {
				w.fail(k, fp, errs.TypeDuplicate, fmt.Sprintf("field %q appears twice", k.Value))
				continue
			}
			seen[k.Value] = true
			ft, ok := fields[k.Value]
			if !ok {
				w.fail(k, fp, errs.TypeUnknown, fmt.Sprintf("unknown field %q", k.Value))
				continue
			}
			w.walk(val, ft, fp)
		}
	case reflect.Map:
		if !w.expect(n, yamlv3.MappingNode, p, "a mapping") {
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			kp := p.Key(k.Value)
			if k.Kind != yamlv3.ScalarNode {
				w.fail(k, p, errs.TypeInvalid, "a key is a plain string")
				continue
			}
			if seen[k.Value] {
				w.fail(k, kp, errs.TypeDuplicate, fmt.Sprintf("key %q appears twice", k.Value))
				continue
			}
			seen[k.Value] = true
			w.walk(val, t.Elem(), kp)
		}
	case reflect.Slice, reflect.Array:
		if !w.expect(n, yamlv3.SequenceNode, p, "a list") {
			return
		}
		for i, item := range n.Content {
			w.walk(item, t.Elem(), p.Index(i))
		}
	case reflect.Interface:
	default:
		w.expect(n, yamlv3.ScalarNode, p, "a single value")
	}
}

func (w *walker) expect(n *yamlv3.Node, kind yamlv3.Kind, p errs.Path, what string) bool {
	if n.Kind == kind {
		return true
	}
	w.fail(n, p, errs.TypeInvalid, "expected "+what)
	return false
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf maps a struct's JSON field names to their types, with embedded
// structs' fields promoted as encoding/json does.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range fieldsOf(ft) {
					if _, taken := m[k]; !taken {
						m[k] = v
					}
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldCache.Store(t, m)
	return m
}
