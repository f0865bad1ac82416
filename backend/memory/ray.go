package memory

import (
	"context"
	"fmt"
	"slices"
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
	Create    time.Duration // a created (suspended) RayCluster appears
	Start     time.Duration // a start until the cluster runs
	Hibernate time.Duration // a hibernate until compute is released
	Delete    time.Duration // a delete until the cluster is gone
	Submit    time.Duration // a submitted job until its driver runs
	Run       time.Duration // a job's run time, unless its Outcome says otherwise
	// Terminate is how long a worker a lowered ceiling removes still runs
	// (Status "Terminating") before it is gone: KubeRay deletes the pod,
	// which runs out its termination grace, while the same reconcile
	// creates the pods of a group that grows (KubeRay v1.5.0,
	// raycluster_controller.go, reconcilePods). 0: gone at once.
	Terminate time.Duration
}

// DefaultDelays are short real-time delays, so that a program on the real
// clock sees every state without waiting long.
var DefaultDelays = Delays{
	Create: 20 * time.Millisecond, Start: 150 * time.Millisecond, Hibernate: 50 * time.Millisecond,
	Delete: 50 * time.Millisecond, Submit: 30 * time.Millisecond, Run: 200 * time.Millisecond,
	Terminate: 50 * time.Millisecond,
}

// Outcome is how a simulated run ends.
type Outcome struct {
	Fail    bool   // fail instead of succeed
	Message string // the final message
	// Logs are the lines the job prints once it runs; nil prints two
	// ("Job <run> submitted to <cluster>", "Running entrypoint: <it>").
	// The simulated Ray then adds one line when the job ends, "Job <run>
	// succeeded" or "Job <run> failed" (its state), or, when it is
	// stopped, "Job <run> <state>: <why>": a test that reads a run's logs
	// sees it last.
	Logs     []string
	Duration time.Duration // how long it runs; 0 means Delays.Run
}

// The names of the Ray calls, as RayHooks.Call sees them.
const (
	CallApplyCluster  = "ApplyCluster"
	CallDeleteCluster = "DeleteCluster"
	CallClusterStatus = "ClusterStatus"
	CallSubmitRun     = "SubmitRun"
	CallStopRun       = "StopRun"
	CallRunStatus     = "RunStatus"
	CallPods          = "Pods"
	CallLogs          = "Logs"
	CallDashboard     = "Dashboard"
	CallForgetRun     = "ForgetRun"
)

// RayHooks let a test decide what the simulated Ray does. Nil hooks mean
// every call goes through, every cluster starts and every run succeeds.
type RayHooks struct {
	// Call is called before every Ray call with its name (CallApplyCluster,
	// …) and the cluster or run id; a non-nil error fails the call, which
	// then changes nothing.
	Call func(ctx context.Context, call, id string) error
	// ClusterStart decides whether a starting cluster comes up; a non-nil
	// error makes it fail, with the error's text as the reason.
	ClusterStart func(c *cluster.Cluster) error
	// RunOutcome decides each run's outcome and log lines.
	RunOutcome func(r *job.Run) Outcome
	// Pods, when set, is told of every change of the pods Ray runs of a
	// cluster: made at a start, resized, removed at a suspend, a failure
	// or a delete (pods then empty), with the cluster as last applied.
	// It is called with Ray locked, in the order of the changes, so that
	// an observer sees every moment of what runs; it must return quickly,
	// must not call Ray and must not keep pods.
	Pods func(c *cluster.Cluster, pods []cluster.Pod)
}

// RayOptions configure the simulated Ray.
type RayOptions struct {
	Clock   backend.Clock // default RealClock
	Delays  *Delays       // default DefaultDelays
	Hooks   RayHooks
	Catalog quota.Catalog // node specs for pod requests; default quota.DefaultCatalog()
}

// Ray is a simulated KubeRay and Ray Jobs API: it provisions clusters with
// pods per node group (two heads with high availability), runs jobs, and
// tells its observers which cluster or run changed, after the configured
// delays. Every call is idempotent, as a real backend's must be. Safe for
// concurrent use.
type Ray struct {
	clock   backend.Clock
	delays  Delays
	hooks   RayHooks
	catalog quota.Catalog

	mu       sync.Mutex
	watchers backend.Watchers[func(kind, id string)]
	clusters map[string]*simCluster
	runs     map[string]*simRun
	podSeq   int
}

