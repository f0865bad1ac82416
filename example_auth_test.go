package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/auth"
)

// A client that asks a policy who may do what: alice of the nlp team may
// do everything to what is tagged team=nlp, and nothing else.
func ExampleWithAuthorizer() {
	policyYAML := []byte(`
version: "2.0"
statement:
  - effect: allow
    principal: {group: [nlp]}
    action: ["dlc:*"]
    resource: ["*"]
    condition: {string_equal: {"qcs:resource_tag": ["team&nlp"]}}
`)
	// snippet authorizer
	p, err := auth.ParsePolicy(policyYAML) // every problem at once, with field paths (P1–P7)
	if err != nil {
		log.Fatal(err)
	}
	a, err := auth.NewPolicyAuthorizer(p)
	if err != nil {
		log.Fatal(err)
	}
	c, err := dlc.New(dlc.WithAuthorizer(a))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := auth.NewContext(context.Background(), auth.User{Name: "alice", Groups: []string{"nlp"}})
	_, err = c.Clusters().Start(ctx, "cls-1") // not tagged team=nlp (nor there at all)
	fmt.Println(errors.Is(err, dlc.ErrForbidden), err)
	// end snippet authorizer
	// Output: true forbidden: user "alice" may not dlc:StartCluster on cluster/cls-1: no statement allows it
}
