// Package job models job configurations: the Config a caller builds (by
// hand, from YAML, or with the Builder that dlc.NewJob returns), its three
// run modes (J2), its validation against every rule a config alone can
// break (J1–J11), and runs with their states and waiting reasons.
//
// It does no I/O.
package job

import (
	"maps"
	"slices"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/internal/codec"
	"github.com/aidlc/dlc/storage"
)

// Limits of a job config.
const (
	MaxNameLen       = 100  // J1, in characters
	MaxEntrypointLen = 4096 // bytes
	MaxDependencies  = 64   // pip or conda entries of a runtime environment (J10)
	MaxDependencyLen = 256  // bytes in one pip or conda entry
	DefaultPriority  = 5    // J3
)

// Limits of a config document, as UnmarshalYAML reads it: a larger
// document is refused with an error that is errors.Is errs.ErrInvalid and
// names the limit.
const (
	MaxDocumentSize  = codec.MaxDocumentSize // bytes (1 MiB)
	MaxDocumentNodes = codec.MaxNodes        // YAML nodes
)

// Mode is how a job's runs find a Ray cluster (J2).
type Mode string

// The run modes.
const (
	// OnDemandMode creates a temporary cluster for each run, released when
	// the run ends.
	OnDemandMode Mode = "onDemand"
	// ClusterMode runs on one named, existing cluster.
	ClusterMode Mode = "cluster"
	// GroupMode runs on a member of a cluster group, picked by the group's
	// scheduling policy.
	GroupMode Mode = "group"
)

// Config is a job configuration. It is a plain value: fill it by hand or
// decode it from YAML or JSON, then call Validate. Exactly one of
// OnDemand, Cluster and Group is set (J2).
type Config struct {
	Name string `json:"name"`

	OnDemand *OnDemand `json:"onDemand,omitempty"` // on-demand mode (J3, J7)
	Cluster  string    `json:"cluster,omitempty"`  // existing-cluster mode: the cluster's id
	Group    string    `json:"group,omitempty"`    // cluster-group mode: the group's id

	Tags       map[string]string `json:"tags,omitempty"` // J4
	Package    storage.Package   `json:"package"`        // J5
	Entrypoint string            `json:"entrypoint"`     // J5, e.g. "python main.py --config config.yaml"
	Mounts     []storage.Mount   `json:"mounts,omitempty"`
	Runtime    RuntimeEnv        `json:"runtimeEnv,omitzero"`
	Advanced   map[string]string `json:"advanced,omitempty"` // J11

	// Schedule, when set, starts a run of the config at each of its ticks
	// (L1). Runs can still be started by hand.
	Schedule *Schedule `json:"schedule,omitempty"`
	// ActiveDeadlineSeconds, when not 0, is how long a run may take from
	// its submission (a retry: from when it may start) before it is
	// stopped and failed with "deadline exceeded" (L2). A run failed so
	// is not retried.
	ActiveDeadlineSeconds int `json:"activeDeadlineSeconds,omitempty"`
	// BackoffLimit is how many times a failed run is retried, each retry a
	// new run (an attempt) after a backoff (RetryBackoff) (L3). A stopped
	// run is not retried, nor one whose failure a retry would meet again
	// (its cluster, group or config gone, its deadline passed).
	BackoffLimit int `json:"backoffLimit,omitempty"`
}

// OnDemand is the on-demand run mode: a temporary cluster drawn from a
// resource group, queued there by priority (J3), with its own compute
// environment (J7). A nil Priority means the default, 5; an explicit
// value is checked as given, so 0 is refused (J3).
type OnDemand struct {
	ResourcePackage string              `json:"resourcePackage"`
	ResourceGroup   string              `json:"resourceGroup"`
	Priority        *int                `json:"priority,omitempty"` // 1–9; nil: DefaultPriority. Set it with new(7).
	Environment     cluster.Environment `json:"environment"`
}

