package auth_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/errs"
)

// A platform's policy: the nlp team may do everything to what is tagged
// team=nlp, and nobody may delete a cluster someone else created.
func ExampleParsePolicy() {
	p, err := auth.ParsePolicy([]byte(`
version: "2.0"
statement:
  - effect: allow
    principal: {group: [nlp]}
    action: ["dlc:*"]
    resource: ["*"]
    condition:
      string_equal: {"qcs:resource_tag": ["team&nlp"]}
  - effect: deny
    action: ["dlc:DeleteCluster"]
    resource: ["cluster/*"]
    condition:
      string_not_equal: {"dlc:creator": ["${user}"]}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	a, _ := auth.NewPolicyAuthorizer(p)
	alice := auth.User{Name: "alice", Groups: []string{"nlp"}}
	cl := auth.Resource{Kind: auth.KindCluster, ID: "cls-1", Creator: "bob", Tags: map[string]string{"team": "nlp"}}
	fmt.Println(a.Authorize(context.Background(), alice, auth.StartCluster, cl))
	err = a.Authorize(context.Background(), alice, auth.DeleteCluster, cl)
	fmt.Println(errors.Is(err, errs.ErrForbidden), err)
	// Output:
	// <nil>
	// true forbidden: user "alice" may not dlc:DeleteCluster on cluster/cls-1: denied by statement 1
}

// A policy that breaks rules is refused with every problem at once.
func ExamplePolicy_Validate() {
	p := &auth.Policy{Version: "2.0", Statement: []auth.Statement{{Effect: "permit", Action: []string{"dlc:Launch"}}}}
	for _, fe := range errs.Fields(p.Validate()) {
		fmt.Println(fe.Path, fe.Rule)
	}
	// Output:
	// statement[0].effect P3
	// statement[0].action[0] P5
	// statement[0].resource P6
}
