package group_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/internal/fieldtest"
)

// G5: a group name is required, at most 64 characters, and shown as it
// reads: no invisible-only names, no control or bidirectional characters.
func TestValidateNameG5(t *testing.T) {
	cases := []struct {
		name, in string
		bad      bool
	}{
		{"valid", "推荐-gpu 组", false},
		{"valid 64 characters", strings.Repeat("组", 64), false},
		{"required", "", true},
		{"blank", "  ", true},
		{"too long", strings.Repeat("组", 65), true},
		{"control", "a\tb", true},
		{"zero-width only", "\u200b", true},
		{"word joiner only", "\u2060\u2060", true},
		{"byte-order mark only", "\ufeff", true},
		{"bidi override", "gpu\u202e", true},
		{"bidi isolate", "\u2067gpu", true},
		{"Hangul filler only", "\u3164", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var wants []fieldtest.Want
			if tc.bad {
				wants = []fieldtest.Want{{"name", "G5"}}
			}
			fieldtest.Check(t, group.ValidateName(tc.in), wants)
		})
	}
}

// G3: a scheduling policy is one of the four; an order only with ordered
// failover, of at most MaxOrder well-formed cluster ids, each once.
func TestSchedulingValidateG3(t *testing.T) {
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("cls-%d", i)
		}
		return out
	}
	cases := []struct {
		name  string
		in    group.Scheduling
		wants []fieldtest.Want
	}{
		{"zero is random", group.Scheduling{}, nil},
		{"random", group.Scheduling{Policy: group.Random}, nil},
		{"least-loaded", group.Scheduling{Policy: group.LeastLoaded}, nil},
		{"most-free-quota", group.Scheduling{Policy: group.MostFreeQuota}, nil},
		{"ordered failover without an order", group.Scheduling{Policy: group.OrderedFailover}, nil},
		{"ordered failover with an order", group.Scheduling{Policy: group.OrderedFailover, Order: []string{"cls-b", "cls-a"}}, nil},
		{"ordered failover, MaxOrder ids", group.Scheduling{Policy: group.OrderedFailover, Order: ids(group.MaxOrder)}, nil},
		{"unknown policy", group.Scheduling{Policy: "round-robin"}, []fieldtest.Want{{"policy", "G3"}}},
		{"an order with another policy", group.Scheduling{Policy: group.LeastLoaded, Order: []string{"cls-a"}}, []fieldtest.Want{{"order", "G3"}}},
		{"an order with the default policy", group.Scheduling{Order: []string{"cls-a"}}, []fieldtest.Want{{"order", "G3"}}},
		{"too long", group.Scheduling{Policy: group.OrderedFailover, Order: ids(group.MaxOrder + 1)}, []fieldtest.Want{{"order", "G3"}}},
		{"duplicate", group.Scheduling{Policy: group.OrderedFailover, Order: []string{"cls-a", "cls-b", "cls-a"}}, []fieldtest.Want{{"order[2]", "G3"}}},
		{"malformed ids", group.Scheduling{Policy: group.OrderedFailover, Order: []string{"", "CLS_A", strings.Repeat("a", 64), "cls-ok"}},
			[]fieldtest.Want{{"order[0]", "G3"}, {"order[1]", "G3"}, {"order[2]", "G3"}}},
		{"every problem at once", group.Scheduling{Policy: "x", Order: []string{"a", "a"}}, []fieldtest.Want{{"policy", "G3"}, {"order", "G3"}, {"order[1]", "G3"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fieldtest.Check(t, tc.in.Validate(), tc.wants)
		})
	}
	fieldtest.Check(t, group.ValidatePolicy("x"), []fieldtest.Want{{"policy", "G3"}})
	for _, p := range group.Policies() {
		fieldtest.Check(t, group.ValidatePolicy(p), nil)
	}
}

// G3: a scheduling policy reads from YAML or JSON strictly: an unknown
// field or a value of the wrong shape is refused with its path.
func TestUnmarshalSchedulingYAMLG3(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want *group.Scheduling
		bad  []fieldtest.Want
	}{
		{"YAML", "policy: ordered-failover\norder: [cls-a, cls-b]\n",
			&group.Scheduling{Policy: group.OrderedFailover, Order: []string{"cls-a", "cls-b"}}, nil},
		{"JSON", `{"policy": "least-loaded"}`, &group.Scheduling{Policy: group.LeastLoaded}, nil},
		{"empty", "", &group.Scheduling{}, nil},
		{"unknown field", "policy: random\nfailover: [a]\n", nil, []fieldtest.Want{{"failover", ""}}},
		{"wrong shape", "order: cls-a\n", nil, []fieldtest.Want{{"order", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := group.UnmarshalSchedulingYAML([]byte(tc.in))
			if tc.bad != nil {
				if err == nil {
					t.Fatalf("decoded %+v, want an error", got)
				}
				fes := errs.Fields(err)
				if len(fes) != len(tc.bad) || string(fes[0].Path) != tc.bad[0][0] {
					t.Fatalf("problems %v, want at %v", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decoded %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestGroupSchedulingDefaultAndCopy(t *testing.T) {
	g := &group.Group{ID: "grp-1"}
	if s := g.Scheduling(); s.Policy != group.Random || s.Order != nil {
		t.Errorf("a group stored without a policy: %+v", s)
	}
	g = &group.Group{ID: "grp-1", Policy: group.OrderedFailover, Order: []string{"cls-a"}}
	c := g.DeepCopy()
	c.Order[0] = "cls-b"
	s := g.Scheduling()
	s.Order[0] = "cls-c"
	if g.Order[0] != "cls-a" {
		t.Errorf("a copy shares the order: %v", g.Order)
	}
}