type simCluster struct {
	id       string
	spec     *cluster.Cluster // as last applied
	wantGen  int64            // the generation last applied
	obs      cluster.Observation
	timerSeq int // only the newest timer may act
	deleting bool
}

type simRun struct {
	id, clusterID  string
	started, ended time.Time
	state          job.RunState
	message        string
	logs           []string
	stops          []func() bool
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

// Observe calls f with "cluster" or "run" and the id whenever something of
// that cluster or run changed on Ray's side, until ctx is done. f is
// called from the simulation's own goroutine (or from the fake clock's
// Advance), never while Ray holds a lock; it must return quickly.
func (r *Ray) Observe(ctx context.Context, f func(kind, id string)) {
	r.watchers.Add(ctx, &r.mu, f, nil)
}

func (r *Ray) notify(kind, id string) {
	r.mu.Lock()
	fs := r.watchers.All()
	r.mu.Unlock()
	for _, f := range fs {
		f(kind, id)
	}
}

func (r *Ray) call(ctx context.Context, call, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.hooks.Call != nil {
		if err := r.hooks.Call(ctx, call, id); err != nil {
			return fmt.Errorf("ray %s %s: %w", call, id, err)
		}
	}
	return nil
}

// after runs f after d unless a newer step of the cluster replaced it;
// f returns the runs it ended, which are notified with the cluster.
func (r *Ray) after(sc *simCluster, d time.Duration, f func() []string) {
	sc.timerSeq++
	seq := sc.timerSeq
	r.clock.AfterFunc(d, func() {
		r.mu.Lock()
		if sc.timerSeq != seq || r.clusters[sc.id] != sc {
			r.mu.Unlock()
			return
		}
		ended := f()
		r.mu.Unlock()
		r.notify("cluster", sc.id)
		for _, id := range ended {
			r.notify("run", id)
		}
	})
}

// ApplyCluster makes the simulated Ray cluster follow c at c.Generation:
// a creating, created, hibernating or hibernated cluster is suspended (no
// pods), a starting or running one runs with c.Replicas workers (or fails,
// as ClusterStart decides). Applying a generation again, or an older one
// (a late apply from a replica behind), changes nothing.
func (r *Ray) ApplyCluster(ctx context.Context, c *cluster.Cluster) error {
	if err := r.call(ctx, CallApplyCluster, c.ID); err != nil {
		return err
	}
	c = c.DeepCopy()
	var run bool
	switch c.State {
	case cluster.Starting, cluster.Running:
		run = true
	case cluster.Creating, cluster.Created, cluster.Hibernating, cluster.Hibernated:
	default:
		return nil
	}
	r.mu.Lock()
	sc := r.clusters[c.ID]
	if sc == nil {
		sc = &simCluster{id: c.ID}
		r.clusters[c.ID] = sc
	}
	if sc.deleting || (sc.spec != nil && c.Generation <= sc.wantGen) {
		r.mu.Unlock()
		return nil
	}
	sc.spec, sc.wantGen = c, c.Generation
	gen := c.Generation
	immediate := false
	switch {
	case run && sc.obs.Phase == cluster.PhaseReady:
		// A running cluster takes new worker counts at once; the workers
		// it removes terminate (Delays.Terminate).
		sc.obs = cluster.Observation{Generation: gen, Phase: cluster.PhaseReady, Pods: r.terminate(sc, r.resizePods(c, sc.obs.Pods), sc.obs.Pods)}
		r.podsChanged(sc)
		sc.timerSeq++
		immediate = true
	case run:
		sc.obs.Phase = cluster.PhasePending
		r.after(sc, r.delays.Start, func() []string {
			if r.hooks.ClusterStart != nil {
				if err := r.hooks.ClusterStart(c); err != nil {
					sc.obs = cluster.Observation{Generation: gen, Phase: cluster.PhaseFailed, Reason: err.Error()}
					r.podsChanged(sc)
					return r.endRunsLocked(c.ID, "the cluster failed: "+err.Error())
				}
			}
			sc.obs = cluster.Observation{Generation: gen, Phase: cluster.PhaseReady, Pods: r.makePods(c)}
			r.podsChanged(sc)
			return nil
		})
	case sc.obs.Phase == cluster.PhaseSuspended:
		sc.obs.Generation = gen
		sc.timerSeq++
		immediate = true
	default:
		d := r.delays.Hibernate
		if sc.obs.Phase == "" {
			d = r.delays.Create
		}
		r.after(sc, d, func() []string {
			sc.obs = cluster.Observation{Generation: gen, Phase: cluster.PhaseSuspended, Pods: []cluster.Pod{}}
			r.podsChanged(sc)
			return r.endRunsLocked(c.ID, "the cluster was suspended")
		})
	}
	r.mu.Unlock()
	if immediate {
		r.notify("cluster", c.ID)
	}
	return nil
}

// podsChanged records when sc's pods changed (Observation.Since) and
// tells the Pods hook of them; the caller holds r.mu.
func (r *Ray) podsChanged(sc *simCluster) {
	sc.obs.Since = r.clock.Now()
	if r.hooks.Pods != nil && sc.spec != nil {
		r.hooks.Pods(sc.spec, sc.obs.Pods)
	}
}

// DeleteCluster ends the runs on the cluster and removes it after the
// delete delay; deleting a missing cluster is not an error.
func (r *Ray) DeleteCluster(ctx context.Context, id string) error {
	if err := r.call(ctx, CallDeleteCluster, id); err != nil {
		return err
	}
	r.mu.Lock()
	sc := r.clusters[id]
	if sc == nil || sc.deleting {
		r.mu.Unlock()
		return nil
	}
	sc.deleting = true
	ended := r.endRunsLocked(id, "the cluster was deleted")
	defer func() {
		for _, id := range ended {
			r.notify("run", id)
		}
	}()
	defer r.mu.Unlock()
	sc.timerSeq++
	seq := sc.timerSeq
	r.clock.AfterFunc(r.delays.Delete, func() {
		r.mu.Lock()
		if r.clusters[id] != sc || sc.timerSeq != seq {
			r.mu.Unlock()
			return
		}
		delete(r.clusters, id)
		sc.obs.Pods = nil
		r.podsChanged(sc)
		r.mu.Unlock()
		r.notify("cluster", id)
	})
	return nil
}

// ClusterStatus returns what Ray runs of the cluster, or an error that is
// errors.Is ErrNotFound when it has no such cluster (never applied, or
// deleted).
func (r *Ray) ClusterStatus(ctx context.Context, id string) (cluster.Observation, error) {
	if err := r.call(ctx, CallClusterStatus, id); err != nil {
		return cluster.Observation{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.clusters[id]
	if sc == nil {
		return cluster.Observation{}, errs.NotFound("ray cluster", id)
	}
	o := sc.obs
	o.Pods = append([]cluster.Pod(nil), o.Pods...)
	return o, nil
}

// SubmitRun starts run on cluster c under the run's id as submission id:
// submitting the same id again changes nothing. It fails with ErrConflict
// when Ray follows a newer generation of the cluster than c's (the
// caller's read is behind: the cluster may have been hibernated since). Its driver runs after
// the submit delay, and it ends as RunOutcome decides.
func (r *Ray) SubmitRun(ctx context.Context, run *job.Run, c *cluster.Cluster) error {
	if err := r.call(ctx, CallSubmitRun, run.ID); err != nil {
		return err
	}
	// What Ray's Jobs API would not run (a container beside the package),
	// as the Kubernetes backend refuses it before it submits.
	if err := run.Config.SubmitProblems().ToError(); err != nil {
		return err
	}
	run = run.DeepCopy()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs[run.ID] != nil {
		return nil // the same submission id: Ray never starts a job twice
	}
	sc := r.clusters[c.ID]
	if sc != nil && sc.wantGen > c.Generation {
		return errs.Conflict("ray cluster", c.ID, fmt.Sprintf("Ray follows its generation %d, newer than %d", sc.wantGen, c.Generation))
	}
	if sc == nil || sc.deleting || sc.obs.Phase != cluster.PhaseReady {
		return &errs.StateError{Kind: "ray cluster", ID: c.ID, Op: "submit a job", State: "not ready", Allowed: []string{string(cluster.PhaseReady)}}
	}
	sr := &simRun{id: run.ID, clusterID: c.ID, state: job.Provisioning}
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
		if sr.state.Terminal() {
			r.mu.Unlock()
			return
		}
		sr.state, sr.started = job.Running, r.clock.Now()
		sr.logs = append(sr.logs, out.Logs...)
		sr.stops = append(sr.stops, r.clock.AfterFunc(out.Duration, func() {
			r.mu.Lock()
			if sr.state.Terminal() {
				r.mu.Unlock()
				return
			}
			sr.state, sr.message, sr.ended = job.Succeeded, out.Message, r.clock.Now()
			if out.Fail {
				sr.state = job.Failed
				if sr.message == "" {
					sr.message = "the job's entrypoint exited with an error"
				}
			}
			sr.logs = append(sr.logs, fmt.Sprintf("Job %s %s", run.ID, sr.state))
			r.mu.Unlock()
			r.notify("run", run.ID)
		}))
		r.mu.Unlock()
		r.notify("run", run.ID)
	}))
	return nil
}

