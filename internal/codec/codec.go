// Package codec reads and writes dlc's specs as YAML and JSON. Decoding is
// strict: an unknown field, a duplicate key or a value of the wrong shape
// is an error that names the field's path and its line.
//
// Decoding reads YAML 1.2 (JSON is YAML too) and builds the value from the
// parsed nodes, guided by the Go type, so a value never changes on the
// way: a string field gets the text exactly as written (no, 1.10, 0777
// and 0x1F stay those strings), and a number or boolean field takes only
// a spelling that every YAML reader reads alike (decimal numbers, true
// and false); anything else is an error, never another value.
//
// Decoding is bounded: a document over MaxDocumentSize bytes is refused
// before it is read, one that may hold more than MaxNodes nodes is refused
// by a linear scan before it is parsed, and the walk stops at MaxNodes.
package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

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
// slow or large: parsing 20000 nodes takes about 20 ms and 6 MB, where a
// full spec has about a hundred. A document is refused before it is
// parsed when it has more than MaxNodes bytes that can begin a node (see
// separators), and while it is walked when it has more than MaxNodes
// nodes.
const MaxNodes = 20000

// MaxProblems bounds how many problems one decode reports.
const MaxProblems = 100

// MarshalYAML writes v as YAML, with the field names of its JSON tags.
func MarshalYAML(v any) ([]byte, error) { return yaml.Marshal(v) }

// MarshalJSON writes v as indented JSON.
func MarshalJSON(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }

