package cluster

import (
	"fmt"
	"strings"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
)

// SecretEnvPrefix starts the name of every Secret an environment
// variable may come from: the platform's pods may read those Secrets and
// no others (the admission policy shipped in config/ enforces it).
const SecretEnvPrefix = "dlc-env-"

// SecretScope is how the name of every Secret a resource group's nodes may
// read begins: SecretEnvPrefix, the resource group's id and a dot
// ("dlc-env-rg-nlp.hf-token"). A resource group's id is a DNS label, which
// has no dot, so no group's scope is a prefix of another's: a cluster or an
// on-demand job may name only its own resource group's Secrets.
func SecretScope(resourceGroup string) string { return SecretEnvPrefix + resourceGroup + "." }

// secretScopeProblems reports each Secret of secret not in resource
// group rg's scope; names that are not Secret names at all are reported
// by EnvProblems.
func secretScopeProblems(p errs.Path, rule, rg string, secret map[string]SecretKeyRef) errs.List {
	var l errs.List
	for _, k := range errs.SortedKeys(secret) {
		name := secret[k].Secret
		if check.SecretName(p, rule, name, SecretEnvPrefix) == nil && !strings.HasPrefix(name, SecretScope(rg)) {
			l = append(l, scopeProblem(p.Child("secretEnvVars").Key(k).Child("secret"), rule, rg, name))
		}
	}
	return l
}

func scopeProblem(p errs.Path, rule, rg, name string) *errs.FieldError {
	return errs.Invalid(p, rule, name, fmt.Sprintf(
		"resource group %s's nodes read only its own Secrets, named %s<name>", rg, SecretScope(rg)))
}

// SecretScopeProblems reports every Secret the environment's node groups
// name outside resource group rg's scope (SecretScope), with the rule IDs
// in r; an empty or malformed rg is reported where it is set.
func (e *Environment) SecretScopeProblems(rg string, r Rules) errs.List {
	if !check.IsID(rg) {
		return nil
	}
	l := secretScopeProblems(errs.NewPath("headGroup"), r.Head, rg, e.Head.SecretEnv)
	for i := range e.Workers {
		l = append(l, secretScopeProblems(errs.NewPath("workerGroups").Index(i), r.Workers, rg, e.Workers[i].SecretEnv)...)
	}
	return l
}

// RuntimeSecretScopeProblems reports every Secret of a runtime
// environment's secretEnvVars (at p) outside resource group rg's scope.
func RuntimeSecretScopeProblems(p errs.Path, rule, rg string, secret map[string]SecretKeyRef) errs.List {
	if !check.IsID(rg) {
		return nil
	}
	return secretScopeProblems(p, rule, rg, secret)
}

// SecretKeyRef names a key of a Kubernetes Secret, in the platform's
// namespace, whose value becomes an environment variable's. Only the
// reference is stored and rendered; the value stays in the Secret, and
// Kubernetes gives it to the container when it starts.
type SecretKeyRef struct {
	Secret string `json:"secret"` // the Secret's name; starts with SecretEnvPrefix
	Key    string `json:"key"`    // the key in the Secret
}

// EnvProblems checks a node group's or a runtime environment's variables:
// plain ones (envVars, at p.Child("envVars")) and ones from Secrets
// (secretEnvVars), a name in at most one of them, and their bounds
// together (check.MaxEnvVars variables, check.MaxEnvBytes bytes).
func EnvProblems(p errs.Path, rule string, env map[string]string, secret map[string]SecretKeyRef) errs.List {
	ep, sp := p.Child("envVars"), p.Child("secretEnvVars")
	l, size := check.EnvVars(ep, rule, env)
	for _, k := range errs.SortedKeys(secret) {
		ref, kp := secret[k], sp.Key(k)
		size += len(k) + len(ref.Secret) + len(ref.Key)
		l = append(l, check.EnvName(kp, rule, k)...)
		if _, dup := env[k]; dup {
			l = append(l, &errs.FieldError{Path: kp, Rule: rule, Type: errs.TypeDuplicate, BadValue: k,
				Detail: "a variable is set in envVars or in secretEnvVars, not both"})
		}
		l = append(l, check.SecretName(kp.Child("secret"), rule, ref.Secret, SecretEnvPrefix)...)
		l = append(l, check.SecretKey(kp.Child("key"), rule, ref.Key)...)
	}
	at := ep
	if len(env) == 0 && len(secret) > 0 {
		at = sp
	}
	return append(l, check.EnvTotals(at, rule, len(env)+len(secret), size)...)
}
