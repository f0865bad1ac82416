package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aidlc/dlc/errs"
	yamlv3 "go.yaml.in/yaml/v3"
)

// upper decodes its own JSON: a type the walk cannot see into.
type upper string

func (u *upper) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*u = upper(strings.ToUpper(s))
	return nil
}

type inner struct {
	Label string `json:"label"`
}

type decodeDoc struct {
	inner
	Name   string             `json:"name"`
	List   []string           `json:"list"`
	Map    map[string]string  `json:"map"`
	Count  int                `json:"count"`
	Small  int8               `json:"small"`
	Ptr    *int               `json:"ptr"`
	Uint   uint16             `json:"uint"`
	Flag   bool               `json:"flag"`
	Ratio  float64            `json:"ratio"`
	Floats map[string]float64 `json:"floats"`
	Pair   [2]string          `json:"pair"`
	Upper  upper              `json:"upper"`
	Any    any                `json:"any"`
}

// Every field takes the value as written, or the decode fails: a YAML
// 1.1 reading (no → false, 1.10 → 1.1, 0777 → 511, 0x1F → 31) never
// changes a value on the way.
func TestDecodeScalars(t *testing.T) {
	cases := []struct {
		name, doc string
		want      decodeDoc
		wantErr   string // a part of the error; "" for none
	}{
		// strings keep their text
		{"no", "name: no", decodeDoc{Name: "no"}, ""},
		{"yes, on, off, y, n", "list: [yes, on, off, y, n, Yes, NO]", decodeDoc{List: []string{"yes", "on", "off", "y", "n", "Yes", "NO"}}, ""},
		{"true stays text", "name: true", decodeDoc{Name: "true"}, ""},
		{"1.10", "name: 1.10", decodeDoc{Name: "1.10"}, ""},
		{"0777", "name: 0777", decodeDoc{Name: "0777"}, ""},
		{"0x1F", "name: 0x1F", decodeDoc{Name: "0x1F"}, ""},
		{"0o17, 1_000, +12, 1e3, .inf, .nan", "list: [0o17, 1_000, +12, 1e3, .inf, .nan, -.5]",
			decodeDoc{List: []string{"0o17", "1_000", "+12", "1e3", ".inf", ".nan", "-.5"}}, ""},
		{"timestamp", "name: 2001-12-14", decodeDoc{Name: "2001-12-14"}, ""},
		{"sexagesimal", "name: 1:20", decodeDoc{Name: "1:20"}, ""},
		{"map keys and values", "map: {no: off, 0777: 0x1F, 1.10: 1.10, true: ~x}",
			decodeDoc{Map: map[string]string{"no": "off", "0777": "0x1F", "1.10": "1.10", "true": "~x"}}, ""},
		{"embedded struct field", "label: 0777", decodeDoc{inner: inner{Label: "0777"}}, ""},
		{"quoted", `name: "0777"`, decodeDoc{Name: "0777"}, ""},
		{"explicit !!str", "name: !!str 0x1F", decodeDoc{Name: "0x1F"}, ""},
		{"block scalar", "name: |\n  a\n  b\n", decodeDoc{Name: "a\nb\n"}, ""},
		{"escapes", `name: "a\"b\\c\td\u00e9\x01"`, decodeDoc{Name: "a\"b\\c\td\u00e9\x01"}, ""},
		{"null is unset", "name: ~\nptr: null\nlist: [~]", decodeDoc{List: []string{""}}, ""},
		{"fixed array", "pair: [no, 0777]", decodeDoc{Pair: [2]string{"no", "0777"}}, ""},
		{"json.Unmarshaler gets the text", "upper: no", decodeDoc{Upper: "NO"}, ""},
		{"any", "any: {a: [1, -2.5, .5, +3, 1e400, true, no, 0777, 0x1F, ~, 1.10]}", decodeDoc{Any: map[string]any{
			"a": []any{1.0, -2.5, 0.5, 3.0, "1e400", true, "no", "0777", "0x1F", nil, 1.1}}}, ""},
		{"JSON", `{"name": "no", "count": 3, "flag": true, "ratio": 0.5, "list": ["a"]}`,
			decodeDoc{Name: "no", Count: 3, Flag: true, Ratio: 0.5, List: []string{"a"}}, ""},
		// numbers and booleans: decimal, and true or false
		{"decimal ints", "count: -12\nsmall: +7\nptr: 0\nuint: 65535", decodeDoc{Count: -12, Small: 7, Ptr: new(0), Uint: 65535}, ""},
		{"booleans", "flag: True", decodeDoc{Flag: true}, ""},
		{"floats", "ratio: 1.10\nfloats: {a: 2, b: .5, c: -1e3, d: 0.25}", decodeDoc{Ratio: 1.1,
			Floats: map[string]float64{"a": 2, "b": 0.5, "c": -1000, "d": 0.25}}, ""},
		{"octal int", "count: 0777", decodeDoc{}, `count: Invalid value: line 1: expected a whole number written in decimal digits (no leading zeros, 0x, 0o or '_': YAML readers disagree on them), got "0777"`},
		{"hex int", "ptr: 0x1F", decodeDoc{}, `got "0x1F"`},
		{"0o int", "count: 0o17", decodeDoc{}, `got "0o17"`},
		{"underscore int", "count: 1_000", decodeDoc{}, `got "1_000"`},
		{"float for an int", "count: 5.0", decodeDoc{}, `expected a whole number written in decimal digits (no leading zeros, 0x, 0o or '_': YAML readers disagree on them), got "5.0"`},
		{"quoted int", `count: "5"`, decodeDoc{}, `expected a whole number, got the string "5"`},
		{"!!str int", `count: !!str 5`, decodeDoc{}, `not a value tagged !!str`},
		{"int out of range", "small: 128", decodeDoc{}, "128 is out of range"},
		{"int over int64", "count: 99999999999999999999", decodeDoc{}, "out of range"},
		{"negative uint", "uint: -1", decodeDoc{}, "out of range"},
		{"yes for a bool", "flag: yes", decodeDoc{}, `expected true or false, got "yes"`},
		{"no for a bool", "flag: no", decodeDoc{}, `expected true or false, got "no"`},
		{"!!bool yes", "flag: !!bool yes", decodeDoc{}, `expected true or false, got "yes"`},
		{"octal float", "ratio: 010", decodeDoc{}, `expected a number written in decimal digits (no leading zeros, 0x, 0o or '_': YAML readers disagree on them), got "010"`},
		{"inf", "floats: {a: .inf}", decodeDoc{}, `floats[a]: Invalid value: line 1: expected a number written in decimal digits (no leading zeros, 0x, 0o or '_': YAML readers disagree on them), got ".inf"`},
		{"float out of range", "ratio: 1e400", decodeDoc{}, "out of range"},
		// shapes, tags, documents
		{"custom tag", "name: !secret x", decodeDoc{}, "the YAML tag !secret is not supported"},
		{"binary tag", "name: !!binary aGk=", decodeDoc{}, "the YAML tag !!binary is not supported"},
		{"!!int for a string", "name: !!int 5", decodeDoc{}, "not a value tagged !!int"},
		{"!!null with text", "name: !!null x", decodeDoc{}, "not a value tagged !!null"},
		{"array length", "pair: [a]", decodeDoc{}, "expected a list of 2 items"},
		{"two documents", "name: a\n---\nname: b\n", decodeDoc{}, "line 2: a second YAML document"},
		{"list for a string", "name: [a]", decodeDoc{}, "name: Invalid value: line 1: expected a string"},
		{"mapping key", "map: {[a]: b}", decodeDoc{}, "a key is a plain string"},
		{"alias key", "map: {&k a: b, *k : c}", decodeDoc{}, "aliases are not supported"},
		{"duplicate key, as written", `map: {no: a, "no": b}`, decodeDoc{}, `key "no" appears twice`},
		{"not YAML", "name: [", decodeDoc{}, "not valid YAML or JSON"},
		{"json.Unmarshaler refuses", "upper: [a]", decodeDoc{}, "cannot unmarshal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got decodeDoc
			err := UnmarshalStrict([]byte(tc.doc), &got)
			if tc.wantErr != "" {
				if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want ErrInvalid saying %q", err, tc.wantErr)
				}
				if !reflect.DeepEqual(got, decodeDoc{}) {
					t.Fatalf("a failed decode wrote %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

// v is replaced when the data is clean and left alone when it is not.
func TestUnmarshalStrictWritesOnlyClean(t *testing.T) {
	v := decodeDoc{Name: "before", Count: 1}
	if err := UnmarshalStrict([]byte("name: after\ncount: 0x1"), &v); err == nil || v.Name != "before" || v.Count != 1 {
		t.Fatalf("a failed decode: %v, %+v", err, v)
	}
	if err := UnmarshalStrict([]byte("name: after"), &v); err != nil || v.Name != "after" || v.Count != 0 {
		t.Fatalf("a clean decode: %v, %+v", err, v)
	}
	if err := UnmarshalStrict([]byte("name: a"), v); err == nil {
		t.Fatal("decoding into a non-pointer succeeded")
	}
}

// FuzzMarshalRoundTrip: what MarshalYAML writes decodes to the same value,
// whatever the strings hold.
func FuzzMarshalRoundTrip(f *testing.F) {
	for _, s := range []string{"no", "0777", "0x1F", "1.10", "~", "", "null", " a ", "a: b", "- a", "'", "\"", "\x01", "\u2028", "#", "!x", "&a", "*a"} {
		f.Add(s, s, 1.1, 5, true)
	}
	f.Fuzz(func(t *testing.T, name, key string, ratio float64, count int, flag bool) {
		if !utf8.ValidString(name) || !utf8.ValidString(key) || math.IsNaN(ratio) || math.IsInf(ratio, 0) {
			return
		}
		in := decodeDoc{Name: name, List: []string{key, name}, Map: map[string]string{key: name}, Count: count,
			Ratio: ratio, Flag: flag, Floats: map[string]float64{key: ratio}, Pair: [2]string{key, name}}
		y, err := MarshalYAML(in)
		if err != nil {
			t.Skip(err)
		}
		var out decodeDoc
		if err := UnmarshalStrict(y, &out); err != nil {
			t.Fatalf("decoding our own YAML: %v\n%s", err, y)
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("round trip changed the value:\n%#v\n%#v\n%s", in, out, y)
		}
	})
}

type stringsDoc struct {
	Name string            `json:"name" yaml:"name"`
	List []string          `json:"list" yaml:"list"`
	Map  map[string]string `json:"map" yaml:"map"`
}

// FuzzStringsAsYAMLv3 checks string fields against yaml.v3, which reads
// YAML 1.2 and gives a string field a scalar's text: whatever decodes
// here decodes there to the same value.
func FuzzStringsAsYAMLv3(f *testing.F) {
	for _, s := range []string{"name: no", "list: [1.10, 0777, 0x1F, ~, '', \"a\\tb\"]", "map: {no: off, 1: 2}", "name: |\n  a\n  b\n",
		"name: 2001-12-14", "name: >-\n  a\n  b\n", "map: {? a, b: }", "name: \"\\u00e9\\x41\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ours stringsDoc
		if UnmarshalStrict(data, &ours) != nil {
			return
		}
		var theirs stringsDoc
		dec := yamlv3.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&theirs); err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("yaml.v3 refuses what we accept: %v\n%q", err, data)
		}
		// yaml.v3 drops a null list item where JSON, and we, keep a "".
		nonEmpty := func(l []string) []string {
			return slices.DeleteFunc(slices.Clone(l), func(s string) bool { return s == "" })
		}
		ours.List, theirs.List = nonEmpty(ours.List), nonEmpty(theirs.List)
		if !reflect.DeepEqual(ours, theirs) {
			t.Fatalf("%q:\nours   %#v\nyaml.v3 %#v", data, ours, theirs)
		}
	})
}
