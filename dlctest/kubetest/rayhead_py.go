package kubetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// This file holds what the Ray head stand-in needs to answer as Python
// does: JSON values decoded in order (a Python dict keeps its keys' order),
// json.dumps's output (ensure_ascii, ", " and ": "), repr and str of values,
// the type names of TypeError messages, and tracebacks.

// pyDict is a Python dict decoded from a JSON object: its keys in order.
type pyDict struct {
	keys []string
	vals map[string]any
}

func newPyDict() *pyDict { return &pyDict{vals: map[string]any{}} }

// set sets key to v; a key set again keeps its place, as in a dict.
func (d *pyDict) set(key string, v any) *pyDict {
	if _, ok := d.vals[key]; !ok {
		d.keys = append(d.keys, key)
	}
	d.vals[key] = v
	return d
}

func (d *pyDict) get(key string) (any, bool) {
	v, ok := d.vals[key]
	return v, ok
}

// withoutNulls returns d less its keys whose value is null
// (job/utils.py strip_keys_with_value_none).
func (d *pyDict) withoutNulls() *pyDict {
	out := newPyDict()
	for _, k := range d.keys {
		if v := d.vals[k]; v != nil {
			out.set(k, v)
		}
	}
	return out
}

// pyDecode decodes one JSON value as Python's json.loads does: objects as
// *pyDict, arrays as []any, numbers as json.Number, and nothing may follow it.
func pyDecode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := pyDecodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		//lint:ignore ST1005 Python's json.JSONDecodeError text, as Ray answers it
		return nil, errors.New("Extra data")
	}
	return v, nil
}

func pyDecodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := newPyDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := pyDecodeValue(dec)
				if err != nil {
					return nil, err
				}
				d.set(kt.(string), v)
			}
			_, err := dec.Token()
			return d, err
		case '[':
			l := []any{}
			for dec.More() {
				v, err := pyDecodeValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token()
			return l, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return tok, nil // nil, bool, string, json.Number
	}
}

// pyIsInt reports whether a JSON number is a Python int (json.loads makes
// a float of anything with a fraction or an exponent).
func pyIsInt(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }

// pyType is Python's str(type(v)), as TypeError messages print it.
func pyType(v any) string {
	name := "object"
	switch v := v.(type) {
	case nil:
		name = "NoneType"
	case bool:
		name = "bool"
	case string:
		name = "str"
	case json.Number:
		name = "float"
		if pyIsInt(v) {
			name = "int"
		}
	case int, int64, uint64:
		name = "int"
	case []any:
		name = "list"
	case *pyDict:
		name = "dict"
	}
	return "<class '" + name + "'>"
}

// pyIsNumber is isinstance(v, (int, float)): a bool is an int in Python.
func pyIsNumber(v any) bool {
	switch v.(type) {
	case bool, json.Number:
		return true
	}
	return false
}

// pyIsIntValue is isinstance(v, int).
func pyIsIntValue(v any) bool {
	switch v := v.(type) {
	case bool:
		return true
	case json.Number:
		return pyIsInt(v)
	}
	return false
}

// pyTruthy is Python's bool(v).
func pyTruthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number:
		f, _ := v.Float64()
		return f != 0
	case []any:
		return len(v) > 0
	case *pyDict:
		return len(v.keys) > 0
	}
	return true
}

// pyFloat is repr(float): the shortest round trip, in exponent form below
// 1e-4 and from 1e16 on, with ".0" on an integral value.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if f != 0 && (exp < -4 || exp >= 16) {
		mant, ex, _ := strings.Cut(e, "e")
		sign := ex[0]
		digits := strings.TrimLeft(ex[1:], "0")
		if len(digits) < 2 {
			digits = strings.Repeat("0", 2-len(digits)) + digits
		}
		return mant + "e" + string(sign) + digits
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// pyNumber is how json.dumps (and repr) writes a number json.loads read.
func pyNumber(n json.Number) string {
	if pyIsInt(n) {
		s := strings.TrimPrefix(string(n), "-")
		if s == "0" {
			return "0"
		}
		return string(n)
	}
	f, _ := strconv.ParseFloat(string(n), 64)
	return pyFloat(f)
}

// pyDumps is json.dumps(v): ", " and ": " separators, every non-ASCII
// character escaped.
func pyDumps(v any) string {
	var b strings.Builder
	pyDumpsTo(&b, v)
	return b.String()
}

func pyDumpsTo(b *strings.Builder, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		b.WriteByte('"')
		b.WriteString(pyJSONEscape(v))
		b.WriteByte('"')
	case json.Number:
		b.WriteString(pyNumber(v))
	case int:
		b.WriteString(strconv.Itoa(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case uint64:
		b.WriteString(strconv.FormatUint(v, 10))
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			pyDumpsTo(b, e)
		}
		b.WriteByte(']')
	case *pyDict:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			pyDumpsTo(b, k)
			b.WriteString(": ")
			pyDumpsTo(b, v.vals[k])
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("pyDumps: %T", v))
	}
}

