package cluster

import (
	"slices"

	"github.com/aidlc/dlc/errs"
)

// SetHead replaces the head group's name, node spec and options, keeping
// its high-availability setting.
func (e *Environment) SetHead(name, nodeSpec string, opts ...NodeOption) {
	e.Head.NodeGroup = newNodeGroup(name, nodeSpec, opts)
}

// AddWorkerGroup appends a worker group with the instance range min–max.
func (e *Environment) AddWorkerGroup(name, nodeSpec string, min, max int, opts ...NodeOption) {
	e.Workers = append(e.Workers, WorkerGroup{NodeGroup: newNodeGroup(name, nodeSpec, opts), Instances: Range(min, max)})
}

// EditWorkerGroup calls edit on the worker group called name and reports
// whether there was one.
func (e *Environment) EditWorkerGroup(name string, edit func(*WorkerGroup)) bool {
	for i := range e.Workers {
		if e.Workers[i].Name == name {
			edit(&e.Workers[i])
			return true
		}
	}
	return false
}

// RunsAlike reports whether the environment has a worker group of w's
// name and node spec.
func (e *Environment) RunsAlike(w WorkerGroup) bool {
	return slices.ContainsFunc(e.Workers, func(n WorkerGroup) bool { return n.Name == w.Name && n.NodeSpec == w.NodeSpec })
}

// RemoveWorkerGroup removes the worker group called name, if there is one.
func (e *Environment) RemoveWorkerGroup(name string) {
	out := e.Workers[:0:0]
	for _, w := range e.Workers {
		if w.Name != name {
			out = append(out, w)
		}
	}
	e.Workers = out
}

// NoSuchWorkerGroup is the error for editing a worker group that is not there.
func NoSuchWorkerGroup(p errs.Path, name string) *errs.FieldError {
	return errs.Invalid(p, "C8", name, "no worker group of that name to edit")
}

func newNodeGroup(name, nodeSpec string, opts []NodeOption) NodeGroup {
	g := NodeGroup{Name: name, NodeSpec: nodeSpec}
	for _, o := range opts {
		o(&g)
	}
	return g
}

// GroupSetting returns the name of the first node group (the head, then
// the workers in order) that sets variable k, plainly or from a Secret,
// and whether one does.
func (e *Environment) GroupSetting(k string) (string, bool) {
	set := func(g NodeGroup) bool {
		_, plain := g.Env[k]
		_, secret := g.SecretEnv[k]
		return plain || secret
	}
	if set(e.Head.NodeGroup) {
		return e.Head.Name, true
	}
	for _, w := range e.Workers {
		if set(w.NodeGroup) {
			return w.Name, true
		}
	}
	return "", false
}
