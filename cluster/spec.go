// Package cluster models compute clusters: the Spec a caller builds (by
// hand, from YAML, or with the Builder that dlc.NewCluster returns), its
// validation against every product rule (C1–C10, J7), compute-environment
// templates (C6), the image catalog, and the lifecycle states with the
// operations each allows (C11, C12).
//
// It does no I/O.
package cluster

import (
	"maps"
	"slices"
	"time"

	"github.com/aidlc/dlc/internal/codec"
	"github.com/aidlc/dlc/storage"
)

// Limits of a cluster spec.
const (
	MaxNameLen         = 64   // C1, in characters
	MaxTemplateNameLen = 100  // C6, in characters
	MinWorkerGroups    = 1    // C8, J7
	MaxWorkerGroups    = 7    // J7
	MaxAdvanced        = 20   // C10
	MaxGroups          = 20   // C2: cluster groups one cluster joins
	MaxDescriptionLen  = 1000 // C6: characters in a template's description
	DefaultPriority    = 5    // C3
	DefaultHeadGroup   = "head"
	HighAvailabilityGx = 2 // an HA head takes twice its spec (C7)
)

// Limits of a spec document, as UnmarshalYAML and UnmarshalTemplateYAML
// read it: a larger document is refused with an error that is errors.Is
// errs.ErrInvalid and names the limit.
const (
	MaxDocumentSize  = codec.MaxDocumentSize // bytes (1 MiB)
	MaxDocumentNodes = codec.MaxNodes        // YAML nodes
)

// Instance limits of the platform (C8, J7). They bound what one spec can
// ask of a resource group, and keep its resource arithmetic far from
// overflow.
const (
	// MaxInstances is the most instances one worker group may have: the
	// largest min and max of its instance range.
	MaxInstances = 1000
	// MaxClusterInstances is the most worker instances one cluster may
	// scale to: the sum of every worker group's max (the head not
	// counted).
	MaxClusterInstances = 2000
)

// Spec is everything a caller sets on a compute cluster. It is a plain
// value: fill it by hand or decode it from YAML or JSON, then call
// Validate. A nil Priority means the default, 5; an explicit value is
// checked as given, so 0 is refused (C3).
type Spec struct {
	Name            string            `json:"name"`
	Groups          []string          `json:"groups"`             // ids of the cluster groups it joins (C2)
	Priority        *int              `json:"priority,omitempty"` // 1–9; nil: DefaultPriority. Set it with new(7).
	Tags            map[string]string `json:"tags,omitempty"`
	ResourcePackage string            `json:"resourcePackage"`
	ResourceGroup   string            `json:"resourceGroup"`
	Environment
	Mounts   []storage.Mount   `json:"mounts,omitempty"`
	Advanced map[string]string `json:"advanced,omitempty"` // Ray start parameters that override defaults (C10)
	// IdleTimeoutSeconds, when not 0, hibernates the cluster once no run
	// has been active on it for that long, releasing its quota (L4). A
	// run submitted to it afterwards waits, as on any hibernated cluster
	// (J18), until someone starts it.
	IdleTimeoutSeconds int `json:"idleTimeoutSeconds,omitempty"`
	// RayToken, when set, turns on Ray's token authentication (Ray >=
	// 2.52, RAY_AUTH_MODE=token) with the token held in this key of a
	// Secret (its name starts with SecretEnvPrefix): every node gets it
	// from the Secret, and the platform sends it with each call to the
	// cluster's Jobs API (C10).
	RayToken *SecretKeyRef `json:"rayToken,omitempty"`
}

// MaxIdleTimeout is the longest idle timeout, in seconds (30 days).
const MaxIdleTimeout = 30 * 24 * 3600

// IdleTimeout returns the idle timeout (L4) and whether one is set.
func (s *Spec) IdleTimeout() (time.Duration, bool) {
	return time.Duration(s.IdleTimeoutSeconds) * time.Second, s.IdleTimeoutSeconds > 0
}

// Environment is a compute environment: the image and node groups of a
// cluster, which an on-demand job also carries and a Template saves (C6,
// J7).
type Environment struct {
	Image   string        `json:"image"` // a built-in image name, or a registry address (C5)
	Head    HeadGroup     `json:"headGroup"`
	Workers []WorkerGroup `json:"workerGroups"`
}

