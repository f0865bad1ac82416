package job

import (
	"strings"

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
	l = append(l, check.Advanced(errs.NewPath("advanced"), "J11", -1, c.Advanced)...)
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
	return l
}

func (r RuntimeEnv) problems(p errs.Path) errs.List {
	var l errs.List
	for i, req := range r.Pip {
		if strings.TrimSpace(req) == "" || strings.ContainsAny(req, "\x00\r\n") {
			l = append(l, errs.Invalid(p.Child("pip").Index(i), "J10", req, "one pip requirement per entry, not empty"))
		}
	}
	for i, dep := range r.Conda {
		if strings.TrimSpace(dep) == "" || strings.ContainsAny(dep, "\x00\r\n") {
			l = append(l, errs.Invalid(p.Child("conda").Index(i), "J10", dep, "one conda dependency per entry, not empty"))
		}
	}
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
	l = append(l, check.EnvVars(p.Child("envVars"), "J10", r.EnvVars)...)
	return l
}
