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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
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
	fired := inside(h, memory.OpCreate, "run", func() {
		delErr = b.Jobs().Delete(f.ctx, rec.ID)
	})
	_, err := f.c.Runs().Create(context.WithValue(f.ctx, markKey{}, true), rec.ID, dlc.RunOptions{})
	if !fired() {
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
	fired := inside(h, memory.OpDelete, "job", func() {
		_, runErr = b.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	})
	if err := f.c.Jobs().Delete(context.WithValue(f.ctx, markKey{}, true), rec.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if !fired() {
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
	fired := inside(h, memory.OpDelete, "job", func() {
		_, runErr = b.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	})
	l.lag("job")
	if err := f.c.Jobs().Delete(context.WithValue(f.ctx, markKey{}, true), rec.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if !fired() {
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
	fired := inside(h, memory.OpUpdate, "job", func() {
		r, runErr = b.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	})
	l.lag("run")
	err := a.Jobs().Delete(context.WithValue(f.ctx, markKey{}, true), rec.ID)
	if !fired() {
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
	if _, err := f.c.Jobs().Update(f.ctx, got); !errors.Is(err, dlc.ErrState) {
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

// dangling names the clusters that are in a group that does not exist:
// what a fenced group delete prevents (their edits and clones then fail
// C2).
func (f *fixture) dangling() []string {
	f.t.Helper()
	cls, err := f.c.Clusters().List(f.ctx)
	f.must(err)
	var out []string
	for _, cl := range cls {
		for _, g := range cl.Spec.Groups {
			if _, err := f.c.Groups().Get(f.ctx, g); errors.Is(err, dlc.ErrNotFound) {
				out = append(out, cl.ID+" in "+g)
			}
		}
	}
	return out
}

// groupWorld is a group to delete (g), a target for its members (target),
// and a created cluster in the fixture's group only (x), which the tests
// put into g while g is deleted.
func groupWorld(t *testing.T) (f *fixture, h *func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error), g, target string, x *cluster.Cluster) {
	f, h = hooked(t)
	gg, err := f.c.Groups().Create(f.ctx, "to-delete")
	f.must(err)
	tg, err := f.c.Groups().Create(f.ctx, "target")
	f.must(err)
	x, err = f.c.Clusters().Create(f.ctx, f.spec("x", 1, 1))
	f.must(err)
	f.settle()
	return f, h, gg.ID, tg.ID, x
}

// groupsOf checks that the cluster is in exactly want, in any order, and
// that no cluster is left in a deleted group.
func (f *fixture) groupsOf(id string, want ...string) {
	f.t.Helper()
	if d := f.dangling(); len(d) > 0 {
		f.t.Fatalf("clusters left in deleted groups: %v", d)
	}
	cl, err := f.c.Clusters().Get(f.ctx, id)
	f.must(err)
	got := slices.Sorted(slices.Values(cl.Spec.Groups))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		f.t.Fatalf("cluster %s is in %v, want %v", id, got, want)
	}
	// Its edit is not refused for a missing group (C2).
	_, err = f.c.Clusters().Update(f.ctx, cl)
	f.must(err)
}

// The whole group delete, through another replica, falls between
// AddMembers' read of the group and its write of the cluster: the delete
// finds no member and deletes the group; the cluster, once written, finds
// the group gone and is put back. Before: the cluster was left in the
// deleted group.
func TestRaceGroupDeleteInsideAddMembers(t *testing.T) {
	f, h, g, target, x := groupWorld(t)
	b := f.m.NewClient()
	var delErr error
	fired := inside(h, memory.OpUpdate, "cluster", func() {
		delErr = b.Groups().Delete(f.ctx, g, target)
	})
	err := f.c.Groups().AddMembers(context.WithValue(f.ctx, markKey{}, true), g, x.ID)
	if !fired() {
		t.Fatal("the hook never ran")
	}
	f.must(delErr)
	f.groupsOf(x.ID, f.grp)
	if !errors.Is(err, dlc.ErrNotFound) {
		t.Fatalf("AddMembers into a group deleted meanwhile: %v, want ErrNotFound", err)
	}
}

// The whole AddMembers, through another replica, falls between the
// delete's list of members and its delete of the group. The replica sees
// the delete's mark and refuses. Before: the cluster joined the group,
// which was then deleted.
func TestRaceAddMembersInsideGroupDelete(t *testing.T) {
	f, h, g, target, x := groupWorld(t)
	b := f.m.NewClient()
	var addErr error
	fired := inside(h, memory.OpDelete, "group", func() {
		addErr = b.Groups().AddMembers(f.ctx, g, x.ID)
	})
	f.must(f.c.Groups().Delete(context.WithValue(f.ctx, markKey{}, true), g, target))
	if !fired() {
		t.Fatal("the hook never ran")
	}
	f.groupsOf(x.ID, f.grp)
	if !errors.Is(addErr, dlc.ErrState) {
		t.Fatalf("AddMembers into a group being deleted: %v, want ErrState", addErr)
	}
}

// As TestRaceAddMembersInsideGroupDelete, through a replica whose cache
// has not seen the mark: it writes the cluster into the group, reads the
// group from the store, finds the mark and puts the cluster back.
func TestRaceAddMembersInsideGroupDeleteLaggingCache(t *testing.T) {
	f, h, g, target, x := groupWorld(t)
	b, l := laggingReplica(f)
	defer l.release()
	var addErr error
	fired := inside(h, memory.OpDelete, "group", func() {
		addErr = b.Groups().AddMembers(f.ctx, g, x.ID)
	})
	l.lag("group")
	f.must(f.c.Groups().Delete(context.WithValue(f.ctx, markKey{}, true), g, target))
	if !fired() {
		t.Fatal("the hook never ran")
	}
	f.groupsOf(x.ID, f.grp)
	if !errors.Is(addErr, dlc.ErrState) {
		t.Fatalf("AddMembers into a group being deleted: %v, want ErrState", addErr)
	}
}

// The other order: a cluster put into the group (through another replica)
// just before the delete marks it is found by the delete's list, in the
// store, and moved into the target.
func TestRaceAddMembersBeforeGroupDeleteMark(t *testing.T) {
	f, h, g, target, x := groupWorld(t)
	b := f.m.NewClient()
	a, l := laggingReplica(f) // the deleting replica: its cache will not show the new member
	defer l.release()
	var addErr error
	fired := inside(h, memory.OpUpdate, "group", func() {
		addErr = b.Groups().AddMembers(f.ctx, g, x.ID)
	})
	l.lag("cluster")
	f.must(a.Groups().Delete(context.WithValue(f.ctx, markKey{}, true), g, target))
	if !fired() {
		t.Fatal("the hook never ran: the delete wrote no mark")
	}
	f.must(addErr)
	f.groupsOf(x.ID, f.grp, target)
}

// A cluster created into a group, through a replica whose cache has not
// seen the group's delete begin, between the delete's list of members and
// its delete of the group: the create is undone (the cluster deleted) and
// fails C2. Before: the new cluster was left in the deleted group.
func TestRaceClusterCreateInsideGroupDelete(t *testing.T) {
	f, h, g, target, _ := groupWorld(t)
	b, l := laggingReplica(f)
	defer l.release()
	var createErr error
	spec := f.spec("y", 1, 1)
	spec.Groups = []string{g}
	fired := inside(h, memory.OpDelete, "group", func() {
		_, createErr = b.Clusters().Create(f.ctx, spec)
	})
	l.lag("group")
	f.must(f.c.Groups().Delete(context.WithValue(f.ctx, markKey{}, true), g, target))
	if !fired() {
		t.Fatal("the hook never ran")
	}
	l.release()
	f.settle()
	if d := f.dangling(); len(d) > 0 {
		t.Fatalf("clusters left in deleted groups: %v", d)
	}
	if !errors.Is(createErr, dlc.ErrInvalid) || !strings.Contains(createErr.Error(), "C2") {
		t.Fatalf("create into a group being deleted: %v, want ErrInvalid (C2)", createErr)
	}
	// Undone: the name is free again.
	spec.Groups = []string{f.grp}
	_, err := f.c.Clusters().Create(f.ctx, spec)
	f.must(err)
}

// The whole group delete, through another replica, falls between a
// cluster create's check of its groups and its write: the create, once
// stored, finds its group gone and is undone.
func TestRaceGroupDeleteInsideClusterCreate(t *testing.T) {
	f, h, g, target, _ := groupWorld(t)
	spec := f.spec("y", 1, 1)
	spec.Groups = []string{g, f.grp}
	createUndoneByGroupDelete(t, f, h, spec, g, target, nil)
	if cls, _ := f.c.Clusters().List(f.ctx); len(cls) != 1 {
		t.Fatalf("clusters %d, want only x: the undone create is not deleted", len(cls))
	}
}

// A cluster's create reads its groups beside its write (the G6 fence off
// the caller's path). Here the read is made first, finds the group live,
// and then the whole group delete, through another replica, falls before
// the cluster's write: the delete's list of members cannot see the
// cluster, and the read saw no mark. The write returned more than the
// fence's window (a second) after the read began, since the delete waits
// that long after its mark: the create reads its groups again, finds the
// group gone and is undone. Before the delete's wait and the create's
// check of the window, the cluster was left in the deleted group.
func TestRaceGroupDeleteAfterClusterCreateReadIt(t *testing.T) {
	f, h, g, target, read, _ := readWorld(t)
	spec := f.spec("y", 1, 1)
	spec.Groups = []string{g}
	// The create's read of the group is made (or being made: then it
	// finds the mark, and the create is undone all the same).
	createUndoneByGroupDelete(t, f, h, spec, g, target, read)
	if cls, _ := f.c.Clusters().List(f.ctx); len(cls) != 0 {
		t.Fatalf("clusters %d, want none: the undone create is not deleted", len(cls))
	}
}

// deleteKey marks a group delete's context, for readWorld's hook.
type deleteKey struct{}

// readWorld is a fixture with a group to delete (g) and a target for its
// members, whose store closes read at the first read of g by a call marked
// with markKey (a cluster's create reading its group), and listed at the
// first list of clusters by a call marked with deleteKey (a group
// delete's list of the members).
func readWorld(t *testing.T) (f *fixture, h *func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error),
	g, target string, read, listed <-chan struct{}) {
	var gid atomic.Value // g, once made
	r, l := make(chan struct{}), make(chan struct{})
	var readOnce, listOnce sync.Once
	f, h = hookedWith(t, dlctest.MemoryOptions{Store: memory.StoreHooks{
		Read: func(ctx context.Context, kind, id string) error {
			switch {
			case marked(ctx) && kind == "group" && id != "" && id == gid.Load():
				readOnce.Do(func() { close(r) })
			case ctx.Value(deleteKey{}) != nil && kind == "cluster" && id == "":
				listOnce.Do(func() { close(l) })
			}
			return nil
		}}})
	gg, err := f.c.Groups().Create(f.ctx, "to-delete")
	f.must(err)
	tg, err := f.c.Groups().Create(f.ctx, "target")
	f.must(err)
	gid.Store(gg.ID)
	return f, h, gg.ID, tg.ID, r, l
}

// The case the group delete's wait is for: the create's read finds no
// mark; the delete, through another replica, marks; the cluster's write
// lands while the delete waits (well within the window of the read). The
// delete's list, after its wait, sees the cluster and moves it into the
// target; both succeed. (On a machine so slow that the write returned more
// than the window after the read, the create reads again, finds the mark,
// and is undone: also no cluster left in a deleted group.) A delete that
// listed before its wait would miss the cluster: the write waits for the
// delete's list, or for half the window.
func TestRaceClusterWrittenDuringGroupDeleteWait(t *testing.T) {
	f, h, g, target, read, listed := readWorld(t)
	markWritten := make(chan struct{})
	var markOnce sync.Once
	b := f.m.NewClient()
	delCtx := context.WithValue(f.ctx, deleteKey{}, true)
	deleted := make(chan error, 1)
	*h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		switch {
		case ctx.Value(deleteKey{}) != nil && w.Op == memory.OpUpdate && w.Doc.Kind == "group" && w.Doc.ID == g:
			v, err := next(ctx) // the delete's first write of the group: its mark
			markOnce.Do(func() { close(markWritten) })
			return v, err
		case marked(ctx) && w.Op == memory.OpCreate && w.Doc.Kind == "cluster":
			go func() { <-read; deleted <- b.Groups().Delete(delCtx, g, target) }()
			<-markWritten
			select { // half the window (joinWindow, internal/platform/fences.go)
			case <-listed:
			case <-time.After(500 * time.Millisecond):
			}
		}
		return next(ctx)
	}
	spec := f.spec("y", 1, 1)
	spec.Groups = []string{g}
	cl, err := f.c.Clusters().Create(context.WithValue(f.ctx, markKey{}, true), spec)
	f.must(<-deleted)
	f.settle()
	if d := f.dangling(); len(d) > 0 {
		t.Fatalf("clusters left in deleted groups: %v", d)
	}
	switch {
	case err == nil:
		f.groupsOf(cl.ID, target)
	case errors.Is(err, dlc.ErrInvalid) && strings.Contains(err.Error(), "C2"):
		t.Log("the write came after the window: the create read its group again and was undone")
	default:
		t.Fatalf("create: %v", err)
	}
}

// createUndoneByGroupDelete creates spec with the whole delete of group
// g into target, through another replica, inside the cluster's write
// (once wait, when not nil, is closed), and checks that the create failed
// C2 and that no cluster is left in a deleted group.
func createUndoneByGroupDelete(t *testing.T, f *fixture, h *func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error),
	spec *cluster.Spec, g, target string, wait <-chan struct{}) {
	t.Helper()
	b := f.m.NewClient()
	var delErr error
	fired := inside(h, memory.OpCreate, "cluster", func() {
		if wait != nil {
			select {
			case <-wait:
			case <-time.After(30 * time.Second):
				t.Error("what the delete waits for never came")
			}
		}
		delErr = b.Groups().Delete(f.ctx, g, target)
	})
	_, err := f.c.Clusters().Create(context.WithValue(f.ctx, markKey{}, true), spec)
	if !fired() {
		t.Fatal("the hook never ran")
	}
	f.must(delErr)
	f.settle()
	if d := f.dangling(); len(d) > 0 {
		t.Fatalf("clusters left in deleted groups: %v", d)
	}
	if !errors.Is(err, dlc.ErrInvalid) || !strings.Contains(err.Error(), "C2") {
		t.Fatalf("create into a group deleted meanwhile: %v, want ErrInvalid (C2)", err)
	}
}

// An edit that puts a cluster into a group deleted meanwhile (the whole
// delete, through another replica, between the edit's check and its
// write): the cluster's groups are put back, the edit fails C2.
func TestRaceGroupDeleteInsideClusterEdit(t *testing.T) {
	f, h, g, target, x := groupWorld(t)
	b := f.m.NewClient()
	var delErr error
	fired := inside(h, memory.OpUpdate, "cluster", func() {
		delErr = b.Groups().Delete(f.ctx, g, target)
	})
	in, err := f.c.Clusters().Get(f.ctx, x.ID)
	f.must(err)
	in.Spec.Groups = []string{g} // out of the fixture's group, into g
	_, err = f.c.Clusters().Update(context.WithValue(f.ctx, markKey{}, true), in)
	if !fired() {
		t.Fatal("the hook never ran")
	}
	f.must(delErr)
	f.groupsOf(x.ID, f.grp)
	if !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("edit into a group deleted meanwhile: %v, want ErrInvalid (C2)", err)
	}
}

// A group delete whose target is deleted (through another replica) while
// the members move into it: the members are put back, the delete fails
// saying to name another target, and takes its mark off. Before: the
// members were moved into the deleted target.
func TestRaceGroupDeleteTargetDeleted(t *testing.T) {
	f, h, g, target, x := groupWorld(t)
	f.must(f.c.Groups().AddMembers(f.ctx, g, x.ID))
	f.must(f.c.Groups().RemoveMembers(f.ctx, f.grp, x.ID)) // x is in g alone
	b := f.m.NewClient()
	var delErr error
	fired := inside(h, memory.OpUpdate, "cluster", func() {
		delErr = b.Groups().Delete(f.ctx, target, f.grp)
	})
	err := f.c.Groups().Delete(context.WithValue(f.ctx, markKey{}, true), g, target)
	if !fired() {
		t.Fatal("the hook never ran")
	}
	f.must(delErr)
	f.groupsOf(x.ID, g)
	if !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("delete into a target deleted meanwhile: %v, want ErrInvalid", err)
	}
	got, gerr := f.c.Groups().Get(f.ctx, g)
	f.must(gerr)
	if !got.Deleting.IsZero() {
		t.Fatalf("the failed delete left its mark: %+v", got.Deleting)
	}
	f.must(f.c.Groups().Delete(f.ctx, g, f.grp))
	f.groupsOf(x.ID, f.grp)
}

