package errs

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/go-multierror"
)

// Path is the path of a field inside a spec, written the way the spec's
// JSON and YAML name it: "workerGroups[2].instances.max", "tags[team]".
// The zero Path is the root.
type Path string

// NewPath returns the path of a top-level field.
func NewPath(name string) Path { return Path(name) }

// Child returns the path of a field below p.
func (p Path) Child(name string, more ...string) Path {
	s := string(p)
	for _, n := range append([]string{name}, more...) {
		if s == "" {
			s = n
		} else {
			s += "." + n
		}
	}
	return Path(s)
}

// Index returns the path of element i of the list at p.
func (p Path) Index(i int) Path { return Path(string(p) + "[" + strconv.Itoa(i) + "]") }

// Key returns the path of the map entry k of the map at p.
func (p Path) Key(k string) Path { return Path(string(p) + "[" + k + "]") }

// String returns the path as text.
func (p Path) String() string { return string(p) }

// ErrorType says what kind of problem a FieldError reports.
type ErrorType string

// The kinds of field problem.
const (
	TypeRequired     ErrorType = "Required value"
	TypeInvalid      ErrorType = "Invalid value"
	TypeDuplicate    ErrorType = "Duplicate value"
	TypeTooLong      ErrorType = "Too long"
	TypeTooMany      ErrorType = "Too many"
	TypeForbidden    ErrorType = "Forbidden"
	TypeNotSupported ErrorType = "Unsupported value"
	TypeUnknown      ErrorType = "Unknown field"
)

// FieldError is one problem with one field: where it is, which product
// rule it breaks, and why. errors.Is(fe, ErrInvalid) is true.
type FieldError struct {
	Path     Path      // the field, e.g. "workerGroups[2].instances.max"
	Rule     string    // the product rule's ID, e.g. "C8" (package rules, docs/rules.md); "" for a rule of Kubernetes or Ray
	Type     ErrorType // what kind of problem
	BadValue any       // the offending value, when there is one
	Detail   string    // what is wrong and, where it helps, what to do instead
}

// Error implements error: "path: Type: value: detail [rule]".
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(string(e.Path))
		b.WriteString(": ")
	}
	b.WriteString(string(e.Type))
	if e.BadValue != nil && e.Type != TypeRequired {
		if s, ok := e.BadValue.(string); ok {
			fmt.Fprintf(&b, ": %q", s)
		} else {
			fmt.Fprintf(&b, ": %v", e.BadValue)
		}
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Rule != "" {
		fmt.Fprintf(&b, " [%s]", e.Rule)
	}
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Required reports a missing value.
func Required(p Path, rule, detail string) *FieldError {
	return &FieldError{Path: p, Rule: rule, Type: TypeRequired, Detail: detail}
}

// Invalid reports a value that breaks a rule.
func Invalid(p Path, rule string, v any, detail string) *FieldError {
	return &FieldError{Path: p, Rule: rule, Type: TypeInvalid, BadValue: v, Detail: detail}
}

// Duplicate reports a value that must be unique but is not.
func Duplicate(p Path, rule string, v any) *FieldError {
	return &FieldError{Path: p, Rule: rule, Type: TypeDuplicate, BadValue: v}
}

// TooLong reports text over its length limit (counted in characters).
// The value it keeps is v's first 64 characters, so that the error stays
// short however long v is.
func TooLong(p Path, rule string, v string, limit int) *FieldError {
	n := 0
	for i := range v {
		if n == 64 {
			v = v[:i] + "…"
			break
		}
		n++
	}
	return &FieldError{Path: p, Rule: rule, Type: TypeTooLong, BadValue: v,
		Detail: fmt.Sprintf("must have at most %d characters", limit)}
}

// TooMany reports a list or map over its size limit.
func TooMany(p Path, rule string, got, limit int) *FieldError {
	return &FieldError{Path: p, Rule: rule, Type: TypeTooMany, BadValue: got,
		Detail: fmt.Sprintf("must have at most %d items", limit)}
}

// Forbidden reports a field that may not be set here.
func Forbidden(p Path, rule, detail string) *FieldError {
	return &FieldError{Path: p, Rule: rule, Type: TypeForbidden, Detail: detail}
}

// NotSupported reports a value outside a fixed set.
func NotSupported(p Path, rule string, v any, valid []string) *FieldError {
	return &FieldError{Path: p, Rule: rule, Type: TypeNotSupported, BadValue: v,
		Detail: "supported values: " + strings.Join(valid, ", ")}
}

// List collects field errors. Helpers take a path and return a List; the
// caller appends and, at the top, turns the List into one error with
// ToError.
type List []*FieldError

// ToError returns nil for an empty list, else one error that holds every
// problem: errors.Is(err, ErrInvalid) is true and errors.As(err, &fe)
// finds the first *FieldError. Fields(err) returns them all.
func (l List) ToError() error {
	if len(l) == 0 {
		return nil
	}
	me := &multierror.Error{ErrorFormat: formatList}
	for _, e := range l {
		me.Errors = append(me.Errors, e)
	}
	return me.ErrorOrNil()
}

func formatList(es []error) string {
	if len(es) == 1 {
		return "invalid: " + es[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid: %d problems:", len(es))
	for _, e := range es {
		b.WriteString("\n\t* ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Fields returns every *FieldError inside err: those of a validation
// result, or the one err is. It returns nil when there are none.
func Fields(err error) []*FieldError {
	var me *multierror.Error
	if errors.As(err, &me) {
		var out []*FieldError
		for _, e := range me.Errors {
			out = append(out, Fields(e)...)
		}
		return out
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return []*FieldError{fe}
	}
	return nil
}

// Prefix returns the list with every path put below p, for validating a
// part of a larger spec.
func (l List) Prefix(p Path) List {
	out := make(List, len(l))
	for i, e := range l {
		c := *e
		if c.Path == "" {
			c.Path = p
		} else if strings.HasPrefix(string(c.Path), "[") {
			c.Path = Path(string(p) + string(c.Path))
		} else {
			c.Path = p.Child(string(c.Path))
		}
		out[i] = &c
	}
	return out
}

// SortedKeys returns a map's keys in order, so that validation reports map
// problems in a stable order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