// pyJSONEscape escapes s as json.dumps with ensure_ascii does (the body of
// the string, without its quotes): \" \\ \n \r \t \b \f, every other
// character outside ' '..'~' as \uXXXX (lower-case hex), a character above
// U+FFFF as a surrogate pair.
func pyJSONEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		pyJSONEscapeRune(&b, r)
	}
	return b.String()
}

func pyJSONEscapeRune(b *strings.Builder, r rune) {
	switch r {
	case '"':
		b.WriteString(`\"`)
	case '\\':
		b.WriteString(`\\`)
	case '\n':
		b.WriteString(`\n`)
	case '\r':
		b.WriteString(`\r`)
	case '\t':
		b.WriteString(`\t`)
	case '\b':
		b.WriteString(`\b`)
	case '\f':
		b.WriteString(`\f`)
	default:
		switch {
		case r >= ' ' && r <= '~':
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(b, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(b, `\u%04x`, r)
		}
	}
}

// pyRepr is repr(v).
func pyRepr(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case string:
		return pyReprString(v)
	case json.Number:
		return pyNumber(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *pyDict:
		parts := make([]string, len(v.keys))
		for i, k := range v.keys {
			parts[i] = pyReprString(k) + ": " + pyRepr(v.vals[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// pyStr is str(v), what an f-string prints.
func pyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyRepr(v)
}

// pySet is repr of a set of strings, e.g. {'working_dir'}; a real set's
// order is its hash order, the stand-in's the keys' order.
func pySet(keys []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = pyReprString(k)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func pyReprString(s string) string {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < ' ' || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// pyFrame is one frame of a Python traceback: file is under the ray
// package, e.g. "dashboard/modules/job/job_head.py". The line numbers are
// the stand-in's, not Ray's.
type pyFrame struct {
	file, fn, code string
	line           int
}

// pySitePackages is where a Ray image installs the ray package.
const pySitePackages = "/home/ray/anaconda3/lib/python3.11/site-packages/ray/"

// pyTraceback is traceback.format_exc() of an exception raised through
// frames (outermost first) whose last line is last, e.g.
// "TypeError: ...". It ends with a newline, as format_exc does.
func pyTraceback(last string, frames ...pyFrame) string {
	var b strings.Builder
	b.WriteString("Traceback (most recent call last):\n")
	for _, f := range frames {
		fmt.Fprintf(&b, "  File \"%s%s\", line %d, in %s\n", pySitePackages, f.file, f.line, f.fn)
		if f.code != "" {
			b.WriteString("    " + f.code + "\n")
		}
	}
	b.WriteString(last + "\n")
	return b.String()
}

// pyUnicodeError finds the first error a strict UTF-8 decode (Python's
// bytes.decode("utf-8")) of data meets, as UnicodeDecodeError words it;
// off is data's offset in the whole. ok is true when data decodes (an
// incomplete sequence at its end is left to the next call: see more).
func pyUnicodeError(data []byte, off int64, final bool) (msg string, consumed int, ok bool) {
	i := 0
	for i < len(data) {
		c := data[i]
		if c < 0x80 {
			i++
			continue
		}
		need, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			need, lo = 2, 0xA0
		case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
			need = 2
		case c == 0xED:
			need, hi = 2, 0x9F
		case c == 0xF0:
			need, lo = 3, 0x90
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		case c == 0xF4:
			need, hi = 3, 0x8F
		default:
			return fmt.Sprintf("'utf-8' codec can't decode byte 0x%02x in position %d: invalid start byte", c, off+int64(i)), i, false
		}
		for k := 1; k <= need; k++ {
			if i+k >= len(data) {
				if !final {
					return "", i, true
				}
				if k == 1 {
					return fmt.Sprintf("'utf-8' codec can't decode byte 0x%02x in position %d: unexpected end of data", c, off+int64(i)), i, false
				}
				return fmt.Sprintf("'utf-8' codec can't decode bytes in position %d-%d: unexpected end of data", off+int64(i), off+int64(i+k-1)), i, false
			}
			b := data[i+k]
			if k == 1 && (b < lo || b > hi) || k > 1 && (b < 0x80 || b > 0xBF) {
				if k == 1 {
					return fmt.Sprintf("'utf-8' codec can't decode byte 0x%02x in position %d: invalid continuation byte", c, off+int64(i)), i, false
				}
				return fmt.Sprintf("'utf-8' codec can't decode bytes in position %d-%d: invalid continuation byte", off+int64(i), off+int64(i+k-1)), i, false
			}
		}
		i += need + 1
	}
	return "", i, true
}
