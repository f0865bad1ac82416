package memory

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// Delays are how long the simulated Ray takes for each step.
type Delays struct {
	Create    time.Duration // created (suspended) RayCluster appears
	Start     time.Duration // a start until the cluster runs
	Hibernate time.Duration // a hibernate until compute is released
	Delete    time.Duration // a delete until the cluster is gone
	Submit    time.Duration // a submitted job until its driver runs
	Run       time.Duration // a job's run time, unless its Outcome says otherwise
}

// DefaultDelays are short real-time delays, so that a program on the real
// clock sees every state without waiting long.
var DefaultDelays = Delays{
	Create: 20 * time.Millisecond, Start: 150 * time.Millisecond, Hibernate: 50 * time.Millisecond,
	Delete: 50 * time.Millisecond, Submit: 30 * time.Millisecond, Run: 200 * time.Millisecond,
}

// Outcome is how a simulated run ends.
type Outcome struct {
	Fail     bool          // fail instead of succeed
	Message  string        // the final message
	Logs     []string      // the log lines the job prints
	Duration time.Duration // how long it runs; 0 means Delays.Run
}

// RayHooks let a test decide what the simulated Ray does. Nil hooks mean
// every cluster starts and every run succeeds.
type RayHooks struct {
	// ClusterStart decides whether a starting cluster comes up; a non-nil
	// error makes it abnormal, with the error's text as the reason.
	ClusterStart func(c *cluster.Cluster) error
	// RunOutcome decides each run's outcome and log lines.
	RunOutcome func(r *job.Run) Outcome
}

// RayOptions configure the simulated Ray.
type RayOptions struct {
	Clock   backend.Clock // default RealClock
	Delays  *Delays       // default DefaultDelays
	Hooks   RayHooks
	Catalog quota.Catalog // node specs for pod requests; default quota.DefaultCatalog()
}

// Ray is a simulated KubeRay: it provisions clusters with pods per node
// group (two heads with high availability), runs jobs, and reports both
// to its Observer after the configured delays. Safe for concurrent use.
type Ray struct {
	clock   backend.Clock
	delays  Delays
	hooks   RayHooks
	catalog quota.Catalog

	mu       sync.Mutex
	obs      backend.Observer
	clusters map[string]*simCluster
	runs     map[string]*simRun
	podSeq   int
}

type simCluster struct {
	id    string
	state cluster.State
	pods  []cluster.Pod
	stop  func() bool
}

type simRun struct {
	id, clusterID string
	logs          []string
	stops         []func() bool
	done          bool
}

// NewRay returns a simulated Ray.
func NewRay(o RayOptions) *Ray {
	r := &Ray{clock: o.Clock, hooks: o.Hooks, catalog: o.Catalog,
		clusters: map[string]*simCluster{}, runs: map[string]*simRun{}}
	if r.clock == nil {
		r.clock = backend.RealClock{}
	}
	r.delays = DefaultDelays
	if o.Delays != nil {
		r.delays = *o.Delays
	}
	if r.catalog.Len() == 0 {
		r.catalog = quota.DefaultCatalog()
	}
	return r
}

// Watch sets the observer that hears of state changes.
func (r *Ray) Watch(o backend.Observer) {
	r.mu.Lock()
	r.obs = o
	r.mu.Unlock()
}

// notify calls the observer outside every lock.
func (r *Ray) notifyCluster(id string, o cluster.Observation) {
	r.mu.Lock()
	obs := r.obs
	r.mu.Unlock()
	if obs != nil {
		obs.ClusterObserved(id, o)
	}
}

func (r *Ray) notifyRun(id string, o job.Observation) {
	r.mu.Lock()
	obs := r.obs
	r.mu.Unlock()
	if obs != nil {
		obs.RunObserved(id, o)
	}
}

