package dlc_test

// Regression tests for issue 21: a delete of a job config or a cluster
// group is fenced against a create, through another replica, of what
// depends on it (a run of the config, J17; a member of the group, G6). Each
// test forces one interleaving with a store hook; the ones named
// ...Inside... failed before the fence (a run of a deleted config left
// running; a cluster left in a deleted group).

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/job"
)

// orphanRuns names the runs of jobID that have not ended while the config
// is gone: what J17 forbids.
func (f *fixture) orphanRuns(jobID string) []string {
	f.t.Helper()
	if _, err := f.c.Jobs().Get(f.ctx, jobID); !errors.Is(err, dlc.ErrNotFound) {
		return nil
	}
	runs, err := f.c.Runs().List(f.ctx, dlc.RunListOptions{JobID: jobID})
	f.must(err)
	var out []string
	for _, r := range runs {
		if !r.State.Terminal() {
			out = append(out, r.ID+" "+string(r.State))
		}
	}
	return out
}

// fencedRun checks what a run create that lost to a delete of its config
// left: an error of the kind want, and no run of the config but failed
// ones, saying why, that end cleanly.
func (f *fixture) fencedRun(jobID string, err error, want error, why string) {
	f.t.Helper()
	if o := f.orphanRuns(jobID); len(o) > 0 {
		f.t.Fatalf("the job config is deleted and its runs %v have not ended (J17)", o)
	}
	if !errors.Is(err, want) {
		f.t.Fatalf("run create: %v, want %v", err, want)
	}
	f.settle()
	runs, lerr := f.c.Runs().List(f.ctx, dlc.RunListOptions{JobID: jobID})
	f.must(lerr)
	for _, r := range runs {
		if r.State != job.Failed || !strings.Contains(r.Message, why) {
			f.t.Errorf("run %s is %s (%s), want failed saying %q", r.ID, r.State, r.Message, why)
		}
	}
	f.must(f.c.CheckQuota(f.ctx))
}

func onCluster(t *testing.T) (*fixture, *func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error), *job.Record) {
	f, h := hooked(t)
	cl := f.runningCluster("c1")
	return f, h, f.job(dlc.NewJob("j").OnCluster(cl.ID))
}

// The whole delete, through another replica, falls between the run
// create's read of the config and its write of the run: the delete finds
// no run and deletes the config; the run, once stored, finds the config
// gone and fails. Before: the run was created and ran with its config
// deleted.
func TestRaceJobDeleteInsideRunCreate(t *testing.T) {
	f, h, rec := onCluster(t)
	b := f.m.NewClient()
	var delErr error
	fired := false
	*h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if marked(ctx) && !fired && w.Op == memory.OpCreate && w.Doc.Kind == "run" {
			fired = true
			delErr = b.Jobs().Delete(f.ctx, rec.ID)
		}
		return next(ctx)
	}
	_, err := f.c.Runs().Create(context.WithValue(f.ctx, markKey{}, true), rec.ID, dlc.RunOptions{})
	if !fired {
		t.Fatal("the hook never ran")
	}
	if delErr != nil {
		t.Fatalf("the delete, which saw no run: %v", delErr)
	}
	f.fencedRun(rec.ID, err, dlc.ErrNotFound, "deleted while the run was being created")
}

// The whole run create, through another replica, falls between the
// delete's look for runs and its delete of the config. The replica sees
// the delete's mark and refuses the run. Before: the run was created, then
// its config deleted.
func TestRaceRunCreateInsideJobDelete(t *testing.T) {
	f, h, rec := onCluster(t)
	b := f.m.NewClient()
	var runErr error
	fired := false
	*h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if marked(ctx) && !fired && w.Op == memory.OpDelete && w.Doc.Kind == "job" {
			fired = true
			_, runErr = b.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
		}
		return next(ctx)
	}
	if err := f.c.Jobs().Delete(context.WithValue(f.ctx, markKey{}, true), rec.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if !fired {
		t.Fatal("the hook never ran")
	}
	f.fencedRun(rec.ID, runErr, dlc.ErrState, "")
	if runs, _ := f.c.Runs().List(f.ctx, dlc.RunListOptions{JobID: rec.ID}); len(runs) != 0 {
		t.Errorf("a refused create stored runs %v", runs)
	}
}

