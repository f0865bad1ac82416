package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// Resource group ids are DNS labels (C4): an id that is long or holds
// quotes and braces is refused at Register, stores nothing, and never
// becomes a metric label value.
func TestRegisterRefusesBadGroupIDs(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := dlc.New(dlc.WithMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for name, id := range map[string]string{
		"64 KiB with quotes and braces": strings.Repeat(`a"}{`, 16<<10),
		"64 characters":                 strings.Repeat("a", 64),
		"upper case":                    "RG-1",
		"underscore":                    "rg_1",
		"label syntax":                  `rg",x="y`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.ResourceGroups().Register(ctx, quota.Group{ID: id, Package: "pkg-1", Capacity: quota.Cores(8)})
			fs := errs.Fields(err)
			if !errors.Is(err, errs.ErrInvalid) || len(fs) != 1 || fs[0].Path != "id" || fs[0].Rule != "C4" {
				t.Fatalf("err = %v, want ErrInvalid at id (C4)", err)
			}
			if _, err := c.ResourceGroups().Get(ctx, id); !errs.IsNotFound(err) {
				t.Fatalf("Get after a refused Register: %v", err)
			}
		})
	}
	if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: strings.Repeat("a", 63), Package: "pkg-1", Capacity: quota.Cores(8)}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "resource_group" && l.GetValue() != strings.Repeat("a", 63) {
					t.Errorf("%s has resource_group %.40q", mf.GetName(), l.GetValue())
				}
			}
		}
	}
}

// A name whose claim the store refuses as taken, yet cannot read back
// (an object someone else made under the claim's name): Create is a
// conflict after a bounded number of attempts, not a loop until the
// context ends.
func TestClaimOfAnUnreadableNameIsBounded(t *testing.T) {
	var creates atomic.Int64
	f := newFixture(t, dlctest.MemoryOptions{Store: memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if w.Doc.Kind == "name" && w.Op == memory.OpCreate && strings.HasSuffix(w.Doc.ID, ":squatted") {
				creates.Add(1)
				return "", errs.Conflict(w.Doc.Kind, w.Doc.ID, "already exists (a foreign object)")
			}
			return next(ctx)
		}}})
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := f.c.Clusters().Create(ctx, f.spec("squatted", 1, 1))
	if !errors.Is(err, errs.ErrConflict) || !strings.Contains(err.Error(), "a foreign object") {
		t.Fatalf("Create: %v, want a conflict that says what holds the name", err)
	}
	if n := creates.Load(); n > 3 || time.Since(start) > 5*time.Second {
		t.Fatalf("%d claim attempts in %v: want at most 3", n, time.Since(start))
	}
	// The cluster was stored while its name was being claimed, and is
	// undone: deleted, saying why.
	f.settle()
	if l, _ := f.c.Clusters().List(f.ctx); len(l) != 0 {
		t.Fatalf("a refused Create left clusters: %v", l)
	}
	// The same through a template and a group, whose names are claimed too.
	_, err = f.c.Groups().Create(ctx, "squatted")
	if !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("group Create: %v", err)
	}
}

// Nil in place of what an operation writes or plans is ErrInvalid naming
// the field, with nothing stored, with or without an authorizer (each
// panicked before).
func TestNilInputsRefused(t *testing.T) {
	for _, withAuth := range []bool{false, true} {
		opts := []dlc.Option{}
		if withAuth {
			opts = append(opts, dlc.WithAuthorizer(auth.AllowAll()))
		}
		c, err := dlc.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		ctx := dlc.WithUser(context.Background(), "alice")
		for _, tc := range []struct {
			name, field string
			call        func() error
		}{
			{"Clusters().Create", "spec", func() error { _, err := c.Clusters().Create(ctx, nil); return err }},
			{"Clusters().Update", "cluster", func() error { _, err := c.Clusters().Update(ctx, nil); return err }},
			{"Clusters().PlanCreate", "spec", func() error { _, err := c.Clusters().PlanCreate(ctx, nil); return err }},
			{"Clusters().PlanUpdate", "cluster", func() error { _, err := c.Clusters().PlanUpdate(ctx, nil); return err }},
			{"Jobs().Create", "config", func() error { _, err := c.Jobs().Create(ctx, nil, dlc.SaveOptions{}); return err }},
			{"Jobs().Update", "record", func() error { _, err := c.Jobs().Update(ctx, nil); return err }},
			{"Templates().Save", "template", func() error { return c.Templates().Save(ctx, nil) }},
		} {
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				return tc.call()
			}()
			var fe *errs.FieldError
			if !errors.Is(err, errs.ErrInvalid) || !errors.As(err, &fe) || string(fe.Path) != tc.field {
				t.Errorf("authorizer %v: %s(nil): %v, want ErrInvalid at %q", withAuth, tc.name, err, tc.field)
			}
		}
		clusters, _ := c.Clusters().List(ctx)
		jobs, _ := c.Jobs().List(ctx)
		if len(clusters) != 0 || len(jobs) != 0 {
			t.Errorf("stored: %d clusters, %d jobs", len(clusters), len(jobs))
		}
		_ = c.Close()
	}
}