// ApplyCluster makes the simulated Ray cluster follow c: a creating
// cluster appears suspended, a starting one comes up (or turns abnormal,
// as ClusterStart decides), a hibernating one releases its pods, and a
// running one takes its current worker counts at once.
func (r *Ray) ApplyCluster(ctx context.Context, c *cluster.Cluster) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c = c.DeepCopy()
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.clusters[c.ID]
	if sc == nil {
		sc = &simCluster{id: c.ID}
		r.clusters[c.ID] = sc
	}
	if sc.stop != nil {
		sc.stop()
		sc.stop = nil
	}
	switch c.State {
	case cluster.Creating:
		sc.stop = r.clock.AfterFunc(r.delays.Create, func() {
			r.setState(c.ID, cluster.Created, nil)
			r.notifyCluster(c.ID, cluster.Observation{State: cluster.Created})
		})
	case cluster.Starting:
		sc.stop = r.clock.AfterFunc(r.delays.Start, func() {
			if r.hooks.ClusterStart != nil {
				if err := r.hooks.ClusterStart(c); err != nil {
					r.setState(c.ID, cluster.Abnormal, nil)
					r.notifyCluster(c.ID, cluster.Observation{State: cluster.Abnormal, Reason: err.Error()})
					return
				}
			}
			pods := r.makePods(c)
			r.setState(c.ID, cluster.Running, pods)
			r.notifyCluster(c.ID, cluster.Observation{State: cluster.Running, Pods: pods})
		})
	case cluster.Hibernating:
		sc.stop = r.clock.AfterFunc(r.delays.Hibernate, func() {
			r.setState(c.ID, cluster.Hibernated, []cluster.Pod{})
			r.notifyCluster(c.ID, cluster.Observation{State: cluster.Hibernated})
		})
	case cluster.Running:
		if sc.state == cluster.Running {
			sc.pods = r.resizePods(c, sc.pods)
		}
	}
	return nil
}

func (r *Ray) setState(id string, st cluster.State, pods []cluster.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sc := r.clusters[id]; sc != nil {
		sc.state = st
		if pods != nil {
			sc.pods = pods
		}
	}
}

// DeleteCluster removes the simulated cluster after the delete delay and
// ends the runs on it.
func (r *Ray) DeleteCluster(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	sc := r.clusters[id]
	if sc != nil && sc.stop != nil {
		sc.stop()
	}
	for _, run := range r.runs {
		if run.clusterID == id {
			r.stopRunLocked(run, "cluster deleted")
		}
	}
	r.mu.Unlock()
	r.clock.AfterFunc(r.delays.Delete, func() {
		r.mu.Lock()
		delete(r.clusters, id)
		r.mu.Unlock()
		r.notifyCluster(id, cluster.Observation{State: ""})
	})
	return nil
}

// SubmitRun starts run on cluster c: its driver runs after the submit
// delay, and it ends as RunOutcome decides.
func (r *Ray) SubmitRun(ctx context.Context, run *job.Run, c *cluster.Cluster) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	run = run.DeepCopy()
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.clusters[c.ID]
	if sc == nil || sc.state != cluster.Running {
		return &errs.StateError{Kind: "cluster", ID: c.ID, Op: "submit a job", State: "not running in Ray", Allowed: []string{string(cluster.Running)}}
	}
	if old := r.runs[run.ID]; old != nil && !old.done {
		return nil // the same submission id: Ray never starts a job twice
	}
	sr := &simRun{id: run.ID, clusterID: c.ID}
	r.runs[run.ID] = sr
	out := Outcome{}
	if r.hooks.RunOutcome != nil {
		out = r.hooks.RunOutcome(run)
	}
	if out.Duration == 0 {
		out.Duration = r.delays.Run
	}
	if out.Logs == nil {
		out.Logs = []string{fmt.Sprintf("Job %s submitted to %s", run.ID, c.ID), "Running entrypoint: " + run.Config.Entrypoint}
	}
	sr.stops = append(sr.stops, r.clock.AfterFunc(r.delays.Submit, func() {
		r.mu.Lock()
		if sr.done {
			r.mu.Unlock()
			return
		}
		sr.logs = append(sr.logs, out.Logs...)
		sr.stops = append(sr.stops, r.clock.AfterFunc(out.Duration, func() {
			r.mu.Lock()
			if sr.done {
				r.mu.Unlock()
				return
			}
			sr.done = true
			st, msg := job.Succeeded, out.Message
			if out.Fail {
				st = job.Failed
				if msg == "" {
					msg = "the job's entrypoint exited with an error"
				}
			}
			sr.logs = append(sr.logs, fmt.Sprintf("Job %s %s", run.ID, st))
			r.mu.Unlock()
			r.notifyRun(run.ID, job.Observation{State: st, Message: msg})
		}))
		r.mu.Unlock()
		r.notifyRun(run.ID, job.Observation{State: job.Running})
	}))
	return nil
}

