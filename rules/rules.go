// Package rules is the catalog of the product rules that dlc enforces:
// each has a stable ID (J… for job configurations, C… for compute
// clusters, G… for cluster groups), a one-line statement, and the places
// in this module that enforce it.
//
// dlc adds rules of its own: L… for the lifecycle automation (schedules,
// deadlines, retries, idle hibernation) and P… for the access policies
// of package auth.
//
// Every validation error carries the ID of the rule it breaks
// (the Rule of errs.FieldError); [Lookup] resolves it, and docs/rules.md, which
// is generated from this catalog (go generate ./rules), lists them all.
// The rules come from the two product documents of the managed Ray
// platform ("AI DLC") that dlc implements. A test of this package fails
// when the code emits a rule ID that is not here, when a place that emits
// one is not listed under it, when a listed place is not declared, and
// when no test names a rule.
package rules

import (
	"fmt"
	"slices"
	"strings"
)

// Area is the part of the product a rule belongs to.
type Area string

// The areas, in the order of the catalog.
const (
	Jobs          Area = "Jobs (job configurations)"
	Clusters      Area = "Clusters (compute clusters)"
	ClusterGroups Area = "Cluster groups"
	// Lifecycle is the rules dlc adds for runs and clusters that look
	// after themselves (L…).
	Lifecycle Area = "Lifecycle (rules dlc adds)"
	// Policies is the rules of an access policy of package auth (P…).
	Policies Area = "Access policies (package auth)"
)

// Rule is one product rule.
type Rule struct {
	// ID is the rule's stable identifier, such as "J5" or "C14".
	ID string
	// Area is the part of the product the rule belongs to.
	Area Area
	// Statement is the rule, in one line.
	Statement string
	// Enforced lists the declarations that enforce the rule, each as its
	// package's directory in the module ("dlc" for the root), then its
	// name, with its receiver's type for a method:
	// "job.Config.Problems", "internal/platform.JobService.Clone".
	Enforced []string
}

// Lookup returns the rule with id, and whether there is one.
func Lookup(id string) (Rule, bool) {
	i := slices.IndexFunc(catalog, func(r Rule) bool { return r.ID == id })
	if i < 0 {
		return Rule{}, false
	}
	return clone(catalog[i]), true
}

// All returns every rule, area by area (jobs, clusters, cluster groups,
// lifecycle, policies), each area by number.
func All() []Rule {
	out := make([]Rule, len(catalog))
	for i, r := range catalog {
		out[i] = clone(r)
	}
	return out
}

func clone(r Rule) Rule {
	r.Enforced = slices.Clone(r.Enforced)
	return r
}

// cell escapes a statement for a Markdown table cell.
var cell = strings.NewReplacer("|", "\\|", "<", "&lt;", ">", "&gt;")

// Markdown renders the catalog as docs/rules.md holds it.
func Markdown() []byte {
	var b strings.Builder
	b.WriteString("<!-- Generated from package rules (rules/catalog.go) by go generate ./rules; do not edit. -->\n\n")
	b.WriteString("# The product rules\n\n")
	b.WriteString("Every validation error of dlc carries the ID of the rule it breaks (`errs.FieldError.Rule`);\n")
	b.WriteString("`rules.Lookup(id)` resolves it in code. The rules come from the two product documents of the\n")
	b.WriteString("managed Ray platform dlc implements. \"Enforced by\" names the declarations that enforce each rule\n")
	b.WriteString("(package directory, then name); a test keeps the list true to the code.\n")
	var area Area
	for _, r := range catalog {
		if r.Area != area {
			area = r.Area
			fmt.Fprintf(&b, "\n## %s\n\n| ID | Rule | Enforced by |\n| --- | --- | --- |\n", area)
		}
		places := make([]string, len(r.Enforced))
		for i, p := range r.Enforced {
			places[i] = "`" + p + "`"
		}
		fmt.Fprintf(&b, "| <a id=\"%s\"></a>%s | %s | %s |\n", r.ID, r.ID, cell.Replace(r.Statement), strings.Join(places, ", "))
	}
	return []byte(b.String())
}
