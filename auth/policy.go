package auth

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/codec"
)

// Bounds of a policy (P2, P4–P7).
const (
	MaxStatements = 100 // statements in a policy
	MaxEntries    = 100 // users, groups, actions, resources, condition keys or values of one statement
	MaxValueLen   = 256 // bytes of one user, group, pattern or value
)

// Effect is what a statement does to the calls it matches.
type Effect string

// The effects. A call is allowed when a statement allows it and none
// denies it: deny wins, and what no statement allows is refused.
const (
	Allow Effect = "allow"
	Deny  Effect = "deny"
)

// The condition operators (P7).
const (
	StringEqual    = "string_equal"     // a value of the key equals one of the values
	StringNotEqual = "string_not_equal" // no value of the key equals any of the values
	StringLike     = "string_like"      // a value of the key matches one of the "*" patterns
	StringNotLike  = "string_not_like"  // no value of the key matches any of the patterns
)

// The condition keys (P7) and what each reads of the resource.
const (
	// KeyResourceTag is CAM's tag key: its values are "key&value", one
	// per tag of the resource.
	KeyResourceTag = "qcs:resource_tag"
	// KeyTagPrefix + a tag key reads that tag's value: "dlc:tag/team".
	KeyTagPrefix     = "dlc:tag/"
	KeyCreator       = "dlc:creator"        // Resource.Creator
	KeyResourceGroup = "dlc:resource_group" // Resource.ResourceGroup
	KeyClusterGroup  = "dlc:cluster_group"  // each of Resource.ClusterGroups
	KeyCluster       = "dlc:cluster"        // Resource.Cluster
)

// ConditionKeys returns the condition keys a policy may use; a key
// KeyTagPrefix+"<tag key>" may also be used.
func ConditionKeys() []string {
	return []string{KeyResourceTag, KeyCreator, KeyResourceGroup, KeyClusterGroup, KeyCluster}
}

// UserVariable in a string_equal or string_not_equal value stands for the
// caller's name: dlc:creator = ${user} is "what the caller created".
const UserVariable = "${user}"

// Policy is a set of statements in the shape of a Tencent Cloud CAM
// policy document (version "2.0"), here with the principals in each
// statement, so that one document is a platform's whole policy:
//
//	version: "2.0"
//	statement:
//	  - effect: allow
//	    principal: {group: [nlp]}
//	    action: ["dlc:*"]
//	    resource: ["*"]
//	    condition:
//	      string_equal: {"qcs:resource_tag": ["team&nlp"]}
//	  - effect: deny
//	    action: ["dlc:DeleteCluster"]
//	    resource: ["resourcegroup/rg-prod/cluster/*"]
//	    condition:
//	      string_not_equal: {"dlc:creator": ["${user}"]}
type Policy struct {
	Version   string      `json:"version"`
	Statement []Statement `json:"statement"`
}

// Statement allows or denies the actions it names on the resources it
// names to its principals, when its conditions hold.
type Statement struct {
	Effect    Effect     `json:"effect"`
	Principal *Principal `json:"principal,omitempty"` // nil: every user
	Action    []string   `json:"action"`
	Resource  []string   `json:"resource"`
	// Condition maps an operator to keys and their values; every key of
	// every operator must hold, and a key holds when any of its values
	// does (CAM's semantics).
	Condition map[string]map[string][]string `json:"condition,omitempty"`
}

// Principal names whom a statement is about: a user by name, or any
// member of a group. "*" (as a user or a group) is every user.
type Principal struct {
	User  []string `json:"user,omitempty"`
	Group []string `json:"group,omitempty"`
}