// UnmarshalStrict decodes one YAML or JSON document into v (a pointer to
// a struct). Every unknown field, duplicate key and shape mismatch is
// reported at once, each as an *errs.FieldError with its path and line;
// the error is errors.Is ErrInvalid. v is only written when the data is
// clean, and then replaced, not merged into.
func UnmarshalStrict(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("codec: UnmarshalStrict needs a non-nil pointer, not %T", v)
	}
	if len(data) > MaxDocumentSize {
		return invalid(errs.TypeTooLong, len(data), fmt.Sprintf(
			"the document has %d bytes; a document has at most %d (1 MiB)", len(data), MaxDocumentSize))
	}
	if separators(data, MaxNodes) > MaxNodes {
		return invalid(errs.TypeTooMany, nil, fmt.Sprintf(
			"the document has more than %d YAML nodes or separators; a spec has far fewer", MaxNodes))
	}
	root, err := parse(data)
	if err != nil {
		return err
	}
	t := rv.Type().Elem()
	w := walker{budget: MaxNodes}
	if root != nil {
		w.walk(root, t, "")
	}
	if err := w.list.ToError(); err != nil {
		return err
	}
	fresh := reflect.New(t)
	if len(w.out) > 0 {
		// The JSON is ours and has the type's shape; what is left for the
		// JSON decoder is to fill the value, and the custom unmarshalers.
		if err := json.Unmarshal(w.out, fresh.Interface()); err != nil {
			return invalid(errs.TypeInvalid, nil, strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	rv.Elem().Set(fresh.Elem())
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

// parse reads the one document in data; nil when data holds none.
func parse(data []byte) (*yamlv3.Node, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var doc yamlv3.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, invalid(errs.TypeInvalid, nil, "not valid YAML or JSON: "+err.Error())
	}
	var next yamlv3.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, invalid(errs.TypeInvalid, nil, fmt.Sprintf(
			"line %d: a second YAML document; give one spec per document", next.Line))
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// separators counts the bytes of data that can begin a YAML node or
// separate two: the flow indicators '[', '{' and ',', the indicators ':'
// and '?', a '-' not followed by an ASCII non-blank (a block sequence
// entry), and line breaks (LF, CR, NEL, LS, PS). Every node but the first
// few follows one of them, and none is followed by more than three new
// nodes, so a document with n separators parses into at most 3(n+1)
// nodes: counting them first bounds the parser's work, in one pass over
// the bytes and without allocating. The count stops once it passes limit.
func separators(data []byte, limit int) int {
	n := 0
	for i, c := range data {
		if n > limit {
			break
		}
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

// walker checks a node tree against a Go type and writes it as JSON.
type walker struct {
	list   errs.List
	budget int
	out    []byte // the document as JSON, of the type's shape
}

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

// The core schema's tags: an explicit tag other than these is refused.
var coreTags = map[string]bool{
	"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true, "!!map": true, "!!seq": true,
}

func (w *walker) walk(n *yamlv3.Node, t reflect.Type, p errs.Path) {
	if !w.enter(n, p) {
		return
	}
	if isNull(n) {
		w.out = append(w.out, "null"...)
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		w.any(n, p)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if !w.expect(n, yamlv3.MappingNode, p, "a mapping", "!!map") {
			return
		}
		fields := fieldsOf(t)
		w.out = append(w.out, '{')
		for _, e := range w.entries(n, p, true) {
			ft, ok := fields[e.name]
			if !ok {
				w.fail(e.key, e.path, errs.TypeUnknown, fmt.Sprintf("unknown field %q", e.name))
				continue
			}
			w.member(e.name)
			w.walk(e.val, ft, e.path)
		}
		w.out = append(w.out, '}')
	case reflect.Map:
		if !w.expect(n, yamlv3.MappingNode, p, "a mapping", "!!map") {
			return
		}
		if t.Key().Kind() != reflect.String {
			w.fail(n, p, errs.TypeInvalid, "internal error: a map's keys are strings, not "+t.Key().String())
			return
		}
		w.out = append(w.out, '{')
		for _, e := range w.entries(n, p, false) {
			w.member(e.name)
			w.walk(e.val, t.Elem(), e.path)
		}
		w.out = append(w.out, '}')
	case reflect.Slice, reflect.Array:
		if !w.expect(n, yamlv3.SequenceNode, p, "a list", "!!seq") {
			return
		}
		if t.Kind() == reflect.Array && len(n.Content) != t.Len() {
			w.fail(n, p, errs.TypeInvalid, fmt.Sprintf("expected a list of %d items", t.Len()))
			return
		}
		w.out = append(w.out, '[')
		for i, item := range n.Content {
			if i > 0 {
				w.out = append(w.out, ',')
			}
			w.walk(item, t.Elem(), p.Index(i))
		}
		w.out = append(w.out, ']')
	case reflect.String:
		if s, ok := w.text(n, p, "a string"); ok {
			w.out = appendString(w.out, s)
		}
	case reflect.Bool:
		v, ok := w.plain(n, p, "true or false", "!!bool")
		if !ok {
			return
		}
		b, ok := coreBools[v]
		if !ok {
			w.fail(n, p, errs.TypeInvalid, fmt.Sprintf("expected true or false, got %q", v))
			return
		}
		w.out = strconv.AppendBool(w.out, b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v, ok := w.decimal(n, p, decimalInt, "a whole number", "!!int")
		if !ok {
			return
		}
		v = strings.TrimPrefix(v, "+")
		var err error
		if t.Kind() >= reflect.Uint {
			_, err = strconv.ParseUint(v, 10, t.Bits())
		} else {
			_, err = strconv.ParseInt(v, 10, t.Bits())
		}
		if err != nil {
			w.fail(n, p, errs.TypeInvalid, fmt.Sprintf("%s is out of range for this field", v))
			return
		}
		w.out = append(w.out, v...)
	case reflect.Float32, reflect.Float64:
		v, ok := w.decimal(n, p, decimalFloat, "a number", "!!float", "!!int")
		if !ok {
			return
		}
		f, err := strconv.ParseFloat(v, t.Bits())
		if err != nil {
			w.fail(n, p, errs.TypeInvalid, fmt.Sprintf("%s is out of range for this field", v))
			return
		}
		w.out = strconv.AppendFloat(w.out, f, 'g', -1, t.Bits())
	default:
		w.fail(n, p, errs.TypeInvalid, "internal error: cannot decode into "+t.String())
	}
}

// enter counts n against the node budget and refuses aliases and tags
// outside the core schema.
func (w *walker) enter(n *yamlv3.Node, p errs.Path) bool {
	if w.budget--; w.budget < 0 {
		if w.budget == -1 {
			w.fail(n, p, errs.TypeTooMany, fmt.Sprintf("the document has more than %d nodes", MaxNodes))
		}
		return false
	}
	if n.Kind == yamlv3.AliasNode {
		w.fail(n, p, errs.TypeInvalid, "YAML aliases are not supported; write the value out")
		return false
	}
	if n.Style&yamlv3.TaggedStyle != 0 && !coreTags[n.Tag] {
		w.fail(n, p, errs.TypeInvalid, fmt.Sprintf("the YAML tag %s is not supported; write the value without it", n.Tag))
		return false
	}
	return true
}

// expect checks that n is of kind and, when it carries an explicit tag,
// that the tag is one of tags.
func (w *walker) expect(n *yamlv3.Node, kind yamlv3.Kind, p errs.Path, what string, tags ...string) bool {
	switch {
	case n.Kind != kind:
		w.fail(n, p, errs.TypeInvalid, "expected "+what)
		return false
	case n.Style&yamlv3.TaggedStyle != 0 && !slices.Contains(tags, n.Tag):
		w.fail(n, p, errs.TypeInvalid, fmt.Sprintf("expected %s, not a value tagged %s", what, n.Tag))
		return false
	}
	return true
}

// plain returns the text of a scalar for a number or boolean field: one
// written plain, not quoted or as a block, unless a tag says what it is.
func (w *walker) plain(n *yamlv3.Node, p errs.Path, what string, tags ...string) (string, bool) {
	if !w.expect(n, yamlv3.ScalarNode, p, what, tags...) {
		return "", false
	}
	const written = yamlv3.DoubleQuotedStyle | yamlv3.SingleQuotedStyle | yamlv3.LiteralStyle | yamlv3.FoldedStyle
	if n.Style&yamlv3.TaggedStyle == 0 && n.Style&written != 0 {
		w.fail(n, p, errs.TypeInvalid, fmt.Sprintf("expected %s, got the string %q", what, n.Value))
		return "", false
	}
	return n.Value, true
}

// decimal returns the text of a plain number that syntax spells.
func (w *walker) decimal(n *yamlv3.Node, p errs.Path, syntax *regexp.Regexp, what string, tags ...string) (string, bool) {
	v, ok := w.plain(n, p, what, tags...)
	if ok && !syntax.MatchString(v) {
		w.fail(n, p, errs.TypeInvalid, fmt.Sprintf(
			"expected %s written in decimal digits (no leading zeros, 0x, 0o or '_': YAML readers disagree on them), got %q", what, v))
		return "", false
	}
	return v, ok
}

var (
	// Integers and floats as every YAML reader and JSON read them alike:
	// decimal, no leading zeros (0777 is 511 to YAML 1.1), no '_', 0x, 0o.
	decimalInt   = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)
	decimalFloat = regexp.MustCompile(`^[-+]?((0|[1-9][0-9]*)(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$`)
	// The core schema's booleans and nulls: yes, on, y and the like are
	// strings in YAML 1.2.
	coreBools = map[string]bool{"true": true, "True": true, "TRUE": true, "false": false, "False": false, "FALSE": false}
	coreNulls = map[string]bool{"": true, "~": true, "null": true, "Null": true, "NULL": true}
)

// isNull reports whether n is a null: an untagged null of the core schema,
// or one tagged !!null and spelled as one.
func isNull(n *yamlv3.Node) bool {
	return n.Kind == yamlv3.ScalarNode && n.Tag == "!!null" && coreNulls[n.Value]
}

// text returns a scalar's text exactly as written, whatever YAML would
// resolve it to (a string field given no, 1.10 or 0777 gets that text).
func (w *walker) text(n *yamlv3.Node, p errs.Path, what string) (string, bool) {
	switch {
	case !w.expect(n, yamlv3.ScalarNode, p, what, "!!str"):
		return "", false
	case !utf8.ValidString(n.Value):
		w.fail(n, p, errs.TypeInvalid, "not valid UTF-8")
		return "", false
	}
	return n.Value, true
}

// entry is one key–value pair of a mapping.
type entry struct {
	key, val *yamlv3.Node
	name     string    // the key as written
	path     errs.Path // the value's path
}

// entries returns a mapping's pairs whose keys are plain scalars, each
// key once, reporting the others. The keys name struct fields (a value's
// path is p.name) or map keys (p[name]).
func (w *walker) entries(n *yamlv3.Node, p errs.Path, fields bool) []entry {
	out := make([]entry, 0, len(n.Content)/2)
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		switch k.Kind {
		case yamlv3.ScalarNode:
		case yamlv3.AliasNode:
			w.fail(k, p, errs.TypeInvalid, "YAML aliases are not supported; write the value out")
			continue
		default:
			w.fail(k, p, errs.TypeInvalid, "a key is a plain string")
			continue
		}
		name, ok := w.text(k, p, "a key")
		if !ok {
			continue
		}
		e := entry{key: k, val: n.Content[i+1], name: name, path: p.Key(name)}
		what := "key"
		if fields {
			e.path, what = p.Child(name), "field"
		}
		if seen[name] {
			w.fail(k, e.path, errs.TypeDuplicate, fmt.Sprintf("%s %q appears twice", what, name))
			continue
		}
		seen[name] = true
		out = append(out, e)
	}
	return out
}

// member writes the JSON of a key, after a comma when one is due.
func (w *walker) member(name string) {
	if w.out[len(w.out)-1] != '{' {
		w.out = append(w.out, ',')
	}
	w.out = appendString(w.out, name)
	w.out = append(w.out, ':')
}

// any writes n as JSON with no Go type to guide it, for a field of a type
// that decodes its own JSON: core-schema booleans, decimal numbers,
// null, and every other scalar as the string it is written as.
func (w *walker) any(n *yamlv3.Node, p errs.Path) {
	switch n.Kind {
	case yamlv3.MappingNode:
		w.out = append(w.out, '{')
		for _, e := range w.entries(n, p, false) {
			w.member(e.name)
			if w.enter(e.val, e.path) {
				w.any(e.val, e.path)
			}
		}
		w.out = append(w.out, '}')
	case yamlv3.SequenceNode:
		w.out = append(w.out, '[')
		for i, item := range n.Content {
			if i > 0 {
				w.out = append(w.out, ',')
			}
			if w.enter(item, p.Index(i)) {
				w.any(item, p.Index(i))
			}
		}
		w.out = append(w.out, ']')
	case yamlv3.ScalarNode:
		b, isBool := coreBools[n.Value]
		f, err := strconv.ParseFloat(n.Value, 64)
		switch {
		case isNull(n):
			w.out = append(w.out, "null"...)
		case n.Tag == "!!bool" && isBool:
			w.out = strconv.AppendBool(w.out, b)
		case n.Tag == "!!int" && decimalInt.MatchString(n.Value):
			w.out = append(w.out, strings.TrimPrefix(n.Value, "+")...)
		case n.Tag == "!!float" && decimalFloat.MatchString(n.Value) && err == nil:
			w.out = strconv.AppendFloat(w.out, f, 'g', -1, 64)
		default:
			if s, ok := w.text(n, p, "a value"); ok {
				w.out = appendString(w.out, s)
			}
		}
	}
}

// appendString appends s, valid UTF-8, as a JSON string.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
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
