package auth_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/errs"
)

const teams = `
version: "2.0"
statement:
  - effect: allow
    principal: {group: [nlp]}
    action: ["dlc:*"]
    resource: ["*"]
    condition:
      string_equal: {"qcs:resource_tag": ["team&nlp"]}
  - effect: allow
    principal: {group: [nlp]}
    action: ["dlc:Create*", "dlc:RunJob"]
    resource: ["resourcegroup/rg-nlp/*/*"]
  - effect: allow
    action: ["dlc:Describe*"]
    resource: ["resourcegroup/*/*/*"]
  - effect: deny
    action: ["dlc:DeleteCluster", "dlc:HibernateCluster"]
    resource: ["resourcegroup/rg-*/cluster/*"]
    condition:
      string_not_equal: {"dlc:creator": ["${user}"]}
  - effect: allow
    principal: {user: [ops]}
    action: ["dlc:StartCluster"]
    resource: ["qcs::dlc:::cluster/cls-*"]
    condition:
      string_like: {"dlc:tag/env": ["prod-*"]}
  - effect: deny
    principal: {user: [mallory]}
    action: ["*"]
    resource: ["*"]
`

func TestPolicyAuthorizer(t *testing.T) {
	p, err := auth.ParsePolicy([]byte(teams))
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewPolicyAuthorizer(p)
	if err != nil {
		t.Fatal(err)
	}
	alice := auth.User{Name: "alice", Groups: []string{"nlp"}}
	bob := auth.User{Name: "bob", Groups: []string{"cv"}}
	nlpCluster := auth.Resource{Kind: auth.KindCluster, ID: "cls-1", ResourceGroup: "rg-nlp", Creator: "alice",
		Tags: map[string]string{"team": "nlp"}}
	cvCluster := auth.Resource{Kind: auth.KindCluster, ID: "cls-2", ResourceGroup: "rg-cv", Creator: "bob",
		Tags: map[string]string{"team": "cv", "env": "prod-1"}}
	byCarol := nlpCluster
	byCarol.Creator = "carol"
	newInNLP := auth.Resource{Kind: auth.KindCluster, ResourceGroup: "rg-nlp", Creator: "alice"}
	newInCV := auth.Resource{Kind: auth.KindCluster, ResourceGroup: "rg-cv", Creator: "alice"}
	for _, tc := range []struct {
		name   string
		u      auth.User
		act    auth.Action
		r      auth.Resource
		allow  bool
		reason string
	}{
		{"a tag condition allows the team", alice, auth.StartCluster, nlpCluster, true, ""},
		{"another team's tag does not", alice, auth.StartCluster, cvCluster, false, "no statement allows it"},
		{"a user in no named group gets nothing but describe", bob, auth.StartCluster, nlpCluster, false, "no statement allows it"},
		{"everyone may describe what has a resource group", bob, auth.DescribeCluster, nlpCluster, true, ""},
		{"describe needs the resource group scope", bob, auth.DescribeGroup, auth.Resource{Kind: auth.KindGroup, ID: "grp-1"}, false, "no statement allows it"},
		{"create in its own resource group", alice, auth.CreateCluster, newInNLP, true, ""},
		{"create elsewhere is refused", alice, auth.CreateCluster, newInCV, false, "no statement allows it"},
		{"deny wins over a tag allow (creator condition)", alice, auth.DeleteCluster, byCarol, false, "denied by statement 3"},
		{"the creator may delete", alice, auth.DeleteCluster, nlpCluster, true, ""},
		{"string_like on a tag for one user", auth.User{Name: "ops"}, auth.StartCluster, cvCluster, true, ""},
		{"string_like fails on another tag value", auth.User{Name: "ops"}, auth.StartCluster,
			auth.Resource{Kind: auth.KindCluster, ID: "cls-3", Tags: map[string]string{"env": "dev"}}, false, "no statement allows it"},
		{"the resource pattern bounds the id", auth.User{Name: "ops"}, auth.StartCluster,
			auth.Resource{Kind: auth.KindCluster, ID: "other", Tags: map[string]string{"env": "prod-1"}}, false, "no statement allows it"},
		{"deny everything for one user", auth.User{Name: "mallory", Groups: []string{"nlp"}}, auth.DescribeCluster, nlpCluster, false, "denied by statement 5"},
		{"a missing object is its kind and id alone", alice, auth.DescribeCluster, auth.Resource{Kind: auth.KindCluster, ID: "cls-9"}, false, "no statement allows it"},
		{"anonymous gets nothing but describe", auth.User{Name: auth.Anonymous}, auth.CreateJob, auth.Resource{Kind: auth.KindJob, ResourceGroup: "rg-nlp"}, false, "no statement allows it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := a.Authorize(context.Background(), tc.u, tc.act, tc.r)
			if tc.allow {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *errs.ForbiddenError
			if !errors.Is(err, errs.ErrForbidden) || !errors.As(err, &fe) {
				t.Fatalf("got %v, want ErrForbidden", err)
			}
			if fe.Action != string(tc.act) || fe.Resource != tc.r.Name() || fe.User != tc.u.Name || fe.Reason != tc.reason {
				t.Fatalf("got %+v", fe)
			}
			for _, leak := range []string{"team", "rg-", "alice"} {
				if tc.u.Name != leak && strings.Contains(err.Error(), leak) {
					t.Fatalf("the refusal %q tells %q, which the caller may not read", err, leak)
				}
			}
		})
	}
}

