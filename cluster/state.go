package cluster

import (
	"fmt"
	"maps"
	"slices"

	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/quota"
)

// State is a cluster's lifecycle state (C11, C12).
type State string

// The cluster states. Creating, starting, hibernating and deleting are
// transitional: no operation but clone is allowed then (C12).
const (
	Creating    State = "creating"
	Created     State = "created"
	Starting    State = "starting"
	Running     State = "running"
	Hibernating State = "hibernating"
	Hibernated  State = "hibernated"
	Deleting    State = "deleting"
	Abnormal    State = "abnormal"
)

// Transitional reports whether s is on the way to another state (C12).
func (s State) Transitional() bool {
	return s == Creating || s == Starting || s == Hibernating || s == Deleting
}

// Op is a user operation on a cluster.
type Op string

// The cluster operations (C11).
const (
	OpStart     Op = "start"
	OpEdit      Op = "edit"
	OpClone     Op = "clone"
	OpHibernate Op = "hibernate"
	OpDelete    Op = "delete"
)

// allowed lists, per operation, the states it is allowed in (C11, C12).
var allowed = map[Op][]State{
	OpStart:     {Created, Hibernated, Abnormal},
	OpEdit:      {Created, Running, Hibernated, Abnormal},
	OpClone:     {Creating, Created, Starting, Running, Hibernating, Hibernated, Deleting, Abnormal},
	OpHibernate: {Running, Abnormal},
	OpDelete:    {Created, Running, Hibernated, Abnormal},
}

// AllowedIn returns the states that allow op.
func AllowedIn(op Op) []State { return append([]State(nil), allowed[op]...) }

// Allows reports whether op is allowed in state s.
func (s State) Allows(op Op) bool {
	for _, a := range allowed[op] {
		if a == s {
			return true
		}
	}
	return false
}

// CheckOp returns nil when op is allowed on c in its state, and otherwise
// a *errs.StateError naming the state and the states that would allow it.
func CheckOp(c *Cluster, op Op) error {
	if c.State.Allows(op) {
		return nil
	}
	names := make([]string, 0, len(allowed[op]))
	for _, a := range allowed[op] {
		names = append(names, string(a))
	}
	return &errs.StateError{Kind: "cluster", ID: c.ID, Op: string(op), State: string(c.State), Allowed: names}
}