// A group delete that dies between its mark and its delete leaves the
// mark: while it is held the group takes no member and is not deleted
// again; once it is no longer held, AddMembers takes it off and goes on,
// and a delete proceeds.
func TestGroupDeleteMarkExpires(t *testing.T) {
	f, h, g, target, x := groupWorld(t)
	var died atomic.Bool // at its delete of the group: nothing it writes after lands
	*h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if marked(ctx) && w.Doc.Kind == "group" && (w.Op == memory.OpDelete || died.Load()) {
			died.Store(true)
			return "", errors.New("injected: the deleting process died")
		}
		return next(ctx)
	}
	if err := f.c.Groups().Delete(context.WithValue(f.ctx, markKey{}, true), g, target); err == nil {
		t.Fatal("the delete did not fail")
	}
	got, err := f.c.Groups().Get(f.ctx, g)
	f.must(err)
	if got.Deleting.Target != target || got.Deleting.By != "alice" {
		t.Fatalf("mark %+v, want one into %s", got.Deleting, target)
	}
	if err := f.c.Groups().AddMembers(f.ctx, g, x.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("AddMembers while the mark is held: %v, want ErrState", err)
	}
	spec := f.spec("y", 1, 1)
	spec.Groups = []string{g}
	if _, err := f.c.Clusters().Create(f.ctx, spec); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("a cluster created into the group while the mark is held: %v, want ErrInvalid", err)
	}
	if err := f.c.Groups().Delete(f.ctx, g, f.grp); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("a second delete while the mark is held: %v, want ErrState", err)
	}
	if err := f.c.Groups().Delete(f.ctx, f.grp, g); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("a delete into the group while the mark is held: %v, want ErrInvalid", err)
	}
	f.m.Clock.Advance(3 * time.Minute)
	f.must(f.c.Groups().AddMembers(f.ctx, g, x.ID))
	if got, err = f.c.Groups().Get(f.ctx, g); err != nil || !got.Deleting.IsZero() {
		t.Fatalf("AddMembers did not take the old mark off: %+v, %v", got.Deleting, err)
	}
	f.must(f.c.Groups().Delete(f.ctx, g, target))
	f.groupsOf(x.ID, f.grp, target)
}