func TestPolicyInvalid(t *testing.T) {
	long := strings.Repeat("x", auth.MaxValueLen+1)
	for _, tc := range []struct {
		name string
		doc  string
		want []string // "path rule", every problem
	}{
		{"empty", `version: "2.0"`, []string{"statement P2"}},
		{"every problem at once", `
version: "1.0"
statement:
  - effect: permit
    principal: {}
    action: ["cvm:RunInstances", "dlc:NoSuchThing", ""]
    resource: ["bucket/x", "cluster/", "resourcegroup/rg/cluster"]
    condition:
      string_equals: {"dlc:creator": ["a"]}
      string_like: {"dlc:owner": ["${user}"], "dlc:tag/": []}
`, []string{
			"version P1",
			"statement[0].effect P3",
			"statement[0].principal P4",
			"statement[0].action[2] P5",
			"statement[0].action[0] P5",
			"statement[0].action[1] P5",
			"statement[0].resource[0] P6",
			"statement[0].resource[1] P6",
			"statement[0].resource[2] P6",
			"statement[0].condition[string_equals] P7",
			"statement[0].condition[string_like][dlc:owner] P7",
			"statement[0].condition[string_like][dlc:owner][0] P7",
			"statement[0].condition[string_like][dlc:tag/] P7",
			"statement[0].condition[string_like][dlc:tag/] P7",
		}},
		{"no action or resource", `
version: "2.0"
statement:
  - effect: allow
    principal: {user: ["` + long + `"]}
`, []string{"statement[0].principal.user[0] P4", "statement[0].action P5", "statement[0].resource P6"}},
		{"unknown field", `
version: "2.0"
statement:
  - effect: allow
    action: ["*"]
    resource: ["*"]
    resources: ["*"]
`, []string{"statement[0].resources "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := auth.ParsePolicy([]byte(tc.doc))
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			var got []string
			for _, fe := range errs.Fields(err) {
				got = append(got, fe.Path.String()+" "+fe.Rule)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s\n(%v)", strings.Join(got, "\n"), strings.Join(tc.want, "\n"), err)
			}
		})
	}
	if _, err := auth.NewPolicyAuthorizer(nil); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("nil policy: %v", err)
	}
}

func TestPolicyBoundedOnHostilePatterns(t *testing.T) {
	// A pattern of many stars against a long id is decided by the linear
	// matcher, not by backtracking (a wrong matcher takes exponential time).
	pat := "cluster/" + strings.Repeat("*a", 100) + "b"
	p := &auth.Policy{Version: "2.0", Statement: []auth.Statement{{Effect: auth.Allow, Action: []string{"*"}, Resource: []string{pat}}}}
	a, err := auth.NewPolicyAuthorizer(p)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("a", 200)
	if err := a.Authorize(context.Background(), auth.User{Name: "u"}, auth.DescribeCluster, auth.Resource{Kind: auth.KindCluster, ID: id}); !errors.Is(err, errs.ErrForbidden) {
		t.Fatal(err)
	}
}

func TestUserContext(t *testing.T) {
	ctx := context.Background()
	if u := auth.FromContext(ctx); u.Name != auth.Anonymous || len(u.Groups) != 0 {
		t.Fatalf("got %+v", u)
	}
	groups := []string{"nlp"}
	ctx = auth.NewContext(ctx, auth.User{Name: "alice", Groups: groups})
	groups[0] = "admin"
	if u := auth.FromContext(ctx); u.Name != "alice" || u.Groups[0] != "nlp" {
		t.Fatalf("got %+v: the context shares the caller's slice", u)
	}
}

// The policy docs/security.md shows is a valid policy, and does what it
// says.
func TestDocsPolicy(t *testing.T) {
	b, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## Permission control")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no yaml block under Permission control in docs/security.md")
	}
	p, err := auth.ParsePolicy([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := auth.NewPolicyAuthorizer(p)
	nlp := auth.User{Name: "alice", Groups: []string{"nlp"}}
	ctx := context.Background()
	if err := a.Authorize(ctx, nlp, auth.CreateCluster, auth.Resource{Kind: auth.KindCluster, ResourceGroup: "rg-nlp", Creator: "alice"}); err != nil {
		t.Error(err)
	}
	tagged := auth.Resource{Kind: auth.KindCluster, ID: "cls-1", Creator: "bob", Tags: map[string]string{"team": "nlp"}}
	if err := a.Authorize(ctx, nlp, auth.StartCluster, tagged); err != nil {
		t.Error(err)
	}
	if err := a.Authorize(ctx, nlp, auth.DeleteCluster, tagged); !errors.Is(err, errs.ErrForbidden) {
		t.Errorf("delete of bob's cluster: %v", err)
	}
}
