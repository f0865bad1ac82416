package job

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
	"github.com/aidlc/dlc/storage"
)

// Validate checks the config against every rule a config alone can break
// (J1–J11), with the default catalogs, and returns every problem at once
// (nil when valid). errs.Fields(err) lists them.
func (c *Config) Validate() error { return c.ValidateWith(cluster.Catalogs{}) }

// ValidateWith is Validate with the given catalogs.
func (c *Config) ValidateWith(cat cluster.Catalogs) error { return c.Problems(cat).ToError() }

// Problems returns the config's problems as a list.
func (c *Config) Problems(cat cluster.Catalogs) errs.List {
	var l errs.List
	l = append(l, check.Name(errs.NewPath("name"), "J1", "job config", c.Name, MaxNameLen)...)
	l = append(l, c.modeProblems(cat)...)
	l = append(l, check.Tags(errs.NewPath("tags"), "J4", c.Tags)...)
	l = append(l, c.Package.Validate(errs.NewPath("package"))...)
	ep := errs.NewPath("entrypoint")
	switch {
	case strings.TrimSpace(c.Entrypoint) == "":
		l = append(l, errs.Required(ep, "J5", "the command that starts the job, e.g. python main.py --config config.yaml"))
	case len(c.Entrypoint) > MaxEntrypointLen:
		l = append(l, errs.TooLong(ep, "J5", c.Entrypoint, MaxEntrypointLen))
	case strings.ContainsAny(c.Entrypoint, "\x00\r\n"):
		l = append(l, errs.Invalid(ep, "J5", c.Entrypoint, "the entrypoint is one line"))
	}
	l = append(l, storage.ValidateMounts(errs.NewPath("mounts"), "J9", c.Mounts)...)
	l = append(l, c.Runtime.problems(errs.NewPath("runtimeEnv"))...)
	if c.OnDemand != nil {
		l = append(l, cluster.RuntimeSecretScopeProblems(errs.NewPath("runtimeEnv"), "J10", c.OnDemand.ResourceGroup, c.Runtime.SecretEnv)...)
	}
	if od := c.OnDemand; od != nil {
		// The run's variables from Secrets go on every Ray container, beside
		// the node groups' own.
		for _, k := range errs.SortedKeys(c.Runtime.SecretEnv) {
			if g, ok := od.Environment.GroupSetting(k); ok {
				l = append(l, errs.Invalid(errs.NewPath("runtimeEnv").Child("secretEnvVars").Key(k), "J10", k,
					"node group "+g+" of the on-demand environment sets this variable too; set it in one place"))
			}
		}
	}
	l = append(l, c.SubmitProblems()...)
	if c.OnDemand == nil && len(c.Runtime.SecretEnv) > 0 {
		l = append(l, errs.Forbidden(errs.NewPath("runtimeEnv").Child("secretEnvVars"), "J10",
			"only an on-demand run takes variables from Secrets: a run on an existing cluster or cluster group is submitted to the cluster's Ray Jobs API, which cannot read Secrets; set secretEnvVars on the cluster's node groups instead, and the run inherits them"))
	}
	l = append(l, check.Advanced(errs.NewPath("advanced"), "J11", -1, c.Advanced)...)
	if c.Schedule != nil {
		l = append(l, c.Schedule.problems(errs.NewPath("schedule"))...)
	}
	if d := c.ActiveDeadlineSeconds; d < 0 || d > MaxActiveDeadline {
		l = append(l, errs.Invalid(errs.NewPath("activeDeadlineSeconds"), "L2", d,
			fmt.Sprintf("must be 0 (no deadline) to %d seconds", MaxActiveDeadline)))
	}
	if n := c.BackoffLimit; n < 0 || n > MaxBackoffLimit {
		l = append(l, errs.Invalid(errs.NewPath("backoffLimit"), "L3", n, fmt.Sprintf("must be 0 to %d retries", MaxBackoffLimit)))
	}
	return l
}

