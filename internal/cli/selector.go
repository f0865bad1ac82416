package cli

import (
	"fmt"
	"strings"
)

// MaxSelectorTerms bounds the terms of a tag selector.
const MaxSelectorTerms = 64

// selector is a label-like tag selector: "team=a,env!=prod,gpu,!spot".
// Its equalities go to the SDK's list filters (Tags); the other terms the
// SDK has no filter for and are checked here, on what it returns.
type selector struct {
	equal    map[string]string // key=value, key==value
	notEqual [][2]string       // key!=value, each term (a key may be excluded from several values)
	exists   []string          // key
	absent   []string          // !key
}

func parseSelector(s string) (*selector, error) {
	sel := &selector{}
	s = strings.TrimSpace(s)
	if s == "" {
		return sel, nil
	}
	terms := strings.Split(s, ",")
	if len(terms) > MaxSelectorTerms {
		return nil, fmt.Errorf("selector %q: more than %d terms", s, MaxSelectorTerms)
	}
	for _, t := range terms {
		t = strings.TrimSpace(t)
		var k, v string
		switch {
		case t == "":
			return nil, fmt.Errorf("selector %q: an empty term", s)
		case strings.Contains(t, "!="):
			k, v, _ = strings.Cut(t, "!=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			sel.notEqual = append(sel.notEqual, [2]string{k, v})
		case strings.Contains(t, "="):
			k, v, _ = strings.Cut(t, "=")
			v = strings.TrimPrefix(v, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if sel.equal == nil {
				sel.equal = map[string]string{}
			}
			if old, ok := sel.equal[k]; ok && old != v {
				return nil, fmt.Errorf("selector %q: %s cannot equal both %q and %q", s, k, old, v)
			}
			sel.equal[k] = v
		case strings.HasPrefix(t, "!"):
			k = strings.TrimSpace(t[1:])
			sel.absent = append(sel.absent, k)
		default:
			k = t
			sel.exists = append(sel.exists, k)
		}
		if k == "" || strings.ContainsAny(k, badSelectorChars) {
			return nil, fmt.Errorf("selector %q: term %q has no valid key (set-based terms such as \"in (…)\" are not supported)", s, t)
		}
		if strings.ContainsAny(v, badSelectorChars) {
			return nil, fmt.Errorf("selector %q: term %q has no valid value", s, t)
		}
	}
	return sel, nil
}

// badSelectorChars may be in no key or value of a selector's terms: what
// kubectl's set-based syntax and the operators use.
const badSelectorChars = "=!(),"

func (s *selector) empty() bool {
	return len(s.equal) == 0 && len(s.notEqual) == 0 && len(s.exists) == 0 && len(s.absent) == 0
}

// matches checks every term, equalities included (a watch has no filter).
func (s *selector) matches(tags map[string]string) bool {
	for k, v := range s.equal {
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	for _, kv := range s.notEqual {
		if got, ok := tags[kv[0]]; ok && got == kv[1] {
			return false
		}
	}
	for _, k := range s.exists {
		if _, ok := tags[k]; !ok {
			return false
		}
	}
	for _, k := range s.absent {
		if _, ok := tags[k]; ok {
			return false
		}
	}
	return true
}