// Cluster is a compute cluster as the platform keeps it: its spec, its
// state and its bookkeeping.
type Cluster struct {
	ID        string    `json:"id"`
	Spec      Spec      `json:"spec"`
	State     State     `json:"state"`
	Reason    string    `json:"reason,omitempty"` // why it is abnormal, or what a step is waiting on
	Version   string    `json:"-"`                // the store's version; a stale write is a conflict
	Creator   string    `json:"creator"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Generation counts changes of what Ray should run (start, hibernate,
	// resize, delete), and moves past a generation whose write did not
	// come, to fence it off; an observation of Ray counts only when it
	// reflects the current generation.
	Generation int64 `json:"generation"`
	// Temporary marks an on-demand cluster, owned by one run and released
	// when the run ends.
	Temporary bool   `json:"temporary,omitempty"`
	OwnerRun  string `json:"ownerRun,omitempty"`
	// Replicas is, per worker group, the workers the cluster's reservation
	// covers, within the group's instance range: the most Ray may run.
	// Ray's autoscaler moves it (C14): through Clusters().Autoscale, or,
	// where Ray runs an autoscaler of its own (Kubernetes), by the platform
	// following it (Observation.Autoscaled), one worker above what that
	// autoscaler runs while quota allows, so that it can ask for more.
	Replicas map[string]int `json:"replicas,omitempty"`
	// Draining is, per worker group whose ceiling was lowered while the
	// cluster held quota, the workers Ray may still run above Replicas: the
	// ceiling before, until Ray reports that it follows the lower one with
	// no more workers than that (the cluster's reconciler lowers it then,
	// and drops it once Ray runs no more than Replicas). The reservation
	// covers HeldReplicas: a shrink gives its quota back only once Ray has
	// applied it, and a group that grows meanwhile is reserved on top of
	// the workers another group may still run. Only the platform's own
	// writes raise it; Ray's reports only lower it.
	Draining map[string]int `json:"draining,omitempty"`
	// Growth is the cluster's request to grow that its resource group's
	// quota did not grant at once: it waits in the group's queue, beside
	// the on-demand runs, at the cluster's priority (Spec.Priority, C3),
	// and is granted in the queue's order. Nil when nothing waits. One at
	// a time: a refused request of another worker group takes its place.
	// It is dropped when granted, when the cluster asks for no more than
	// it has, and at its next start.
	Growth *Growth `json:"growth,omitempty"`
	// Granted is the cluster's last growth granted (by quota at once, or
	// in the queue's turn) that Ray's autoscaler does not run yet: Want
	// workers in Group, granted at Since. For as long as Ray runs fewer,
	// up to the repair grace (WithRepairGrace), the ceiling stays where
	// the grant put it: its headroom is not given back to the queue
	// before the autoscaler could use it. Dropped once Ray runs it, past
	// the grace, and at the next start.
	Granted *Growth `json:"granted,omitempty"`
	// Yielded lists the autoscaling worker groups whose headroom was given
	// back to the resource group's queue while runs or growths waited
	// there: their ceiling (Replicas) is what Ray's autoscaler ran then,
	// and the autoscaler reaching it is not taken as asking for more. The
	// headroom is lent again once nothing waits.
	Yielded []string `json:"yielded,omitempty"`
	// PendingRestart lists edited settings that take effect at the next start.
	PendingRestart []string `json:"pendingRestart,omitempty"`
	// Live is what the Ray cluster runs with since its last start, while it
	// holds quota (starting, running, abnormal, hibernating); nil otherwise.
	Live *Live `json:"live,omitempty"`
	// RunningSince is when it last became running (the idle timeout, L4,
	// counts from it or from the last run's end, whichever is later).
	RunningSince time.Time `json:"runningSince,omitzero"`
	// Stopping marks the cluster while a hibernate or a delete that is
	// refused while runs are active looks for them in the store: its
	// fence against a run placed meanwhile, which reads the mark before
	// its submit and waits. Should the operation die, the mark holds for
	// two minutes at most, and less once the replica that made it
	// (StoppingBy) is seen gone: a waiting run then takes it off by
	// compare-and-swap. Zero otherwise.
	Stopping time.Time `json:"stopping,omitzero"`
	// StoppingBy is the membership id of the replica whose operation made
	// the Stopping mark ("" when it shares no work, or for a mark made by
	// a release before this field).
	StoppingBy string `json:"stoppingBy,omitempty"`
	// QuotaGroup is the resource group its reservation was made in at the
	// last start; the reservation is released there once Ray has let the
	// compute go.
	QuotaGroup string `json:"quotaGroup,omitempty"`
	// Events is the operation and event log (C13), newest last, at most
	// event.MaxEntries entries.
	Events []event.Event `json:"events,omitempty"`
}

// MarkStopping marks the cluster as a hibernate or a delete does before
// it looks for active runs (Stopping, StoppingBy).
func (c *Cluster) MarkStopping(at time.Time, by string) { c.Stopping, c.StoppingBy = at, by }

// Unmark takes the Stopping mark off.
func (c *Cluster) Unmark() { c.MarkStopping(time.Time{}, "") }

// HeldReplicas returns, per worker group, the workers the cluster's
// reservation covers: its ceiling (Replicas), or, while a lowered ceiling
// drains, the workers Ray may still run (Draining), whichever is more. It
// is a new map: the caller may change it.
func (c *Cluster) HeldReplicas() map[string]int {
	out := maps.Clone(c.Replicas)
	for g, n := range c.Draining {
		if cur, ok := out[g]; ok && n > cur {
			out[g] = n // a group with no ceiling counts its minimum (pods of a group the cluster no longer has are MayRun's)
		}
	}
	return out
}

// Growth is a running cluster's request for more workers in one worker
// group than its resource group's quota granted when asked: Want workers
// in Group, waiting since Since (what the queue's starvation bound
// measures from). It is stored on the cluster, so that every client over
// the store derives the same queue, and a restart finds it.
type Growth struct {
	Group string    `json:"group"`
	Want  int       `json:"want"`
	Since time.Time `json:"since"`
}

// HoldsQuota reports whether a cluster in state s keeps its reservation:
// from the start until Ray has released its compute.
func (s State) HoldsQuota() bool {
	return s == Starting || s == Running || s == Abnormal || s == Hibernating || s == Deleting
}

// Live is a started cluster's environment and the resource group its
// quota is reserved in. Worker ranges edited while running apply here at
// once; other edits wait for the next start.
type Live struct {
	ResourceGroup string `json:"resourceGroup"`
	Environment
}

// DeepCopy returns a copy of c that shares nothing with it.
func (c *Cluster) DeepCopy() *Cluster {
	if c == nil {
		return nil
	}
	out := *c
	out.Spec = *c.Spec.DeepCopy()
	out.Replicas = maps.Clone(c.Replicas)
	out.Draining = maps.Clone(c.Draining)
	out.PendingRestart = slices.Clone(c.PendingRestart)
	out.Yielded = slices.Clone(c.Yielded)
	if c.Growth != nil {
		g := *c.Growth
		out.Growth = &g
	}
	if c.Granted != nil {
		g := *c.Granted
		out.Granted = &g
	}
	out.Events = slices.Clone(c.Events)
	if c.Live != nil {
		out.Live = &Live{ResourceGroup: c.Live.ResourceGroup, Environment: *c.Live.Environment.DeepCopy()}
	}
	return &out
}

// Phase is what a backend sees of a Ray cluster.
type Phase string

// The phases of a Ray cluster.
const (
	PhasePending   Phase = "pending"   // being provisioned
	PhaseReady     Phase = "ready"     // head and workers up
	PhaseSuspended Phase = "suspended" // exists with no compute (created or hibernated)
	PhaseFailed    Phase = "failed"    // cannot come up or lost its head
)

// Observation is what a backend reports of a cluster's Ray side. It
// counts only for the Generation it reflects.
type Observation struct {
	Generation int64
	Phase      Phase
	Reason     string // why, for PhaseFailed
	Pods       []Pod
	// Queued says Ray has not yet taken up the cluster's latest change:
	// the operator that acts on it (KubeRay) has it in its backlog. A step
	// that waits on a backlog is not failing: it has a longer bound than a
	// step Ray has taken up and makes no progress on.
	Queued bool
	// Autoscaled is what Ray's own autoscaler has Ray run, where Ray has
	// one (KubeRay's in-tree autoscaler); nil otherwise (the memory
	// backend, whose autoscaler's requests are Clusters().Autoscale).
	Autoscaled *Autoscaled
	// Refused says why the platform under Ray refuses some of the
	// cluster's nodes (a Kubernetes ResourceQuota exceeded: other pods
	// use what the resource group has), "" when it does not. The cluster
	// waits for room: a refusal is no failure of Ray's, and its step has
	// the longer bound of a backlog.
	Refused string
	// Since is when Ray's pods last changed (a pod made, removed or
	// replaced), where Ray knows it; zero when it does not. Metering
	// closes an interval at it rather than at the moment it looks.
	Since time.Time
}

// Autoscaled is what Ray's own autoscaler asks of a running cluster.
type Autoscaled struct {
	// Generation is the cluster's generation whose ceilings Ray has: the
	// maximum of each autoscaling worker group is what the cluster's
	// Replicas were at that generation.
	Generation int64
	// Workers is, per worker group that autoscales, how many workers the
	// autoscaler has Ray run (as it wrote them: the platform bounds them
	// to the group's range and ceiling before it trusts them).
	Workers map[string]int
}

// Trigger returns what Ray's observation o means for a cluster stored at
// generation gen: ObservedSuspended, ObservedReady or ObservedFailed, or
// "" when it says nothing (a phase in between, or o is of another
// generation, so that a stale "ready" never moves a starting cluster).
func (o Observation) Trigger(gen int64) Trigger {
	if o.Generation != gen {
		return ""
	}
	switch o.Phase {
	case PhaseSuspended:
		return ObservedSuspended
	case PhaseReady:
		return ObservedReady
	case PhaseFailed:
		return ObservedFailed
	}
	return ""
}

// Trigger is what moves a cluster from one state to another: a user
// operation (an Op) or something the platform observed.
type Trigger string

// The triggers besides the user operations.
const (
	// Create is a cluster's birth: a user's cluster is stored creating.
	Create Trigger = "create"
	// CreateOnDemand is an on-demand cluster's birth: admitted with its
	// run's reservation made, it is stored starting.
	CreateOnDemand Trigger = "create-on-demand"
	// ForceDelete deletes in any state, transitional ones included.
	ForceDelete Trigger = "force-delete"
	// ObservedSuspended: Ray has the cluster with no compute, at the
	// current generation.
	ObservedSuspended Trigger = "observed-suspended"
	// ObservedUnstarted: Ray has a cluster that was never started with no
	// compute, at the current generation (an abnormal cluster whose
	// creation timed out, then came: it is created).
	ObservedUnstarted Trigger = "observed-unstarted"
	// ObservedReady: Ray runs the cluster at the current generation.
	ObservedReady Trigger = "observed-ready"
	// ObservedFailed: Ray reports the cluster failed.
	ObservedFailed Trigger = "observed-failed"
	// StepFailed: a background step kept failing past its retries.
	StepFailed Trigger = "step-failed"
	// ObservedGone: Ray has no such cluster any more.
	ObservedGone Trigger = "observed-gone"
)

// Gone is the "state" a deleted cluster moves to: it is removed.
const Gone State = ""

// Transition is the cluster state machine (C11, C12): the state a cluster
// in state from moves to on t. Abnormal is not a sink: Ray's observation
// at the cluster's generation takes an abnormal cluster to what Ray runs
// (ready: running; no compute: hibernated, or created if it was never
// started). A user operation not allowed in from is a
// *errs.StateError; an observation that does not apply to from returns
// from unchanged and ok false.
func Transition(id string, from State, t Trigger) (to State, ok bool, err error) {
	switch t {
	case Create, CreateOnDemand:
		// A birth: only of what is not yet stored.
		if from != Gone {
			return from, false, nil
		}
		if t == Create {
			return Creating, true, nil
		}
		return Starting, true, nil
	case Trigger(OpStart), Trigger(OpHibernate), Trigger(OpDelete), Trigger(OpEdit), Trigger(OpClone):
		op := Op(t)
		if err := CheckOp(&Cluster{ID: id, State: from}, op); err != nil {
			return from, false, err
		}
		switch op {
		case OpStart:
			return Starting, true, nil
		case OpHibernate:
			return Hibernating, true, nil
		case OpDelete:
			return Deleting, true, nil
		}
		return from, true, nil
	case ForceDelete:
		return Deleting, true, nil
	case ObservedSuspended:
		switch from {
		case Creating:
			return Created, true, nil
		case Hibernating, Abnormal:
			return Hibernated, true, nil
		}
	case ObservedUnstarted:
		if from == Abnormal {
			return Created, true, nil
		}
	case ObservedReady:
		if from == Starting || from == Abnormal {
			return Running, true, nil
		}
	case ObservedFailed:
		if from == Starting || from == Running {
			return Abnormal, true, nil
		}
	case StepFailed:
		if from == Creating || from == Starting || from == Running || from == Hibernating {
			return Abnormal, true, nil
		}
	case ObservedGone:
		if from == Deleting {
			return Gone, true, nil
		}
	}
	return from, false, nil
}

// Pod is one Ray node's pod (C13).
type Pod struct {
	Name      string          `json:"name"`
	IP        string          `json:"ip"`
	Role      string          `json:"role"`  // "head" or "worker"
	Group     string          `json:"group"` // the node group
	Status    string          `json:"status"`
	Node      string          `json:"node"`
	Requests  quota.Resources `json:"requests"`
	Limits    quota.Resources `json:"limits"`
	CreatedAt time.Time       `json:"createdAt"`
	Image     string          `json:"image"`
	NodeSpec  string          `json:"nodeSpec"`
}

// HistoryEntry is one run in a cluster's job history (C13).
type HistoryEntry struct {
	JobID       string        `json:"jobID"`
	RunID       string        `json:"runID"`
	Name        string        `json:"name"`
	Command     string        `json:"command"`
	Status      string        `json:"status"`
	SubmittedAt time.Time     `json:"submittedAt"`
	Duration    time.Duration `json:"duration"`
	Logs        string        `json:"logs"` // where the run's logs are
}

// Details is everything a cluster's details page shows (C13).
type Details struct {
	Cluster   Cluster         `json:"cluster"`
	Resources quota.Resources `json:"resources"` // what it reserves now
	History   []HistoryEntry  `json:"history"`
	Events    []event.Event   `json:"events"`
	Pods      []Pod           `json:"pods"`
	Dashboard string          `json:"dashboard,omitempty"` // the Ray dashboard, while running
}

// MinResources returns what the environment reserves to start: the head
// (twice with high availability, C7) and every worker group's minimum.
func (e *Environment) MinResources(nodes quota.Catalog) (quota.Resources, error) {
	return e.resources(nodes, func(w WorkerGroup) int { return w.Instances.Min })
}

// MinReplicas returns each worker group's minimum, by group name: the
// workers a cluster starts with.
func (e *Environment) MinReplicas() map[string]int {
	replicas := make(map[string]int, len(e.Workers))
	for _, w := range e.Workers {
		replicas[w.Name] = w.Instances.Min
	}
	return replicas
}

// MaxResources returns what the environment takes at its largest.
func (e *Environment) MaxResources(nodes quota.Catalog) (quota.Resources, error) {
	return e.resources(nodes, func(w WorkerGroup) int { return w.Instances.MaxOrMin() })
}

// ResourcesAt returns what the environment takes with the given worker
// counts per group (a group not named counts its minimum).
func (e *Environment) ResourcesAt(nodes quota.Catalog, replicas map[string]int) (quota.Resources, error) {
	return e.resources(nodes, countOf(replicas))
}

// countOf counts a worker group at its number in replicas, or at its
// minimum when replicas does not name it.
func countOf(replicas map[string]int) func(WorkerGroup) int {
	return func(w WorkerGroup) int {
		if n, ok := replicas[w.Name]; ok {
			return n
		}
		return w.Instances.Min
	}
}

func (e *Environment) resources(nodes quota.Catalog, count func(WorkerGroup) int) (quota.Resources, error) {
	total, workers, err := e.perGroup(nodes, count)
	for i, w := range workers {
		if err == nil {
			if total, err = total.AddChecked(w); err != nil {
				err = e.tooMany(i, count(e.Workers[i]))
			}
		}
	}
	return total, err
}

// perGroup returns what the environment's head group takes, and each of
// its worker groups with count workers.
func (e *Environment) perGroup(nodes quota.Catalog, count func(WorkerGroup) int) (head quota.Resources, workers []quota.Resources, err error) {
	hs, ok := nodes.Lookup(e.Head.NodeSpec)
	if !ok {
		return quota.Resources{}, nil, errs.List{errs.Invalid("headGroup.nodeSpec", "C7", e.Head.NodeSpec, nodes.UnknownDetail(e.Head.NodeSpec))}.ToError()
	}
	heads := int64(1)
	if e.Head.HighAvailability {
		heads = HighAvailabilityGx
	}
	head = hs.Resources().Mul(heads) // a catalog's node maxima keep this small
	workers = make([]quota.Resources, len(e.Workers))
	for i, w := range e.Workers {
		s, ok := nodes.Lookup(w.NodeSpec)
		if !ok {
			wp := errs.NewPath("workerGroups").Index(i)
			return quota.Resources{}, nil, errs.List{errs.Invalid(wp.Child("nodeSpec"), "C8", w.NodeSpec, nodes.UnknownDetail(w.NodeSpec))}.ToError()
		}
		n := count(w)
		if workers[i], err = s.Resources().MulChecked(int64(n)); err != nil {
			return quota.Resources{}, nil, e.tooMany(i, n)
		}
	}
	return head, workers, nil
}

// tooMany is the error of worker group i counted at n workers, more than
// can be added up.
func (e *Environment) tooMany(i, n int) error {
	wp := errs.NewPath("workerGroups").Index(i)
	return errs.List{errs.Invalid(wp.Child("instances"), "C8", n, fmt.Sprintf(
		"%d instances of %s are too many to count; a worker group has at most %d", n, e.Workers[i].NodeSpec, MaxInstances))}.ToError()
}

// HeldAlike returns what the cluster's head and worker groups take at
// their held workers (HeldReplicas), counting only those env runs alike:
// a worker group of the same name and node spec, the head when env's has
// the same node spec and availability. What a write that gives the cluster
// env leaves of the groups Ray runs now; zero for a cluster with no live
// environment.
func (c *Cluster) HeldAlike(nodes quota.Catalog, env *Environment) (quota.Resources, error) {
	if c.Live == nil {
		return quota.Resources{}, nil
	}
	held := c.HeldReplicas()
	head, workers, err := c.Live.perGroup(nodes, countOf(held))
	if err != nil {
		return quota.Resources{}, err
	}
	var total quota.Resources
	if env.Head.NodeSpec == c.Live.Head.NodeSpec && env.Head.HighAvailability == c.Live.Head.HighAvailability {
		total = head
	}
	for i, w := range c.Live.Workers {
		if env.RunsAlike(w) {
			if total, err = total.AddChecked(workers[i]); err != nil {
				return quota.Resources{}, c.Live.tooMany(i, held[w.Name])
			}
		}
	}
	return total, nil
}

// MayRun returns what Ray may run of a live cluster whose pods Ray reports
// as pods (nil when it cannot tell): per node group (the head, each worker
// group), the larger of what the group takes at its held workers
// (HeldReplicas) and what its pods request, and the pods of a group the
// cluster no longer has (one a restart removed: KubeRay reconciles only
// the groups in its spec, and leaves that group's pods). It is what the
// cluster's reservation is to cover; zero for a cluster with no live
// environment.
func (c *Cluster) MayRun(nodes quota.Catalog, pods []Pod) (quota.Resources, error) {
	if c.Live == nil {
		return quota.Resources{}, nil
	}
	env := &c.Live.Environment
	held := c.HeldReplicas()
	head, workers, err := env.perGroup(nodes, countOf(held))
	if err != nil {
		return quota.Resources{}, err
	}
	index := make(map[string]int, len(env.Workers))
	for i, w := range env.Workers {
		index[w.Name] = i
	}
	var heads, stray quota.Resources
	inGroup := make([]quota.Resources, len(env.Workers))
	for _, p := range pods {
		r := p.Requests.Max(quota.Resources{})
		if i, ok := index[p.Group]; ok && p.Role != "head" {
			inGroup[i] = inGroup[i].Add(r)
		} else if p.Role == "head" {
			heads = heads.Add(r)
		} else {
			stray = stray.Add(r)
		}
	}
	total, err := head.Max(heads).AddChecked(stray)
	for i, w := range workers {
		if err == nil {
			total, err = total.AddChecked(w.Max(inGroup[i]))
		}
	}
	if err != nil {
		return quota.Resources{}, fmt.Errorf("%w: cluster %s: what its %d pods request is too much to count", errs.ErrInvalid, c.ID, len(pods))
	}
	return total, nil
}

// InState is a condition for Clusters().Wait: done once the cluster is in
// one of states. It never fails; to stop waiting at a state that will not
// lead to the one wanted, write a condition that returns an error there.
func InState(states ...State) func(*Cluster) (bool, error) {
	return func(cl *Cluster) (bool, error) {
		for _, s := range states {
			if cl.State == s {
				return true, nil
			}
		}
		return false, nil
	}
}