// RuntimeEnv is a run's Ray runtime environment (J10): dependencies,
// environment variables and a container image, without changing the
// cluster's image. Pip and Conda exclude each other, and a container
// excludes both, as in Ray. A container image is for on-demand runs only:
// their cluster is the run's own and runs it on every node
// (Config.RunEnvironment); Ray takes a job's image_uri only without a
// working_dir, so a run on an existing cluster cannot bring its package
// into one.
type RuntimeEnv struct {
	Pip     []string          `json:"pip,omitempty"`     // pip requirements, e.g. "torch>=2.0"
	Conda   []string          `json:"conda,omitempty"`   // conda dependencies
	EnvVars map[string]string `json:"envVars,omitempty"` // environment variables of the job's processes
	// SecretEnv are environment variables whose value is a key of a
	// Secret (on-demand runs only: a run on an existing cluster or group
	// gets Secrets from the cluster's own secretEnvVars).
	SecretEnv map[string]cluster.SecretKeyRef `json:"secretEnvVars,omitempty"`
	Container string                          `json:"container,omitempty"` // an image an on-demand run's cluster runs on every node, in place of its environment's image
}

// IsZero reports whether nothing is set.
func (r RuntimeEnv) IsZero() bool {
	return len(r.Pip) == 0 && len(r.Conda) == 0 && len(r.EnvVars) == 0 && len(r.SecretEnv) == 0 && r.Container == ""
}

// Mode returns the run mode that is set, or "" when none or several are.
func (c *Config) Mode() Mode {
	var m Mode
	n := 0
	if c.OnDemand != nil {
		m, n = OnDemandMode, n+1
	}
	if c.Cluster != "" {
		m, n = ClusterMode, n+1
	}
	if c.Group != "" {
		m, n = GroupMode, n+1
	}
	if n != 1 {
		return ""
	}
	return m
}

// Target returns what the run mode points at: the resource group
// (on-demand), the cluster id or the group id.
func (c *Config) Target() string {
	switch c.Mode() {
	case OnDemandMode:
		return c.OnDemand.ResourceGroup
	case ClusterMode:
		return c.Cluster
	case GroupMode:
		return c.Group
	}
	return ""
}

// Priority returns the queueing priority: the on-demand priority with its
// default filled in, or the default for other modes.
func (c *Config) Priority() int {
	if c.OnDemand != nil {
		return c.OnDemand.EffectivePriority()
	}
	return DefaultPriority
}

// EffectivePriority returns the priority, or DefaultPriority when it is
// unset (nil).
func (o *OnDemand) EffectivePriority() int {
	if o.Priority == nil {
		return DefaultPriority
	}
	return *o.Priority
}

// RunEnvironment returns a deep copy of the environment an on-demand
// run's cluster runs: its OnDemand.Environment, every node on the
// runtime environment's container image when it names one (Ray cannot
// take a package into a job's image_uri: the image is the cluster's). The
// zero Environment for a run on an existing cluster or group.
func (c *Config) RunEnvironment() cluster.Environment {
	if c.OnDemand == nil {
		return cluster.Environment{}
	}
	env := c.OnDemand.Environment.DeepCopy()
	if c.Runtime.Container != "" {
		env.Image = c.Runtime.Container
	}
	return *env
}

// DeepCopy returns a copy of c that shares nothing with it.
func (c *Config) DeepCopy() *Config {
	if c == nil {
		return nil
	}
	out := *c
	if c.OnDemand != nil {
		od := *c.OnDemand
		if od.Priority != nil {
			od.Priority = new(*od.Priority)
		}
		od.Environment = *c.OnDemand.Environment.DeepCopy()
		out.OnDemand = &od
	}
	out.Tags = maps.Clone(c.Tags)
	out.Mounts = slices.Clone(c.Mounts)
	out.Runtime = RuntimeEnv{
		Pip: slices.Clone(c.Runtime.Pip), Conda: slices.Clone(c.Runtime.Conda),
		EnvVars: maps.Clone(c.Runtime.EnvVars), SecretEnv: maps.Clone(c.Runtime.SecretEnv), Container: c.Runtime.Container,
	}
	out.Advanced = maps.Clone(c.Advanced)
	out.Schedule = c.Schedule.DeepCopy()
	return &out
}

// MarshalYAML returns the config as YAML.
func (c *Config) MarshalYAML() ([]byte, error) { return codec.MarshalYAML(c) }

// UnmarshalYAML decodes YAML (or JSON) into a Config strictly: an unknown
// field is an error naming the field and its line. A document over
// MaxDocumentSize bytes or MaxDocumentNodes nodes is refused unread.
func UnmarshalYAML(data []byte) (*Config, error) { return codec.Decode[Config](data) }