// NodeGroup is what head and worker groups share.
type NodeGroup struct {
	Name      string                  `json:"name"`
	NodeSpec  string                  `json:"nodeSpec"` // a name from the CU/GU catalog
	Env       map[string]string       `json:"envVars,omitempty"`
	SecretEnv map[string]SecretKeyRef `json:"secretEnvVars,omitempty"` // variables whose value is a key of a Secret
	Labels    map[string]string       `json:"labels,omitempty"`        // Ray node labels
	Resources map[string]float64      `json:"resources,omitempty"`     // Ray logical resources
}

// HeadGroup is the head node group (C7). With HighAvailability there is an
// active and a standby head of the same spec, which doubles the head's
// resources.
type HeadGroup struct {
	NodeGroup
	HighAvailability bool `json:"highAvailability,omitempty"`
}

// WorkerGroup is a worker node group (C8).
type WorkerGroup struct {
	NodeGroup
	Instances Instances `json:"instances"`
}

// Instances is a worker group's instance range: min ≤ max; equal means a
// fixed size, less means Ray's autoscaler scales within it. Max is a
// pointer because zero is a value, not "unset".
type Instances struct {
	Min int  `json:"min"`
	Max *int `json:"max"`
}

// Range returns an instance range.
func Range(min, max int) Instances { return Instances{Min: min, Max: &max} }

// MaxOrMin returns Max, or Min where Max is unset.
func (in Instances) MaxOrMin() int {
	if in.Max == nil {
		return in.Min
	}
	return *in.Max
}

// Autoscaling reports whether the range lets Ray's autoscaler scale.
func (in Instances) Autoscaling() bool { return in.Max != nil && in.Min < *in.Max }

// EffectivePriority returns the priority, or DefaultPriority when it is
// unset (nil).
func (s *Spec) EffectivePriority() int {
	if s.Priority == nil {
		return DefaultPriority
	}
	return *s.Priority
}

// Template is a saved compute environment (C6): a named, reusable image,
// head and worker groups that a cluster or an on-demand job starts from.
// Starting from a template copies it; later changes to either side do not
// reach the other.
type Template struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Environment
}

// DeepCopy returns a copy of s that shares nothing with it.
func (s *Spec) DeepCopy() *Spec {
	if s == nil {
		return nil
	}
	c := *s
	c.Groups = slices.Clone(s.Groups)
	if s.Priority != nil {
		c.Priority = new(*s.Priority)
	}
	c.Tags = maps.Clone(s.Tags)
	c.Environment = *s.Environment.DeepCopy()
	c.Mounts = slices.Clone(s.Mounts)
	c.Advanced = maps.Clone(s.Advanced)
	if s.RayToken != nil {
		c.RayToken = new(*s.RayToken)
	}
	return &c
}

// DeepCopy returns a copy of e that shares nothing with it.
func (e *Environment) DeepCopy() *Environment {
	if e == nil {
		return nil
	}
	c := *e
	c.Head.NodeGroup = e.Head.NodeGroup.deepCopy()
	if e.Workers != nil {
		c.Workers = make([]WorkerGroup, len(e.Workers))
		for i, w := range e.Workers {
			c.Workers[i] = w
			c.Workers[i].NodeGroup = w.NodeGroup.deepCopy()
			if w.Instances.Max != nil {
				m := *w.Instances.Max
				c.Workers[i].Instances.Max = &m
			}
		}
	}
	return &c
}

// DeepCopy returns a copy of t that shares nothing with it.
func (t *Template) DeepCopy() *Template {
	if t == nil {
		return nil
	}
	c := *t
	c.Environment = *t.Environment.DeepCopy()
	return &c
}

func (g NodeGroup) deepCopy() NodeGroup {
	g.Env = maps.Clone(g.Env)
	g.SecretEnv = maps.Clone(g.SecretEnv)
	g.Labels = maps.Clone(g.Labels)
	g.Resources = maps.Clone(g.Resources)
	return g
}

// MarshalYAML returns the spec as YAML.
func (s *Spec) MarshalYAML() ([]byte, error) { return codec.MarshalYAML(s) }

// UnmarshalYAML decodes YAML (or JSON) into a Spec strictly: an unknown
// field is an error naming the field and its line. A document over
// MaxDocumentSize bytes or MaxDocumentNodes nodes is refused unread.
func UnmarshalYAML(data []byte) (*Spec, error) { return codec.Decode[Spec](data) }

// UnmarshalTemplateYAML decodes a Template strictly, like UnmarshalYAML.
func UnmarshalTemplateYAML(data []byte) (*Template, error) { return codec.Decode[Template](data) }
