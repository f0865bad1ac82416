package job

import (
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/storage"
	"time"
)

// Builder assembles a Config step by step; nothing is checked until Build,
// which returns the config together with every problem. The compute
// environment methods (Image, Head, WorkerGroup, ...) belong to on-demand
// mode: in the other modes the environment comes from the cluster (J8),
// and setting it is an error. A Builder is not safe for concurrent use;
// the Config it builds shares nothing with it.
type Builder struct {
	cfg        Config
	env        cluster.Environment
	envTouched bool
	priority   *int // nil: not set on the builder
	errs       errs.List
}

// NewBuilder starts a job config called name. dlc.NewJob is the same.
func NewBuilder(name string) *Builder { return &Builder{cfg: Config{Name: name}} }

// Edit starts a builder from a copy of an existing config.
func Edit(c *Config) *Builder {
	b := &Builder{cfg: *c.DeepCopy()}
	if b.cfg.OnDemand != nil {
		b.env = b.cfg.OnDemand.Environment
		b.priority = b.cfg.OnDemand.Priority
	}
	return b
}

// OnDemand selects on-demand mode: each run gets a temporary cluster from
// the resource group, queued by priority (J3).
func (b *Builder) OnDemand(resourcePackage, resourceGroup string) *Builder {
	b.cfg.OnDemand = &OnDemand{ResourcePackage: resourcePackage, ResourceGroup: resourceGroup}
	return b
}

// OnCluster selects existing-cluster mode: runs go to the cluster with
// this id.
func (b *Builder) OnCluster(clusterID string) *Builder { b.cfg.Cluster = clusterID; return b }

// OnGroup selects cluster-group mode: runs go to a member of the group
// with this id, picked by its policy.
func (b *Builder) OnGroup(groupID string) *Builder { b.cfg.Group = groupID; return b }

// Priority sets the on-demand queueing priority, 1–9 (J3). Any value is
// kept as given: 0 is refused at Build, not taken for the default.
func (b *Builder) Priority(p int) *Builder { b.priority = new(p); return b }

// FromTemplate starts the on-demand compute environment from a copy of a
// template (C6); later calls adjust the copy, never the template.
func (b *Builder) FromTemplate(t *cluster.Template) *Builder {
	b.env, b.envTouched = *t.Environment.DeepCopy(), true
	return b
}

// Image sets the on-demand image: a built-in name or a registry address (J7).
func (b *Builder) Image(image string) *Builder {
	b.env.Image, b.envTouched = image, true
	return b
}

// Head sets the on-demand head group (J7).
func (b *Builder) Head(name, nodeSpec string, opts ...cluster.NodeOption) *Builder {
	b.env.SetHead(name, nodeSpec, opts...)
	b.envTouched = true
	return b
}

// WorkerGroup adds an on-demand worker group with its instance range (J7).
func (b *Builder) WorkerGroup(name, nodeSpec string, min, max int, opts ...cluster.NodeOption) *Builder {
	b.env.AddWorkerGroup(name, nodeSpec, min, max, opts...)
	b.envTouched = true
	return b
}

// EditWorkerGroup changes the on-demand worker group called name.
func (b *Builder) EditWorkerGroup(name string, edit func(*cluster.WorkerGroup)) *Builder {
	if !b.env.EditWorkerGroup(name, edit) {
		b.errs = append(b.errs, cluster.NoSuchWorkerGroup(errs.NewPath("onDemand").Child("environment", "workerGroups"), name))
	}
	b.envTouched = true
	return b
}

// RemoveWorkerGroup removes the on-demand worker group called name.
func (b *Builder) RemoveWorkerGroup(name string) *Builder {
	b.env.RemoveWorkerGroup(name)
	b.envTouched = true
	return b
}

// Tag sets a tag (J4).
func (b *Builder) Tag(key, value string) *Builder {
	if b.cfg.Tags == nil {
		b.cfg.Tags = map[string]string{}
	}
	b.cfg.Tags[key] = value
	return b
}

// Package sets the job package (J5).
func (b *Builder) Package(p storage.Package) *Builder { b.cfg.Package = p; return b }

// LocalPackage sets a local ZIP file, at most 100 MB, as the package (J5).
func (b *Builder) LocalPackage(path string) *Builder { return b.Package(storage.LocalPackage(path)) }

// COSPackage sets a ZIP object in COS as the package (J5).
func (b *Builder) COSPackage(uri string) *Builder { return b.Package(storage.COSPackage(uri)) }

// Entrypoint sets the command that starts the job (J5).
func (b *Builder) Entrypoint(cmd string) *Builder { b.cfg.Entrypoint = cmd; return b }

// Mount adds a job-level storage mount (J9).
func (b *Builder) Mount(m storage.Mount) *Builder {
	b.cfg.Mounts = append(b.cfg.Mounts, m)
	return b
}

