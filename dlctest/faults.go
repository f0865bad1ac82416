package dlctest

import (
	"context"
	"fmt"
	"sync"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// Call is one call a Faulty backend makes to the backend it wraps.
type Call struct {
	Op   string // "create", "update", "delete" for store writes; the Ray call's name otherwise
	Kind string // the document's kind, or "ray"
	ID   string
}

// String writes the call as "update cluster/cls-1".
func (c Call) String() string { return c.Op + " " + c.Kind + "/" + c.ID }

// Fault says how a call fails: Before fails it without making it; After
// makes it and then fails, as a reply lost after the work was done.
type Fault int

// The faults.
const (
	NoFault Fault = iota
	Before
	After
)

// Faulty wraps a backend and can fail any of its store writes and Ray
// calls, the way a flaky network or API server does: failures are
// errors.Is dlc.ErrUnavailable. Reads and watches pass through. It counts
// the calls it passes, so a test can fail the n-th one. Safe for
// concurrent use.
type Faulty struct {
	dlc.Backend

	mu     sync.Mutex
	calls  []Call
	decide func(n int, c Call) Fault
}

// NewFaulty wraps b; decide is asked about every write and Ray call (n
// counts them from 0) and may be nil for none.
func NewFaulty(b dlc.Backend, decide func(n int, c Call) Fault) *Faulty {
	return &Faulty{Backend: b, decide: decide}
}

// Calls returns the writes and Ray calls made so far, in order.
func (f *Faulty) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// do makes call c through fn unless it is to fail.
func (f *Faulty) do(c Call, fn func() error) error {
	f.mu.Lock()
	n := len(f.calls)
	f.calls = append(f.calls, c)
	decide := f.decide
	f.mu.Unlock()
	fault := NoFault
	if decide != nil {
		fault = decide(n, c)
	}
	if fault == Before {
		return errs.Unavailable(c.String(), fmt.Errorf("injected fault before call %d", n))
	}
	err := fn()
	if fault == After && err == nil {
		return errs.Unavailable(c.String(), fmt.Errorf("injected fault after call %d: the reply was lost", n))
	}
	return err
}

// Create passes a store create through the fault injector.
func (f *Faulty) Create(ctx context.Context, d backend.Doc) (v string, err error) {
	err = f.do(Call{"create", d.Kind, d.ID}, func() error { v, err = f.Backend.Create(ctx, d); return err })
	return v, err
}

// Update passes a store update through the fault injector.
func (f *Faulty) Update(ctx context.Context, d backend.Doc) (v string, err error) {
	err = f.do(Call{"update", d.Kind, d.ID}, func() error { v, err = f.Backend.Update(ctx, d); return err })
	return v, err
}

// Delete passes a store delete through the fault injector.
func (f *Faulty) Delete(ctx context.Context, kind, id, version string) error {
	return f.do(Call{"delete", kind, id}, func() error { return f.Backend.Delete(ctx, kind, id, version) })
}

// ApplyCluster passes the Ray call through the fault injector.
func (f *Faulty) ApplyCluster(ctx context.Context, c *cluster.Cluster) error {
	return f.do(Call{"ApplyCluster", "ray", c.ID}, func() error { return f.Backend.ApplyCluster(ctx, c) })
}

// DeleteCluster passes the Ray call through the fault injector.
func (f *Faulty) DeleteCluster(ctx context.Context, id string) error {
	return f.do(Call{"DeleteCluster", "ray", id}, func() error { return f.Backend.DeleteCluster(ctx, id) })
}

// ClusterStatus passes the Ray call through the fault injector.
func (f *Faulty) ClusterStatus(ctx context.Context, id string) (o cluster.Observation, err error) {
	err = f.do(Call{"ClusterStatus", "ray", id}, func() error { o, err = f.Backend.ClusterStatus(ctx, id); return err })
	return o, err
}

// SubmitRun passes the Ray call through the fault injector.
func (f *Faulty) SubmitRun(ctx context.Context, r *job.Run, c *cluster.Cluster) error {
	return f.do(Call{"SubmitRun", "ray", r.ID}, func() error { return f.Backend.SubmitRun(ctx, r, c) })
}

// StopRun passes the Ray call through the fault injector.
func (f *Faulty) StopRun(ctx context.Context, id string) error {
	return f.do(Call{"StopRun", "ray", id}, func() error { return f.Backend.StopRun(ctx, id) })
}

// ForgetRun passes the Ray call through the fault injector, when the
// wrapped backend is a backend.RunForgetter; else it does nothing.
func (f *Faulty) ForgetRun(ctx context.Context, id string) error {
	fr, ok := f.Backend.(backend.RunForgetter)
	if !ok {
		return nil
	}
	return f.do(Call{"ForgetRun", "ray", id}, func() error { return fr.ForgetRun(ctx, id) })
}

// RunStatus passes the Ray call through the fault injector.
func (f *Faulty) RunStatus(ctx context.Context, id string) (o job.Observation, err error) {
	err = f.do(Call{"RunStatus", "ray", id}, func() error { o, err = f.Backend.RunStatus(ctx, id); return err })
	return o, err
}