// A group delete that fails after its mark takes the mark off, though
// the group was written meanwhile (here: renamed through another replica
// while the delete waited, and the delete's caller gave up). Before, the
// mark was taken off by a write over the version the mark made, which
// the rename had moved on: it stayed, and refused members and creates
// into the group for two minutes.
func TestFailedGroupDeleteTakesItsMarkOff(t *testing.T) {
	f, h, g, target, x := groupWorld(t)
	b := f.m.NewClient()
	ctx, cancel := context.WithCancel(context.WithValue(f.ctx, markKey{}, true))
	defer cancel()
	var renameErr error
	*h = func(hctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		v, err := next(hctx)
		if marked(hctx) && w.Op == memory.OpUpdate && w.Doc.Kind == "group" && err == nil && ctx.Err() == nil {
			_, renameErr = b.Groups().Rename(f.ctx, g, "renamed") // the mark is written; the delete waits
			cancel()
		}
		return v, err
	}
	if err := f.c.Groups().Delete(ctx, g, target); !errors.Is(err, context.Canceled) {
		t.Fatalf("a delete given up while it waited: %v, want context.Canceled", err)
	}
	f.must(renameErr)
	got, err := f.c.Groups().Get(f.ctx, g)
	f.must(err)
	if !got.Deleting.IsZero() || got.Name != "renamed" {
		t.Fatalf("after the failed delete: %q, mark %+v; want renamed, no mark", got.Name, got.Deleting)
	}
	f.must(f.c.Groups().AddMembers(f.ctx, g, x.ID))
}