func (c *Config) modeProblems(cat cluster.Catalogs) errs.List {
	var set []string
	if c.OnDemand != nil {
		set = append(set, "onDemand")
	}
	if c.Cluster != "" {
		set = append(set, "cluster")
	}
	if c.Group != "" {
		set = append(set, "group")
	}
	switch len(set) {
	case 0:
		return errs.List{errs.Required(errs.NewPath("runMode"), "J2", "a run mode: one of onDemand, cluster (an existing cluster's id) or group (a cluster group's id)")}
	case 1:
	default:
		return errs.List{errs.Invalid(errs.Path(set[1]), "J2", strings.Join(set, " and "), "set exactly one run mode")}
	}
	od := c.OnDemand
	if od == nil {
		// The cluster's or group's id.
		if c.Cluster != "" {
			return check.ID(errs.NewPath("cluster"), "J2", "cluster", c.Cluster)
		}
		return check.ID(errs.NewPath("group"), "J2", "cluster group", c.Group)
	}
	p := errs.NewPath("onDemand")
	var l errs.List
	if od.ResourcePackage == "" {
		l = append(l, errs.Required(p.Child("resourcePackage"), "J3", "the resource package the run draws from"))
	} else {
		l = append(l, check.ID(p.Child("resourcePackage"), "J3", "resource package", od.ResourcePackage)...)
	}
	if od.ResourceGroup == "" {
		l = append(l, errs.Required(p.Child("resourceGroup"), "J3", "the resource group the run queues in"))
	} else {
		l = append(l, check.ID(p.Child("resourceGroup"), "J3", "resource group", od.ResourceGroup)...)
	}
	l = append(l, check.Priority(p.Child("priority"), "J3", od.Priority)...)
	l = append(l, od.Environment.Problems(cat, cluster.JobRules).Prefix(p.Child("environment"))...)
	l = append(l, od.Environment.SecretScopeProblems(od.ResourceGroup, cluster.JobRules).Prefix(p.Child("environment"))...)
	return l
}

func (r RuntimeEnv) problems(p errs.Path) errs.List {
	var l errs.List
	l = append(l, dependencyProblems(p.Child("pip"), r.Pip, "one pip requirement per entry, not empty")...)
	l = append(l, dependencyProblems(p.Child("conda"), r.Conda, "one conda dependency per entry, not empty")...)
	if len(r.Pip) > 0 && len(r.Conda) > 0 {
		l = append(l, errs.Invalid(p.Child("conda"), "J10", strings.Join(r.Conda, ","), "Ray takes pip or conda dependencies, not both; list pip packages under conda's pip instead"))
	}
	if r.Container != "" {
		if msg := check.ImageRefProblem(r.Container); msg != "" {
			l = append(l, errs.Invalid(p.Child("container"), "J10", r.Container, msg))
		}
		if len(r.Pip) > 0 || len(r.Conda) > 0 {
			l = append(l, errs.Invalid(p.Child("container"), "J10", r.Container, "a container image carries its own dependencies; Ray does not combine it with pip or conda"))
		}
	}
	l = append(l, cluster.EnvProblems(p, "J10", r.EnvVars, r.SecretEnv)...)
	return l
}

// dependencyProblems checks a pip or conda list: at most MaxDependencies
// entries of at most MaxDependencyLen bytes, each one line, not empty.
func dependencyProblems(p errs.Path, deps []string, what string) errs.List {
	var l errs.List
	if len(deps) > MaxDependencies {
		l = append(l, errs.TooMany(p, "J10", len(deps), MaxDependencies))
		deps = deps[:MaxDependencies] // and the first ones checked
	}
	for i, d := range deps {
		switch {
		case len(d) > MaxDependencyLen:
			l = append(l, errs.TooLong(p.Index(i), "J10", d, MaxDependencyLen))
		case strings.TrimSpace(d) == "" || strings.ContainsAny(d, "\x00\r\n") || !utf8.ValidString(d):
			l = append(l, errs.Invalid(p.Index(i), "J10", d, what))
		}
	}
	return l
}

// SubmitProblems returns what Ray's Jobs API would refuse of a run of c
// submitted to an existing cluster (a backend checks it again before it
// submits a run whose config was stored before the rule): a container
// image, which Ray takes (as image_uri) only with config and env_vars
// (runtime_env.py, RuntimeEnv), never beside the working_dir that carries
// the job's package (J5). Nil for an on-demand run, whose container is
// its cluster's image (RunEnvironment).
func (c *Config) SubmitProblems() errs.List {
	if c.OnDemand != nil || c.Runtime.Container == "" {
		return nil
	}
	return errs.List{errs.Forbidden(errs.NewPath("runtimeEnv").Child("container"), "J10",
		"a run on an existing cluster or cluster group cannot run in a container image of its own: Ray takes image_uri only with config and env_vars (runtime_env.py, RuntimeEnv), never beside the working_dir that carries the job's package (J5); use an on-demand run, whose cluster runs the image")}
}