// As TestRaceRunCreateInsideJobDelete, through a replica whose cache has
// not seen the mark: it stores the run, then reads the config from the
// store, finds the mark and fails the run; the delete, which looked for
// runs before, deletes the config.
func TestRaceRunCreateInsideJobDeleteLaggingCache(t *testing.T) {
	f, h, rec := onCluster(t)
	b, l := laggingReplica(f)
	defer l.release()
	var runErr error
	fired := false
	*h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if marked(ctx) && !fired && w.Op == memory.OpDelete && w.Doc.Kind == "job" {
			fired = true
			_, runErr = b.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
		}
		return next(ctx)
	}
	l.lag("job")
	if err := f.c.Jobs().Delete(context.WithValue(f.ctx, markKey{}, true), rec.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if !fired {
		t.Fatal("the hook never ran")
	}
	f.fencedRun(rec.ID, runErr, dlc.ErrState, "its job config is being deleted")
	if runs, _ := f.c.Runs().List(f.ctx, dlc.RunListOptions{JobID: rec.ID}); len(runs) != 1 {
		t.Errorf("runs %v, want the one the lagging replica stored", runs)
	}
}

// The other order: a run created (through another replica) just before
// the delete marks the config is seen by the delete's look for runs, in
// the store: the delete is refused and takes its mark off, and the run
// goes on.
func TestRaceRunCreateBeforeJobDeleteMark(t *testing.T) {
	f, h, rec := onCluster(t)
	b := f.m.NewClient()
	a, l := laggingReplica(f) // the deleting replica: its cache will not show the run
	defer l.release()
	var r *job.Run
	var runErr error
	fired := false
	*h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if marked(ctx) && !fired && w.Op == memory.OpUpdate && w.Doc.Kind == "job" {
			fired = true
			r, runErr = b.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
		}
		return next(ctx)
	}
	l.lag("run")
	err := a.Jobs().Delete(context.WithValue(f.ctx, markKey{}, true), rec.ID)
	if !fired {
		t.Fatal("the hook never ran: the delete wrote no mark")
	}
	if runErr != nil {
		t.Fatalf("the run, created before the mark: %v", runErr)
	}
	if !errors.Is(err, dlc.ErrState) {
		t.Fatalf("delete with a run just created: %v, want ErrState (J17)", err)
	}
	got, gerr := f.c.Jobs().Get(f.ctx, rec.ID)
	f.must(gerr)
	if !got.Deleting.IsZero() {
		t.Errorf("the refused delete left its mark: %+v", got.Deleting)
	}
	l.release()
	f.settle()
	if r = f.run(r.ID); r.State != job.Succeeded {
		t.Fatalf("run is %s: %s", r.State, r.Message)
	}
}

// A delete that dies between its mark and its delete leaves the mark:
// while it is held, a run or an edit of the config is refused; once it
// is no longer held, a run takes it off and goes on, and a delete
// proceeds as usual.
func TestJobDeleteMarkExpires(t *testing.T) {
	f, h, rec := onCluster(t)
	*h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if marked(ctx) && w.Op == memory.OpDelete && w.Doc.Kind == "job" {
			return "", errors.New("injected: the deleting process died")
		}
		return next(ctx)
	}
	if err := f.c.Jobs().Delete(context.WithValue(f.ctx, markKey{}, true), rec.ID); err == nil {
		t.Fatal("the delete did not fail")
	}
	got, err := f.c.Jobs().Get(f.ctx, rec.ID)
	f.must(err)
	if got.Deleting.IsZero() || got.Deleting.By != "alice" {
		t.Fatalf("no mark left: %+v", got.Deleting)
	}
	if _, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{}); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("a run while the mark is held: %v, want ErrState", err)
	}
	if _, err := f.c.Jobs().Edit(f.ctx, got); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("an edit while the mark is held: %v, want ErrState", err)
	}
	f.m.Clock.Advance(3 * time.Minute)
	r, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	if err != nil {
		t.Fatalf("a run once the mark is no longer held: %v", err)
	}
	if got, err = f.c.Jobs().Get(f.ctx, rec.ID); err != nil || !got.Deleting.IsZero() {
		t.Fatalf("the run did not take the old mark off: %+v, %v", got.Deleting, err)
	}
	if err := f.c.Jobs().Delete(f.ctx, rec.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("delete with the run not finished: %v, want ErrState", err)
	}
	f.settle()
	if r = f.run(r.ID); r.State != job.Succeeded {
		t.Fatalf("run is %s: %s", r.State, r.Message)
	}
	f.must(f.c.Jobs().Delete(f.ctx, rec.ID))
}