// ParsePolicy reads a policy from YAML or JSON, strictly (an unknown
// field, a duplicate key or a wrong shape is an error with its path), and
// validates it. Every problem is reported at once; the error is
// errors.Is errs.ErrInvalid.
func ParsePolicy(data []byte) (*Policy, error) {
	p, err := codec.Decode[Policy](data)
	if err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// Validate reports every problem of the policy at once (rules P1–P7),
// each with its field path; nil when it is sound.
func (p *Policy) Validate() error {
	if p == nil {
		return errs.List{errs.Required("", "P2", "a policy")}.ToError()
	}
	var l errs.List
	if p.Version != "2.0" {
		l = append(l, errs.NotSupported(errs.NewPath("version"), "P1", p.Version, []string{"2.0"}))
	}
	switch n := len(p.Statement); {
	case n == 0:
		l = append(l, errs.Required(errs.NewPath("statement"), "P2", "at least one statement"))
	case n > MaxStatements:
		l = append(l, errs.TooMany(errs.NewPath("statement"), "P2", n, MaxStatements))
	}
	for i := range p.Statement {
		if i == MaxStatements {
			break
		}
		l = append(l, p.Statement[i].validate(errs.NewPath("statement").Index(i))...)
	}
	return l.ToError()
}

func (s *Statement) validate(p errs.Path) errs.List {
	var l errs.List
	if s.Effect != Allow && s.Effect != Deny {
		l = append(l, errs.NotSupported(p.Child("effect"), "P3", s.Effect, []string{string(Allow), string(Deny)}))
	}
	if s.Principal != nil {
		pp := p.Child("principal")
		if len(s.Principal.User) == 0 && len(s.Principal.Group) == 0 {
			l = append(l, errs.Required(pp, "P4", "a user or a group (leave principal out for every user)"))
		}
		l = append(l, values(pp.Child("user"), "P4", s.Principal.User, false)...)
		l = append(l, values(pp.Child("group"), "P4", s.Principal.Group, false)...)
	}
	l = append(l, patterns(p.Child("action"), "P5", s.Action, "action", func(a string) string {
		if a != "*" && !strings.HasPrefix(a, "dlc:") {
			return `an action is "dlc:<Action>" or "*"`
		}
		if !slices.ContainsFunc(actions, func(x Action) bool { return glob(a, string(x)) }) {
			return "matches no action of the SDK (auth.Actions)"
		}
		return ""
	})...)
	l = append(l, patterns(p.Child("resource"), "P6", s.Resource, "resource", func(r string) string {
		if _, ok := parseResource(r); !ok {
			return `a resource is "*", "<kind>/<id>" or "resourcegroup/<rg>/<kind>/<id>" with a kind of auth.Kinds()`
		}
		return ""
	})...)
	cp := p.Child("condition")
	for _, op := range errs.SortedKeys(s.Condition) {
		keys := s.Condition[op]
		opp := cp.Key(op)
		switch op {
		case StringEqual, StringNotEqual, StringLike, StringNotLike:
		default:
			l = append(l, errs.NotSupported(opp, "P7", op, []string{StringEqual, StringNotEqual, StringLike, StringNotLike}))
			continue
		}
		if len(keys) == 0 {
			l = append(l, errs.Required(opp, "P7", "at least one key"))
		}
		if len(keys) > MaxEntries {
			l = append(l, errs.TooMany(opp, "P7", len(keys), MaxEntries))
			continue
		}
		for _, k := range errs.SortedKeys(keys) {
			kp := opp.Key(k)
			if !slices.Contains(ConditionKeys(), k) && (!strings.HasPrefix(k, KeyTagPrefix) || k == KeyTagPrefix || len(k) > MaxValueLen) {
				l = append(l, errs.NotSupported(kp, "P7", k, append(ConditionKeys(), KeyTagPrefix+"<tag key>")))
			}
			vs := keys[k]
			if len(vs) == 0 {
				l = append(l, errs.Required(kp, "P7", "at least one value"))
			}
			l = append(l, values(kp, "P7", vs, true)...)
			if op == StringLike || op == StringNotLike {
				for i, v := range vs {
					if i < MaxEntries && strings.Contains(v, UserVariable) {
						l = append(l, errs.Invalid(kp.Index(i), "P7", v, UserVariable+" is for string_equal and string_not_equal only"))
					}
				}
			}
		}
	}
	return l
}

// patterns checks a statement's list of patterns: at least one, within
// values' bounds, and each (empty ones reported by values) without the
// problem problem says ("": none).
func patterns(p errs.Path, rule string, vs []string, what string, problem func(string) string) errs.List {
	var l errs.List
	if len(vs) == 0 {
		l = append(l, errs.Required(p, rule, "at least one "+what))
	}
	l = append(l, values(p, rule, vs, false)...)
	for i, v := range vs {
		if i == MaxEntries {
			break
		}
		if v == "" {
			continue
		}
		if msg := problem(v); msg != "" {
			l = append(l, errs.Invalid(p.Index(i), rule, v, msg))
		}
	}
	return l
}

// values checks a list's bounds: at most MaxEntries, each non-empty (when
// emptyOK is false) and at most MaxValueLen bytes.
func values(p errs.Path, rule string, vs []string, emptyOK bool) errs.List {
	var l errs.List
	if len(vs) > MaxEntries {
		l = append(l, errs.TooMany(p, rule, len(vs), MaxEntries))
	}
	for i, v := range vs {
		if i == MaxEntries {
			break
		}
		switch {
		case v == "" && !emptyOK:
			l = append(l, errs.Required(p.Index(i), rule, "a value"))
		case len(v) > MaxValueLen:
			l = append(l, errs.TooLong(p.Index(i), rule, v, MaxValueLen))
		}
	}
	return l
}

// resourcePattern is a parsed resource of a statement.
type resourcePattern struct {
	all       bool   // "*"
	group     string // the resource group pattern; "" when not scoped by one
	kind, id  string
	groupForm bool // "resourcegroup/<rg>/<kind>/<id>"
}

func parseResource(s string) (resourcePattern, bool) {
	s = trimQCS(s)
	if s == "*" {
		return resourcePattern{all: true}, true
	}
	parts := strings.Split(s, "/")
	switch {
	case len(parts) == 2 && kindPattern(parts[0]) && parts[1] != "":
		return resourcePattern{kind: parts[0], id: parts[1]}, true
	case len(parts) == 4 && parts[0] == string(KindResourceGroup) && parts[1] != "" && kindPattern(parts[2]) && parts[3] != "":
		return resourcePattern{groupForm: true, group: parts[1], kind: parts[2], id: parts[3]}, true
	}
	return resourcePattern{}, false
}

// kindPattern reports whether k is a kind, or "*" for every kind.
func kindPattern(k string) bool { return k == "*" || validKind(k) }

func (p resourcePattern) matches(r Resource) bool {
	if p.all {
		return true
	}
	if p.groupForm && (r.ResourceGroup == "" || !glob(p.group, r.ResourceGroup)) {
		return false
	}
	return (p.kind == "*" || p.kind == string(r.Kind)) && glob(p.id, idOrStar(r.ID))
}

func idOrStar(id string) string {
	if id == "" {
		return "*"
	}
	return id
}

// PolicyAuthorizer is the Authorizer of a Policy.
type PolicyAuthorizer struct {
	statements []statement
}

type statement struct {
	effect     Effect
	everyone   bool
	users      []string
	groups     []string
	actions    []string
	resources  []resourcePattern
	conditions []condition
}

type condition struct {
	op     string
	key    string
	values []string
}

// NewPolicyAuthorizer validates p and returns its authorizer; it keeps
// no reference to p.
func NewPolicyAuthorizer(p *Policy) (*PolicyAuthorizer, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	a := &PolicyAuthorizer{}
	for _, s := range p.Statement {
		st := statement{effect: s.Effect, everyone: s.Principal == nil, actions: slices.Clone(s.Action)}
		if s.Principal != nil {
			st.users, st.groups = slices.Clone(s.Principal.User), slices.Clone(s.Principal.Group)
			st.everyone = slices.Contains(st.users, "*") || slices.Contains(st.groups, "*")
		}
		for _, r := range s.Resource {
			rp, _ := parseResource(r)
			st.resources = append(st.resources, rp)
		}
		for _, op := range errs.SortedKeys(s.Condition) {
			for _, k := range errs.SortedKeys(s.Condition[op]) {
				st.conditions = append(st.conditions, condition{op: op, key: k, values: slices.Clone(s.Condition[op][k])})
			}
		}
		a.statements = append(a.statements, st)
	}
	return a, nil
}

// Authorize allows a when a statement allows it and none denies it.
func (a *PolicyAuthorizer) Authorize(_ context.Context, u User, act Action, r Resource) error {
	allowed := false
	for i := range a.statements {
		s := &a.statements[i]
		if !s.matches(u, act, r) {
			continue
		}
		if s.effect == Deny {
			return Forbidden(u, act, r, fmt.Sprintf("denied by statement %d", i))
		}
		allowed = true
	}
	if !allowed {
		return Forbidden(u, act, r, "no statement allows it")
	}
	return nil
}

func (s *statement) matches(u User, act Action, r Resource) bool {
	if !s.everyone && !slices.Contains(s.users, u.Name) &&
		!slices.ContainsFunc(s.groups, func(g string) bool { return slices.Contains(u.Groups, g) }) {
		return false
	}
	if !slices.ContainsFunc(s.actions, func(p string) bool { return glob(p, string(act)) }) {
		return false
	}
	if !slices.ContainsFunc(s.resources, func(p resourcePattern) bool { return p.matches(r) }) {
		return false
	}
	for _, c := range s.conditions {
		if !c.holds(u, r) {
			return false
		}
	}
	return true
}

// holds evaluates one key of one operator: a positive operator holds when
// a value of the key matches one of its values, a negative one when none
// does (so it holds for a key the resource has no value of).
func (c condition) holds(u User, r Resource) bool {
	got := keyValues(c.key, r)
	like := c.op == StringLike || c.op == StringNotLike
	any := slices.ContainsFunc(got, func(g string) bool {
		return slices.ContainsFunc(c.values, func(v string) bool {
			if like {
				return glob(v, g)
			}
			return strings.ReplaceAll(v, UserVariable, u.Name) == g
		})
	})
	if c.op == StringNotEqual || c.op == StringNotLike {
		return !any
	}
	return any
}

// keyValues returns the values of a condition key for r.
func keyValues(key string, r Resource) []string {
	switch key {
	case KeyResourceTag:
		out := make([]string, 0, len(r.Tags))
		for _, k := range errs.SortedKeys(r.Tags) {
			out = append(out, k+"&"+r.Tags[k])
		}
		return out
	case KeyCreator:
		return nonEmpty(r.Creator)
	case KeyResourceGroup:
		return nonEmpty(r.ResourceGroup)
	case KeyClusterGroup:
		return r.ClusterGroups
	case KeyCluster:
		return nonEmpty(r.Cluster)
	}
	if tag, ok := strings.CutPrefix(key, KeyTagPrefix); ok {
		if v, ok := r.Tags[tag]; ok {
			return []string{v}
		}
	}
	return nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// glob matches s against a pattern in which "*" stands for any run of
// bytes (and nothing else is special), in time bounded by the product of
// their lengths.
func glob(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