// StopRun stops a run; stopping an ended or unknown run is not an error.
func (r *Ray) StopRun(ctx context.Context, runID string) error {
	if err := r.call(ctx, CallStopRun, runID); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if sr := r.runs[runID]; sr != nil {
		r.endRunLocked(sr, job.Stopped, "stopped")
	}
	return nil
}

// ForgetRun lets go of all the simulated Ray knows of a run, its logs
// included, stopping it first should it still run (backend.RunForgetter):
// the client calls it as it deletes a finished run. Forgetting an unknown
// run is not an error.
func (r *Ray) ForgetRun(ctx context.Context, runID string) error {
	if err := r.call(ctx, CallForgetRun, runID); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if sr := r.runs[runID]; sr != nil {
		r.endRunLocked(sr, job.Stopped, "forgotten")
		delete(r.runs, runID)
	}
	return nil
}

// RunStatus returns the state of a submitted run (Provisioning until its
// driver runs), or an error that is errors.Is ErrNotFound when Ray has no
// job of that submission id.
func (r *Ray) RunStatus(ctx context.Context, runID string) (job.Observation, error) {
	if err := r.call(ctx, CallRunStatus, runID); err != nil {
		return job.Observation{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sr := r.runs[runID]
	if sr == nil {
		return job.Observation{}, errs.NotFound("ray job", runID)
	}
	return job.Observation{State: sr.state, Message: sr.message, StartedAt: sr.started, EndedAt: sr.ended}, nil
}

// RestartHead plays a cluster's Ray head restarting without fault
// tolerance: it forgets every job submitted to the cluster (their drivers
// die with it), and the observers are told of each. Asked of a job it
// forgot, Ray says it has no such job.
func (r *Ray) RestartHead(clusterID string) {
	r.mu.Lock()
	var forgot []string
	for id, sr := range r.runs {
		if sr.clusterID == clusterID {
			for _, s := range sr.stops {
				s()
			}
			delete(r.runs, id)
			forgot = append(forgot, id)
		}
	}
	r.mu.Unlock()
	sort.Strings(forgot)
	for _, id := range forgot {
		r.notify("run", id)
	}
}

// FailCluster plays a running cluster failing on Ray's side (its head
// lost, its nodes gone) without a change of its spec: Ray reports it
// failed, with reason, at the generation it follows, its pods are gone
// and its jobs end failed; the observers are told. The platform then
// takes the cluster abnormal. RecoverCluster brings it back. A cluster
// Ray does not run (not applied, not ready, being deleted) is left as it
// is.
func (r *Ray) FailCluster(id, reason string) {
	r.mu.Lock()
	sc := r.clusters[id]
	if sc == nil || sc.deleting || sc.obs.Phase != cluster.PhaseReady {
		r.mu.Unlock()
		return
	}
	sc.timerSeq++ // a step on its way no longer acts
	sc.obs = cluster.Observation{Generation: sc.wantGen, Phase: cluster.PhaseFailed, Reason: reason}
	r.podsChanged(sc)
	ended := r.endRunsLocked(id, "the cluster failed: "+reason)
	r.mu.Unlock()
	r.notify("cluster", id)
	for _, rid := range ended {
		r.notify("run", rid)
	}
}

// RecoverCluster plays Ray bringing a cluster that FailCluster (or a
// failed start) left failed back by itself (its head restarted, its nodes
// replaced): it is ready again at the generation it follows, with new
// pods, and the observers are told. The platform then takes an abnormal
// cluster back to running. A cluster that has not failed is left as it
// is.
func (r *Ray) RecoverCluster(id string) {
	r.mu.Lock()
	sc := r.clusters[id]
	if sc == nil || sc.deleting || sc.spec == nil || sc.obs.Phase != cluster.PhaseFailed {
		r.mu.Unlock()
		return
	}
	sc.timerSeq++
	sc.obs = cluster.Observation{Generation: sc.wantGen, Phase: cluster.PhaseReady, Pods: r.makePods(sc.spec)}
	r.podsChanged(sc)
	r.mu.Unlock()
	r.notify("cluster", id)
}

// endRunsLocked ends every unfinished run on the cluster as failed and
// returns their ids, by id.
func (r *Ray) endRunsLocked(clusterID, why string) []string {
	var ended []string
	for _, sr := range r.runs {
		if sr.clusterID == clusterID && r.endRunLocked(sr, job.Failed, why) {
			ended = append(ended, sr.id)
		}
	}
	sort.Strings(ended)
	return ended
}

func (r *Ray) endRunLocked(sr *simRun, st job.RunState, why string) bool {
	if sr.state.Terminal() {
		return false
	}
	sr.state, sr.message, sr.ended = st, why, r.clock.Now()
	for _, s := range sr.stops {
		s()
	}
	sr.logs = append(sr.logs, fmt.Sprintf("Job %s %s: %s", sr.id, st, why))
	return true
}

// Pods returns the cluster's pods.
func (r *Ray) Pods(ctx context.Context, clusterID string) ([]cluster.Pod, error) {
	if err := r.call(ctx, CallPods, clusterID); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sc := r.clusters[clusterID]
	if sc == nil {
		return nil, nil
	}
	return append([]cluster.Pod(nil), sc.obs.Pods...), nil
}

// Logs returns a run's log lines so far.
func (r *Ray) Logs(ctx context.Context, runID string) ([]string, error) {
	if err := r.call(ctx, CallLogs, runID); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sr := r.runs[runID]
	if sr == nil {
		return nil, nil
	}
	return append([]string(nil), sr.logs...), nil
}

// Dashboard returns the Ray dashboard address of a ready cluster, or "".
func (r *Ray) Dashboard(ctx context.Context, clusterID string) (string, error) {
	if err := r.call(ctx, CallDashboard, clusterID); err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if sc := r.clusters[clusterID]; sc != nil && sc.obs.Phase == cluster.PhaseReady {
		return fmt.Sprintf("http://%s-head-svc.memory:8265", clusterID), nil
	}
	return "", nil
}

func (r *Ray) pod(c *cluster.Cluster, role, group, nodeSpec string, i int) cluster.Pod {
	r.podSeq++
	res := quota.Resources{}
	if s, ok := r.catalog.Lookup(nodeSpec); ok {
		res = s.Resources()
	}
	return cluster.Pod{
		Name: podName(c, group, i), IP: fmt.Sprintf("10.%d.%d.%d", (r.podSeq>>16)&255, (r.podSeq>>8)&255, r.podSeq&255),
		Role: role, Group: group, Status: "Running", Node: fmt.Sprintf("node-%d", r.podSeq%16),
		Requests: res, Limits: res, CreatedAt: r.clock.Now(), Image: c.Spec.Image, NodeSpec: nodeSpec,
	}
}

// podName is the name of cluster c's i-th pod of node group group.
func podName(c *cluster.Cluster, group string, i int) string {
	return fmt.Sprintf("%s-%s-%d", c.ID, group, i)
}

// makePods gives the cluster its head pods (two with high availability)
// and its workers; the caller holds r.mu.
func (r *Ray) makePods(c *cluster.Cluster) []cluster.Pod {
	env := &c.Spec.Environment
	if c.Live != nil {
		env = &c.Live.Environment
	}
	heads := 1
	if env.Head.HighAvailability {
		heads = cluster.HighAvailabilityGx
	}
	var pods []cluster.Pod
	for i := range heads {
		pods = append(pods, r.pod(c, "head", env.Head.Name, env.Head.NodeSpec, i))
	}
	return r.resizePods(c, pods)
}

// podTerminating is the Status of a pod Ray has removed and that still
// runs out its termination grace.
const podTerminating = "Terminating"

// terminate returns pods, what Ray runs of cluster sc now, with the pods
// of before that are no longer among them still there, terminating, until
// Delays.Terminate has passed; the caller holds r.mu.
func (r *Ray) terminate(sc *simCluster, pods, before []cluster.Pod) []cluster.Pod {
	kept := map[string]bool{}
	for _, p := range pods {
		kept[p.Name] = true
	}
	var gone []string
	for _, p := range before {
		if !kept[p.Name] && r.delays.Terminate > 0 {
			p.Status = podTerminating
			pods = append(pods, p)
			gone = append(gone, p.Name)
		}
	}
	if len(gone) == 0 {
		return pods
	}
	r.clock.AfterFunc(r.delays.Terminate, func() {
		r.mu.Lock()
		if r.clusters[sc.id] != sc {
			r.mu.Unlock()
			return
		}
		n := len(sc.obs.Pods)
		sc.obs.Pods = slices.DeleteFunc(slices.Clone(sc.obs.Pods), func(p cluster.Pod) bool {
			return p.Status == podTerminating && slices.Contains(gone, p.Name)
		})
		if len(sc.obs.Pods) != n {
			if sc.obs.Phase == cluster.PhaseReady && !sc.deleting && sc.spec != nil &&
				(sc.spec.State == cluster.Starting || sc.spec.State == cluster.Running) {
				// The groups that waited for them take their size now.
				sc.obs.Pods = r.terminate(sc, r.resizePods(sc.spec, sc.obs.Pods), sc.obs.Pods)
			}
			r.podsChanged(sc)
		}
		r.mu.Unlock()
		r.notify("cluster", sc.id)
	})
	return pods
}

// resizePods keeps the head pods and gives each worker group as many pods
// as c.Replicas says; a new pod takes the lowest index no pod of its group
// has. A group some of whose pods still terminate is left as it is until
// they are gone (KubeRay v1.5.0 skips a group whose deletions its scale
// expectations have not yet seen, reconcilePods); the caller holds r.mu.
func (r *Ray) resizePods(c *cluster.Cluster, pods []cluster.Pod) []cluster.Pod {
	env := &c.Spec.Environment
	if c.Live != nil {
		env = &c.Live.Environment
	}
	byGroup := map[string][]cluster.Pod{}
	taken, waits := map[string]bool{}, map[string]bool{}
	var out []cluster.Pod
	for _, p := range pods {
		taken[p.Name] = true
		switch {
		case p.Status == podTerminating:
			waits[p.Group] = true
		case p.Role == "head":
			out = append(out, p)
		default:
			byGroup[p.Group] = append(byGroup[p.Group], p)
		}
	}
	for _, w := range env.Workers {
		have := byGroup[w.Name]
		want, ok := c.Replicas[w.Name]
		if !ok {
			want = w.Instances.Min
		}
		if waits[w.Name] {
			want = len(have)
		}
		for i := 0; len(have) < want; i++ {
			if !taken[podName(c, w.Name, i)] {
				taken[podName(c, w.Name, i)] = true
				have = append(have, r.pod(c, "worker", w.Name, w.NodeSpec, i))
			}
		}
		if len(have) > want {
			have = have[:want]
		}
		out = append(out, have...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Role == "head" && out[j].Role != "head" })
	return out
}