// StopRun stops a run; it reports nothing more of it.
func (r *Ray) StopRun(ctx context.Context, runID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if sr := r.runs[runID]; sr != nil {
		r.stopRunLocked(sr, "stopped")
	}
	return nil
}

func (r *Ray) stopRunLocked(sr *simRun, why string) {
	if sr.done {
		return
	}
	sr.done = true
	for _, s := range sr.stops {
		s()
	}
	sr.logs = append(sr.logs, fmt.Sprintf("Job %s %s", sr.id, why))
}

// Pods returns the cluster's pods.
func (r *Ray) Pods(_ context.Context, clusterID string) ([]cluster.Pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.clusters[clusterID]
	if sc == nil {
		return nil, nil
	}
	return append([]cluster.Pod(nil), sc.pods...), nil
}

// Logs returns a run's log lines so far.
func (r *Ray) Logs(_ context.Context, runID string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sr := r.runs[runID]
	if sr == nil {
		return nil, nil
	}
	return append([]string(nil), sr.logs...), nil
}

// Dashboard returns the Ray dashboard address of a running cluster.
func (r *Ray) Dashboard(_ context.Context, clusterID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sc := r.clusters[clusterID]; sc != nil && sc.state == cluster.Running {
		return fmt.Sprintf("http://%s-head-svc.memory:8265", clusterID)
	}
	return ""
}

func (r *Ray) pod(c *cluster.Cluster, role, group, nodeSpec string, i int) cluster.Pod {
	r.podSeq++
	res := quota.Resources{}
	if s, ok := r.catalog.Lookup(nodeSpec); ok {
		res = s.Resources()
	}
	return cluster.Pod{
		Name: fmt.Sprintf("%s-%s-%d", c.ID, group, i), IP: fmt.Sprintf("10.%d.%d.%d", (r.podSeq>>16)&255, (r.podSeq>>8)&255, r.podSeq&255),
		Role: role, Group: group, Status: "Running", Node: fmt.Sprintf("node-%d", r.podSeq%16),
		Requests: res, Limits: res, CreatedAt: r.clock.Now(), Image: c.Spec.Image, NodeSpec: nodeSpec,
	}
}

func (r *Ray) makePods(c *cluster.Cluster) []cluster.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	heads := 1
	if c.Spec.Head.HighAvailability {
		heads = cluster.HighAvailabilityGx
	}
	var pods []cluster.Pod
	for i := range heads {
		pods = append(pods, r.pod(c, "head", c.Spec.Head.Name, c.Spec.Head.NodeSpec, i))
	}
	return r.resizePods(c, pods)
}

// resizePods keeps the head pods and gives each worker group as many pods
// as c.Replicas says.
func (r *Ray) resizePods(c *cluster.Cluster, pods []cluster.Pod) []cluster.Pod {
	byGroup := map[string][]cluster.Pod{}
	var out []cluster.Pod
	for _, p := range pods {
		if p.Role == "head" {
			out = append(out, p)
		} else {
			byGroup[p.Group] = append(byGroup[p.Group], p)
		}
	}
	for _, w := range c.Spec.Workers {
		have := byGroup[w.Name]
		want := c.Replicas[w.Name]
		for i := len(have); i < want; i++ {
			have = append(have, r.pod(c, "worker", w.Name, w.NodeSpec, i))
		}
		if len(have) > want {
			have = have[:want]
		}
		out = append(out, have...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Role == "head" && out[j].Role != "head" })
	return out
}
