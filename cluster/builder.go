package cluster

import (
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/storage"
	"time"
)

// Builder assembles a Spec step by step. Each method records its change
// and returns the builder; nothing is checked until Build, which returns
// the spec together with every problem. A Builder is not safe for
// concurrent use; the Spec it builds shares nothing with it.
type Builder struct {
	spec Spec
	errs errs.List
}

// NewBuilder starts a cluster spec called name, with the default priority.
// dlc.NewCluster is the same.
func NewBuilder(name string) *Builder {
	return &Builder{spec: Spec{Name: name, Priority: new(DefaultPriority)}}
}

// Edit starts a builder from a copy of an existing spec, to change it.
func Edit(s *Spec) *Builder { return &Builder{spec: *s.DeepCopy()} }

// NodeOption sets an optional part of a node group.
type NodeOption func(*NodeGroup)

// Env sets an environment variable on the group's nodes.
func Env(name, value string) NodeOption {
	return func(g *NodeGroup) {
		if g.Env == nil {
			g.Env = map[string]string{}
		}
		g.Env[name] = value
	}
}

// SecretEnv sets an environment variable on the group's nodes whose value
// is key of the Secret named secret (whose name starts with
// SecretEnvPrefix): only the reference is stored and rendered.
func SecretEnv(name, secret, key string) NodeOption {
	return func(g *NodeGroup) {
		if g.SecretEnv == nil {
			g.SecretEnv = map[string]SecretKeyRef{}
		}
		g.SecretEnv[name] = SecretKeyRef{Secret: secret, Key: key}
	}
}

// Label sets a Ray node label on the group's nodes.
func Label(key, value string) NodeOption {
	return func(g *NodeGroup) {
		if g.Labels == nil {
			g.Labels = map[string]string{}
		}
		g.Labels[key] = value
	}
}

// Resource declares a Ray logical resource on each of the group's nodes.
func Resource(name string, quantity float64) NodeOption {
	return func(g *NodeGroup) {
		if g.Resources == nil {
			g.Resources = map[string]float64{}
		}
		g.Resources[name] = quantity
	}
}

// Groups adds the cluster groups (by id) the cluster joins (C2).
func (b *Builder) Groups(ids ...string) *Builder {
	b.spec.Groups = append(b.spec.Groups, ids...)
	return b
}

// Priority sets the priority, 1–9 (C3). Any value is kept as given: 0 is
// refused at Build, not taken for the default.
func (b *Builder) Priority(p int) *Builder { b.spec.Priority = new(p); return b }

// Tag sets a tag (C3).
func (b *Builder) Tag(key, value string) *Builder {
	if b.spec.Tags == nil {
		b.spec.Tags = map[string]string{}
	}
	b.spec.Tags[key] = value
	return b
}

// Resources sets the resource package and resource group the cluster
// draws from (C4).
func (b *Builder) Resources(pkg, group string) *Builder {
	b.spec.ResourcePackage, b.spec.ResourceGroup = pkg, group
	return b
}

// FromTemplate replaces the image and node groups with a copy of the
// template's (C6); later calls adjust the copy, never the template.
func (b *Builder) FromTemplate(t *Template) *Builder {
	b.spec.Environment = *t.Environment.DeepCopy()
	return b
}

// Image sets the image: a built-in name or a registry address (C5).
func (b *Builder) Image(image string) *Builder { b.spec.Image = image; return b }

// Head sets the head group: its name, node spec and options (C7).
func (b *Builder) Head(name, nodeSpec string, opts ...NodeOption) *Builder {
	b.spec.SetHead(name, nodeSpec, opts...)
	return b
}

// HighAvailability turns on an active and a standby head (C7), which
// doubles the head's resources.
func (b *Builder) HighAvailability(on bool) *Builder {
	b.spec.Head.HighAvailability = on
	return b
}

// WorkerGroup adds a worker group with its instance range min–max (C8).
func (b *Builder) WorkerGroup(name, nodeSpec string, min, max int, opts ...NodeOption) *Builder {
	b.spec.AddWorkerGroup(name, nodeSpec, min, max, opts...)
	return b
}

// EditWorkerGroup changes the worker group called name, e.g. one that came
// from a template. Naming no group is an error at Build.
func (b *Builder) EditWorkerGroup(name string, edit func(*WorkerGroup)) *Builder {
	if !b.spec.EditWorkerGroup(name, edit) {
		b.errs = append(b.errs, NoSuchWorkerGroup(errs.NewPath("workerGroups"), name))
	}
	return b
}

// RemoveWorkerGroup removes the worker group called name, if there is one.
func (b *Builder) RemoveWorkerGroup(name string) *Builder {
	b.spec.RemoveWorkerGroup(name)
	return b
}

// BuildTemplate returns the builder's image and node groups as a template
// called name (C6), and every problem with it.
func (b *Builder) BuildTemplate(name string) (*Template, error) {
	t := &Template{Name: name, Environment: *b.spec.Environment.DeepCopy()}
	return t, t.Problems(Catalogs{}).ToError()
}

// Mount adds a storage mount (C9).
func (b *Builder) Mount(m storage.Mount) *Builder {
	b.spec.Mounts = append(b.spec.Mounts, m)
	return b
}

// Advanced sets an advanced parameter, a Ray start parameter that
// overrides the default (C10). Platform-managed keys are refused (J11).
func (b *Builder) Advanced(key, value string) *Builder {
	if b.spec.Advanced == nil {
		b.spec.Advanced = map[string]string{}
	}
	b.spec.Advanced[key] = value
	return b
}

// IdleTimeout hibernates the cluster once no run has been active on it
// for d (L4), releasing its quota; whole seconds, 0 for never.
func (b *Builder) IdleTimeout(d time.Duration) *Builder {
	b.spec.IdleTimeoutSeconds = int(d / time.Second)
	return b
}

// RayToken turns on Ray's token authentication (Ray >= 2.52) with the
// token in key of Secret secret (named SecretEnvPrefix…): see
// Spec.RayToken.
func (b *Builder) RayToken(secret, key string) *Builder {
	b.spec.RayToken = &SecretKeyRef{Secret: secret, Key: key}
	return b
}

// Build returns a copy of the spec and every problem with it, checked
// against the default catalogs.
func (b *Builder) Build() (*Spec, error) { return b.BuildWith(Catalogs{}) }

// BuildWith is Build against the given catalogs.
func (b *Builder) BuildWith(c Catalogs) (*Spec, error) {
	s := b.spec.DeepCopy()
	l := append(append(errs.List{}, b.errs...), s.Problems(c)...)
	return s, l.ToError()
}
