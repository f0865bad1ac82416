package cluster

import (
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
)

// SecretEnvPrefix starts the name of every Secret an environment
// variable may come from: the platform's pods may read those Secrets and
// no others (the admission policy shipped in config/ enforces it).
const SecretEnvPrefix = "dlc-env-"

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