// A rename of the group while its delete moves the members makes the
// delete's last step conflict; the delete reads the group again, finds
// its own mark (carried by the rename) and goes on.
func TestGroupDeleteRenamedMeanwhile(t *testing.T) {
	f, h, g, target, x := groupWorld(t)
	f.must(f.c.Groups().AddMembers(f.ctx, g, x.ID))
	b := f.m.NewClient()
	var renameErr error
	fired := inside(h, memory.OpUpdate, "cluster", func() {
		_, renameErr = b.Groups().Rename(f.ctx, g, "renamed")
	})
	f.must(f.c.Groups().Delete(context.WithValue(f.ctx, markKey{}, true), g, target))
	if !fired() {
		t.Fatal("the hook never ran")
	}
	f.must(renameErr)
	if _, err := f.c.Groups().Get(f.ctx, g); !errors.Is(err, dlc.ErrNotFound) {
		t.Fatalf("the group after its delete: %v", err)
	}
	f.groupsOf(x.ID, f.grp, target)
}

// A run stored by a create that died before it read its job config again
// (fenceRun), while the config was deleted, does not wait for ever with no
// config: its reconciler fails it, saying why (J17).
func TestRunOfADeletedConfigFromACrashedCreateFails(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	rec := f.job(dlc.NewJob("j").OnGroup(f.grp)) // no member runs: the run waits
	r := f.start(rec.ID)
	if r.State != job.Waiting {
		t.Fatalf("run %s, want waiting", r.State)
	}
	// The config deleted past the fence, as a delete whose list came
	// before the crashed create stored its run would.
	d, err := f.m.Backend.Get(f.ctx, "job", rec.ID)
	f.must(err)
	f.must(f.m.Backend.Delete(f.ctx, "job", rec.ID, d.Version))
	f.c.Reconcile()
	f.settle()
	if got := f.run(r.ID); got.State != job.Failed || !strings.Contains(got.Message, "job config was deleted") {
		t.Fatalf("a waiting run of a deleted config: %s %q, want failed", got.State, got.Message)
	}
}