// Pip adds pip requirements to the runtime environment (J10).
func (b *Builder) Pip(requirements ...string) *Builder {
	b.cfg.Runtime.Pip = append(b.cfg.Runtime.Pip, requirements...)
	return b
}

// Conda adds conda dependencies to the runtime environment (J10).
func (b *Builder) Conda(dependencies ...string) *Builder {
	b.cfg.Runtime.Conda = append(b.cfg.Runtime.Conda, dependencies...)
	return b
}

// Env sets an environment variable of the job's processes (J10).
func (b *Builder) Env(name, value string) *Builder {
	if b.cfg.Runtime.EnvVars == nil {
		b.cfg.Runtime.EnvVars = map[string]string{}
	}
	b.cfg.Runtime.EnvVars[name] = value
	return b
}

// SecretEnv sets an environment variable of the job's processes whose
// value is key of the Secret named secret (whose name starts with
// cluster.SecretEnvPrefix); only the reference is stored and rendered. On
// demand only (J10): a run on an existing cluster or group gets Secrets
// from the cluster's own secretEnvVars (cluster.SecretEnv).
func (b *Builder) SecretEnv(name, secret, key string) *Builder {
	if b.cfg.Runtime.SecretEnv == nil {
		b.cfg.Runtime.SecretEnv = map[string]cluster.SecretKeyRef{}
	}
	b.cfg.Runtime.SecretEnv[name] = cluster.SecretKeyRef{Secret: secret, Key: key}
	return b
}

// Container sets the image the job's workers run in (J10), leaving the
// cluster's image as it is.
func (b *Builder) Container(image string) *Builder { b.cfg.Runtime.Container = image; return b }

// Advanced sets an advanced parameter (J11); platform-managed keys are
// refused.
func (b *Builder) Advanced(key, value string) *Builder {
	if b.cfg.Advanced == nil {
		b.cfg.Advanced = map[string]string{}
	}
	b.cfg.Advanced[key] = value
	return b
}

// Schedule starts a run at each tick of the cron expression (L1), read
// in UTC unless opts set a time zone; opts may also set the concurrency
// policy and the starting deadline.
func (b *Builder) Schedule(cron string, opts ...func(*Schedule)) *Builder {
	s := &Schedule{Cron: cron}
	for _, o := range opts {
		o(s)
	}
	b.cfg.Schedule = s
	return b
}

// InZone is a Schedule option: the expression is read in the IANA time
// zone tz, e.g. "Asia/Shanghai".
func InZone(tz string) func(*Schedule) { return func(s *Schedule) { s.TimeZone = tz } }

// Concurrency is a Schedule option: what a tick does while an earlier run
// has not ended.
func Concurrency(p ConcurrencyPolicy) func(*Schedule) {
	return func(s *Schedule) { s.ConcurrencyPolicy = p }
}

// StartingDeadline is a Schedule option: a tick missed by longer than d
// is skipped and recorded (whole seconds).
func StartingDeadline(d time.Duration) func(*Schedule) {
	return func(s *Schedule) { s.StartingDeadlineSeconds = new(int(d / time.Second)) }
}

// ActiveDeadline stops and fails a run still not ended d after its
// submission (L2); whole seconds.
func (b *Builder) ActiveDeadline(d time.Duration) *Builder {
	b.cfg.ActiveDeadlineSeconds = int(d / time.Second)
	return b
}

// Retries retries a failed run up to n times, each retry a new run (L3).
func (b *Builder) Retries(n int) *Builder { b.cfg.BackoffLimit = n; return b }

// Build returns a copy of the config and every problem with it, checked
// against the default catalogs.
func (b *Builder) Build() (*Config, error) { return b.BuildWith(cluster.Catalogs{}) }

// BuildWith is Build against the given catalogs.
func (b *Builder) BuildWith(cat cluster.Catalogs) (*Config, error) {
	l := append(errs.List{}, b.errs...)
	cfg := b.cfg.DeepCopy()
	if cfg.OnDemand != nil {
		switch {
		case b.priority != nil:
			cfg.OnDemand.Priority = new(*b.priority)
		case cfg.OnDemand.Priority == nil:
			cfg.OnDemand.Priority = new(DefaultPriority)
		}
		cfg.OnDemand.Environment = *b.env.DeepCopy()
	} else {
		if b.envTouched {
			l = append(l, errs.Forbidden(errs.NewPath("onDemand").Child("environment"), "J8",
				"existing-cluster and cluster-group runs take the image and node groups from the cluster; set them on the cluster, or choose on-demand mode"))
		}
		if b.priority != nil {
			l = append(l, errs.Forbidden(errs.NewPath("onDemand").Child("priority"), "J3",
				"a priority queues on-demand runs in their resource group; other modes have none"))
		}
	}
	l = append(l, cfg.Problems(cat)...)
	return cfg, l.ToError()
}