// A create fenced off by its group's delete whose undo fails too: the
// caller hears that the cluster is still stored, naming it, and the
// cluster's log says that its group does not exist, once.
func TestCreateUndoFailureSaid(t *testing.T) {
	f, h, g, target, _ := groupWorld(t)
	b := f.m.NewClient()
	var delErr error
	var fired, refused atomic.Bool
	*h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if marked(ctx) && w.Op == memory.OpCreate && w.Doc.Kind == "cluster" && fired.CompareAndSwap(false, true) {
			delErr = b.Groups().Delete(f.ctx, g, target)
		}
		if marked(ctx) && w.Op == memory.OpUpdate && w.Doc.Kind == "cluster" && fired.Load() && refused.CompareAndSwap(false, true) {
			return "", errs.Unavailable("store update cluster", errors.New("refused by the test"))
		}
		return next(ctx)
	}
	spec := f.spec("y", 1, 1)
	spec.Groups = []string{g, f.grp}
	_, err := f.c.Clusters().Create(context.WithValue(f.ctx, markKey{}, true), spec)
	f.must(delErr)
	if !refused.Load() {
		t.Fatal("the undo was not refused")
	}
	if !errors.Is(err, dlc.ErrInvalid) || !strings.Contains(err.Error(), "was stored and could not be deleted again") {
		t.Fatalf("a create whose undo failed: %v, want C2 and the cluster it left", err)
	}
	f.settle()
	f.m.Clock.Advance(6 * time.Minute) // a resync
	f.settle()
	d := f.dangling()
	if len(d) != 1 {
		t.Fatalf("clusters in deleted groups: %v, want the one left", d)
	}
	cls, err := f.c.Clusters().List(f.ctx)
	f.must(err)
	for _, cl := range cls {
		if cl.Spec.Name != "y" {
			continue
		}
		if said := entries(cl.Events, "group-missing", g); said != 1 {
			t.Errorf("the cluster left in a deleted group says so %d times in its log, want once: %+v", said, cl.Events)
		}
	}
}
