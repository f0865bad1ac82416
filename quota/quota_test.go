package quota_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// J7: every node at least 1 CPU core and 2 GB; a GPU node at least 1 GPU.
func TestNodeLimitsJ7(t *testing.T) {
	cases := []struct {
		name     string
		spec     quota.NodeSpec
		wantPath string // "" = valid
		wantRule string
	}{
		{"J7 valid smallest CPU node", quota.NodeSpec{Name: "cu.1c2g", Kind: quota.CU, CPU: 1, MemoryGB: 2}, "", ""},
		{"J7 valid GPU node", quota.NodeSpec{Name: "gu.4c16g.1xt4", Kind: quota.GU, CPU: 4, MemoryGB: 16, GPU: 1, GPUType: "T4"}, "", ""},
		{"J7 no CPU", quota.NodeSpec{Name: "x", Kind: quota.CU, CPU: 0, MemoryGB: 2}, "nodeSpecs[0].cpu", "J7"},
		{"J7 one GB", quota.NodeSpec{Name: "x", Kind: quota.CU, CPU: 1, MemoryGB: 1}, "nodeSpecs[0].memoryGB", "J7"},
		{"J7 GPU node without GPU", quota.NodeSpec{Name: "x", Kind: quota.GU, CPU: 4, MemoryGB: 16, GPUType: "T4"}, "nodeSpecs[0].gpu", "J7"},
		{"C7 CPU node with GPU", quota.NodeSpec{Name: "x", Kind: quota.CU, CPU: 4, MemoryGB: 16, GPU: 1}, "nodeSpecs[0].gpu", "C7"},
		{"C7 valid largest node", quota.NodeSpec{Name: "gu.max", Kind: quota.GU, CPU: quota.MaxNodeCPU, MemoryGB: quota.MaxNodeMemory, GPU: quota.MaxNodeGPU, GPUType: "H800"}, "", ""},
		{"C7 too many cores", quota.NodeSpec{Name: "x", Kind: quota.CU, CPU: 1 << 53, MemoryGB: 2}, "nodeSpecs[0].cpu", "C7"},
		{"C7 too much memory", quota.NodeSpec{Name: "x", Kind: quota.CU, CPU: 1, MemoryGB: 1 << 40}, "nodeSpecs[0].memoryGB", "C7"},
		{"C7 too many GPUs", quota.NodeSpec{Name: "x", Kind: quota.GU, CPU: 8, MemoryGB: 32, GPU: 65, GPUType: "T4"}, "nodeSpecs[0].gpu", "C7"},
		{"C7 unknown kind", quota.NodeSpec{Name: "x", Kind: "TPU", CPU: 4, MemoryGB: 16}, "nodeSpecs[0].kind", "C7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := quota.NewCatalog(tc.spec)
			if tc.wantPath == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			fs := errs.Fields(err)
			if !errors.Is(err, errs.ErrInvalid) || len(fs) != 1 || string(fs[0].Path) != tc.wantPath || fs[0].Rule != tc.wantRule {
				t.Fatalf("got %v, want one problem at %s [%s]", err, tc.wantPath, tc.wantRule)
			}
		})
	}
	if _, err := quota.NewCatalog(quota.NodeSpec{Name: "a", Kind: quota.CU, CPU: 1, MemoryGB: 2},
		quota.NodeSpec{Name: "a", Kind: quota.CU, CPU: 2, MemoryGB: 4}); err == nil {
		t.Fatal("duplicate names accepted")
	}
}

func TestDefaultCatalog(t *testing.T) {
	c := quota.DefaultCatalog()
	if c.Len() < 10 {
		t.Fatalf("default catalog has %d specs", c.Len())
	}
	gpus := 0
	for _, s := range c.Specs() {
		if s.Kind == quota.GU {
			gpus++
		}
	}
	if gpus == 0 || gpus == c.Len() {
		t.Fatalf("default catalog should have CU and GU specs, has %d GU of %d", gpus, c.Len())
	}
	s, ok := c.Lookup("cu.4c16g")
	if !ok || s.Resources() != (quota.Resources{MilliCPU: 4000, Memory: 16 * quota.GiB}) {
		t.Fatalf("cu.4c16g = %+v %v", s, ok)
	}
}

func TestResourcesArithmetic(t *testing.T) {
	a := quota.Resources{MilliCPU: 4000, Memory: 16 * quota.GiB, GPU: 1}
	b := quota.Resources{MilliCPU: 1500, Memory: 2 * quota.GiB}
	cases := []struct {
		name string
		got  quota.Resources
		want quota.Resources
	}{
		{"add", a.Add(b), quota.Resources{5500, 18 * quota.GiB, 1}},
		{"sub", a.Sub(b), quota.Resources{2500, 14 * quota.GiB, 1}},
		{"mul", b.Mul(3), quota.Resources{4500, 6 * quota.GiB, 0}},
		{"min", a.Min(b), quota.Resources{1500, 2 * quota.GiB, 0}},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if !b.Fits(a) || a.Fits(b) || !b.Sub(a).AnyNegative() || a.AnyNegative() || !(quota.Resources{}).IsZero() {
		t.Error("Fits/AnyNegative/IsZero wrong")
	}
	if n := a.CountFits(b); n != 2 {
		t.Errorf("CountFits = %d, want 2", n)
	}
	if got := a.String(); got != "cpu=4 memory=16Gi gpu=1" {
		t.Errorf("String = %q", got)
	}
	if got := b.String(); got != "cpu=1500m memory=2Gi gpu=0" {
		t.Errorf("String = %q", got)
	}
}

// An account's reservations never go past its capacity nor below zero; a
// refused change changes nothing.
func TestAccount(t *testing.T) {
	now := time.Unix(0, 0)
	a := &quota.Account{Group: quota.Group{ID: "rg", Package: "p", Capacity: quota.Cores(8)}}
	steps := []struct {
		name        string
		do          func() (bool, error)
		wantChanged bool
		wantErr     error
		wantHeld    map[string]int64 // holder → cores
	}{
		{"reserve", func() (bool, error) { return a.Set("c1", quota.Cores(4), now) }, true, nil, map[string]int64{"c1": 4}},
		{"the same again changes nothing", func() (bool, error) { return a.Set("c1", quota.Cores(4), now) }, false, nil, map[string]int64{"c1": 4}},
		{"another holder fits", func() (bool, error) { return a.Set("c2", quota.Cores(3), now) }, true, nil, map[string]int64{"c1": 4, "c2": 3}},
		{"past the capacity is refused", func() (bool, error) { return a.Set("c3", quota.Cores(2), now) }, false, errs.ErrQuota, map[string]int64{"c1": 4, "c2": 3}},
		{"growing a holder counts only the difference", func() (bool, error) { return a.Set("c2", quota.Cores(4), now) }, true, nil, map[string]int64{"c1": 4, "c2": 4}},
		{"a negative reservation is invalid", func() (bool, error) { return a.Set("c2", quota.Cores(-1), now) }, false, errs.ErrInvalid, map[string]int64{"c1": 4, "c2": 4}},
		{"zero releases", func() (bool, error) { return a.Set("c2", quota.Resources{}, now) }, true, nil, map[string]int64{"c1": 4}},
		{"release", func() (bool, error) { return a.Release("c1"), nil }, true, nil, map[string]int64{}},
		{"release again", func() (bool, error) { return a.Release("c1"), nil }, false, nil, map[string]int64{}},
	}
	for _, s := range steps {
		changed, err := s.do()
		if changed != s.wantChanged || !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
			t.Fatalf("%s: changed %v, err %v", s.name, changed, err)
		}
		var sum int64
		for h, cores := range s.wantHeld {
			if got := a.Held(h); got != quota.Cores(cores) {
				t.Fatalf("%s: %s holds %v, want %d cores", s.name, h, got, cores)
			}
			sum += cores
		}
		if len(a.Holds()) != len(s.wantHeld) || a.Reserved() != quota.Cores(sum) || a.Allocatable() != quota.Cores(8-sum) {
			t.Fatalf("%s: holders %v, reserved %v, allocatable %v", s.name, a.Holds(), a.Reserved(), a.Allocatable())
		}
		if err := a.Check(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	if _, err := a.Set("c1", quota.Cores(6), now); err != nil {
		t.Fatal(err)
	}
	if err := a.SetCapacity(quota.Cores(5)); !errors.Is(err, errs.ErrQuota) || a.Capacity != quota.Cores(8) {
		t.Fatalf("capacity below the reserved: %v, capacity %v", err, a.Capacity)
	}
	if err := a.SetCapacity(quota.Cores(6)); err != nil || a.Capacity != quota.Cores(6) {
		t.Fatalf("capacity down to the reserved: %v, capacity %v", err, a.Capacity)
	}
	u := a.Usage()
	if u.Reserved != quota.Cores(6) || !u.Allocatable.IsZero() || u.Holders["c1"] != quota.Cores(6) || u.ID != "rg" {
		t.Fatalf("usage %+v", u)
	}
	cp := a.DeepCopy()
	cp.Release("c1")
	if a.Held("c1") != quota.Cores(6) {
		t.Fatal("a copy's change reached the account")
	}
	a.Pending["bad"] = quota.Hold{Resources: quota.Cores(-1)}
	if err := a.Check(); err == nil {
		t.Fatal("Check missed a negative reservation")
	}
}

// Resources arithmetic never wraps: the plain operations saturate at the
// int64 bounds and the checked ones say that they overflowed.
func TestResourcesOverflow(t *testing.T) {
	const maxI, minI = math.MaxInt64, math.MinInt64
	node := quota.Resources{MilliCPU: 4000, Memory: 8 * quota.GiB}
	cases := []struct {
		name    string
		checked func() (quota.Resources, error)
		plain   quota.Resources
		want    quota.Resources
		wantErr bool
	}{
		{"mul fits", func() (quota.Resources, error) { return node.MulChecked(1000) }, node.Mul(1000),
			quota.Resources{MilliCPU: 4_000_000, Memory: 8000 * quota.GiB}, false},
		{"mul 1<<62 instances", func() (quota.Resources, error) { return node.MulChecked(1 << 62) }, node.Mul(1 << 62),
			quota.Resources{MilliCPU: maxI, Memory: maxI}, true},
		{"mul MaxInt64 instances", func() (quota.Resources, error) { return node.MulChecked(maxI) }, node.Mul(maxI),
			quota.Resources{MilliCPU: maxI, Memory: maxI}, true},
		{"mul negative overflow", func() (quota.Resources, error) { return node.MulChecked(minI) }, node.Mul(minI),
			quota.Resources{MilliCPU: minI, Memory: minI}, true},
		{"mul -1 by MinInt64", func() (quota.Resources, error) { return quota.Resources{GPU: minI}.MulChecked(-1) },
			quota.Resources{GPU: minI}.Mul(-1), quota.Resources{GPU: maxI}, true},
		{"mul zero", func() (quota.Resources, error) { return quota.Resources{GPU: maxI}.MulChecked(0) },
			quota.Resources{GPU: maxI}.Mul(0), quota.Resources{}, false},
		{"add fits", func() (quota.Resources, error) { return node.AddChecked(node) }, node.Add(node),
			quota.Resources{MilliCPU: 8000, Memory: 16 * quota.GiB}, false},
		{"add overflows", func() (quota.Resources, error) { return quota.Resources{Memory: maxI}.AddChecked(node) },
			quota.Resources{Memory: maxI}.Add(node), quota.Resources{MilliCPU: 4000, Memory: maxI}, true},
		{"add negative overflows", func() (quota.Resources, error) {
			return quota.Resources{GPU: minI}.AddChecked(quota.Resources{GPU: -1})
		}, quota.Resources{GPU: minI}.Add(quota.Resources{GPU: -1}), quota.Resources{GPU: minI}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.checked()
			if got != tc.want || tc.plain != tc.want {
				t.Errorf("checked = %v, plain = %v, want %v", got, tc.plain, tc.want)
			}
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if err != nil && (!errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "overflows")) {
				t.Errorf("overflow error %v is not ErrInvalid or does not say so", err)
			}
		})
	}
	subs := []struct {
		name      string
		a, b, got quota.Resources
		want      quota.Resources
	}{
		{"sub saturates up", quota.Resources{MilliCPU: 1}, quota.Resources{MilliCPU: minI},
			quota.Resources{MilliCPU: 1}.Sub(quota.Resources{MilliCPU: minI}), quota.Resources{MilliCPU: maxI}},
		{"sub exact at the bound", quota.Resources{MilliCPU: -1}, quota.Resources{MilliCPU: minI},
			quota.Resources{MilliCPU: -1}.Sub(quota.Resources{MilliCPU: minI}), quota.Resources{MilliCPU: maxI}},
		{"sub saturates down", quota.Resources{GPU: minI}, quota.Resources{GPU: 1},
			quota.Resources{GPU: minI}.Sub(quota.Resources{GPU: 1}), quota.Resources{GPU: minI}},
	}
	for _, tc := range subs {
		if tc.got != tc.want {
			t.Errorf("%s: %v − %v = %v, want %v", tc.name, tc.a, tc.b, tc.got, tc.want)
		}
	}
}

// A resource group's id and package id are DNS labels of at most 63
// characters (C4): the id is a metric label value.
func TestGroupValidateIDs(t *testing.T) {
	cases := []struct {
		name, id, pkg string
		bad           []string // fields in error
	}{
		{"valid", "rg-1", "pkg-1", nil},
		{"valid 63", strings.Repeat("a", 63), "p", nil},
		{"id required", "", "p", []string{"id"}},
		{"id 64", strings.Repeat("a", 64), "p", []string{"id"}},
		{"id 64 KiB with quotes and braces", strings.Repeat(`"}{`, 64<<10/3), "p", []string{"id"}},
		{"id upper case", "RG", "p", []string{"id"}},
		{"id underscore", "rg_1", "p", []string{"id"}},
		{"id leading dash", "-rg", "p", []string{"id"}},
		{"id with a dot", "rg.1", "p", []string{"id"}},
		{"package not a label", "rg", "pkg 1", []string{"package"}},
		{"package required", "rg", "", []string{"package"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := quota.Group{ID: tc.id, Package: tc.pkg, Capacity: quota.Cores(1)}.Validate()
			var got []string
			for _, fe := range errs.Fields(err) {
				if fe.Rule != "C4" {
					t.Errorf("rule %q, want C4", fe.Rule)
				}
				got = append(got, fe.Path.String())
			}
			if !slices.Equal(got, tc.bad) || (tc.bad != nil) != errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("fields %v, want %v (%v)", got, tc.bad, err)
			}
		})
	}
}

// Accounts as read back after an edit from outside the platform (issue
// 18, item 6): settled holds edited absurdly, with the sum the platform's
// true-up makes of them (saturating): a corrupt hold never makes room,
// and Check names every absurd hold.
func TestAccountReadBack(t *testing.T) {
	now := time.Unix(0, 0)
	capacity := quota.Cores(8)
	huge := quota.Resources{MilliCPU: 1 << 62}
	cases := []struct {
		name        string
		holders     map[string]quota.Resources
		wantCorrupt []string
		setOK       bool // whether "new" can then reserve 2 cores
		wantCheck   []string
	}{
		{"two holds of 2^62 milli-CPU", map[string]quota.Resources{"a": huge, "b": huge}, []string{"a", "b"}, false,
			[]string{"holder a holds", "holder b holds", "reserved cpu="}},
		{"a negative hold makes no room", map[string]quota.Resources{"a": quota.Cores(7), "neg": quota.Cores(-100)}, []string{"neg"}, false,
			[]string{"holder neg negative"}},
		{"sane holds", map[string]quota.Resources{"a": quota.Cores(3), "b": quota.Cores(3)}, nil, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Settled holds as someone else left them, and the sum the
			// platform's true-up makes of them.
			a := &quota.Account{Group: quota.Group{ID: "rg", Package: "p", Capacity: capacity}}
			held := quota.HoldMap{}
			for h, r := range tc.holders {
				held[h] = quota.Hold{Resources: r, Since: now}
				a.Sum = a.Sum.Add(r.Max(quota.Resources{}))
			}
			a.Bind(held)
			if r := a.Reserved(); r.AnyNegative() {
				t.Fatalf("Reserved() = %s: wrapped negative", r)
			}
			var corrupt []string
			for h := range tc.holders {
				if a.Corrupt(h) {
					corrupt = append(corrupt, h)
				}
			}
			slices.Sort(corrupt)
			if !slices.Equal(corrupt, tc.wantCorrupt) {
				t.Errorf("corrupt holds = %v, want %v", corrupt, tc.wantCorrupt)
			}
			_, err := a.Set("new", quota.Cores(2), now)
			if (err == nil) != tc.setOK {
				t.Errorf("Set(new, 2 cores) = %v, want ok=%v", err, tc.setOK)
			}
			err = a.Check()
			for _, w := range tc.wantCheck {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Check() = %v, want it to say %q", err, w)
				}
			}
			if len(tc.wantCheck) == 0 && err != nil {
				t.Errorf("Check() = %v, want nil", err)
			}
			// Every hold can still be released, and a holder's own
			// reservation never counts against its change.
			for h := range tc.holders {
				if !a.Release(h) {
					t.Errorf("Release(%s) = false", h)
				}
			}
			if err := a.Check(); err != nil && tc.setOK {
				t.Errorf("after releases: %v", err)
			}
		})
	}
	// A holder's change is measured against the others only: shrinking an
	// inflated hold of a running cluster back to what it runs is allowed.
	a := &quota.Account{Group: quota.Group{ID: "rg", Package: "p", Capacity: capacity}, Sum: huge.Add(quota.Cores(2))}
	a.Bind(quota.HoldMap{"a": {Resources: huge}, "b": {Resources: quota.Cores(2)}})
	if _, err := a.Set("a", quota.Cores(4), now); err != nil {
		t.Fatalf("shrinking an inflated hold: %v", err)
	}
}

// A renewal always changes the hold, so that a release decided on the
// hold as it was conflicts with it: at the instant the hold was set, and
// from a clock behind the one that dated it, too.
func TestRenewAlwaysChangesTheHold(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &quota.Account{Group: quota.Group{ID: "rg", Capacity: quota.Resources{MilliCPU: 8000}}}
	if _, err := a.SetFor("c", quota.Resources{MilliCPU: 4000}, 2, t0); err != nil {
		t.Fatal(err)
	}
	for _, now := range []time.Time{t0.Add(time.Second), t0.Add(time.Second), t0.Add(-time.Minute)} {
		before, _ := a.Hold("c")
		if !a.Renew("c", now) {
			t.Fatalf("Renew at %s reported no change", now)
		}
		after, _ := a.Hold("c")
		if !after.Since.After(before.Since) || after.Resources != before.Resources || after.Generation != before.Generation {
			t.Fatalf("Renew at %s: %+v after %+v; want only a later date", now, after, before)
		}
	}
	if a.Renew("nobody", t0) {
		t.Fatal("Renew of no hold reported a change")
	}
}

// A change is a pending hold counted in the sum; settling drops it once
// its settled copy carries that very change; the true-up makes the sum
// the holds'; past MaxPending a new hold is refused as unavailable and a
// release still made.
func TestAccountPendingAndSettle(t *testing.T) {
	now := time.Unix(0, 0)
	held := quota.HoldMap{}
	a := &quota.Account{Group: quota.Group{ID: "rg", Capacity: quota.Cores(8)}}
	a.Bind(held)
	if _, err := a.Set("c1", quota.Cores(3), now); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Set("c1", quota.Cores(5), now); err != nil {
		t.Fatal(err)
	}
	p := a.Pending["c1"]
	if p.Seq != 2 || a.Seq != 2 || a.Reserved() != quota.Cores(5) || len(a.Pending) != 1 {
		t.Fatalf("after two changes of c1: pending %+v, seq %d, reserved %s", a.Pending, a.Seq, a.Reserved())
	}
	newer := func(x, y string) bool { return x > y }
	// A settled copy of the first change settles nothing.
	held["c1"] = quota.Hold{Resources: quota.Cores(3), Seq: 1}
	if a.Settle("c1", 1, "v1", newer) || a.Held("c1") != quota.Cores(5) {
		t.Fatalf("settled on an older change: %+v", a.Pending)
	}
	held["c1"] = p
	if !a.Settle("c1", 2, "v2", newer) || len(a.Pending) != 0 || a.Settled != "v2" || a.Held("c1") != quota.Cores(5) {
		t.Fatalf("settling change 2: pending %+v, settled %q, holds %s", a.Pending, a.Settled, a.Held("c1"))
	}
	if _, err := a.Set("c2", quota.Cores(4), now); !errors.Is(err, errs.ErrQuota) {
		t.Fatalf("c2 past the capacity, c1 settled: %v", err)
	}
	// Someone edits the settled copy down and the sum up: the true-up
	// makes the sum the holds'.
	held["c1"] = quota.Hold{Resources: quota.Cores(2), Seq: 2}
	a.Sum = quota.Cores(7)
	if !a.TrueUp() || a.Reserved() != quota.Cores(2) || a.TrueUp() {
		t.Fatalf("true-up: reserved %s", a.Reserved())
	}
	// The bound.
	big := &quota.Account{Group: quota.Group{ID: "big", Capacity: quota.Cores(1 << 20)}}
	for i := range quota.MaxPending {
		if _, err := big.Set(fmt.Sprint("h", i), quota.Cores(1), now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := big.Set("one-more", quota.Cores(1), now); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("past MaxPending: %v, want ErrUnavailable", err)
	}
	if _, err := big.Set("h1", quota.Cores(2), now); err != nil {
		t.Fatalf("a pending hold changed again past the bound: %v", err)
	}
	if !big.Release("h2") || big.Reserved() != quota.Cores(quota.MaxPending) {
		t.Fatalf("a release past the bound: reserved %s", big.Reserved())
	}
}

// TestPendingHoldsJSON: pending holds are one string each in JSON, read
// back as they were; the objects earlier versions stored are read too; what
// is not a hold is an error that says so, whatever its size.
func TestPendingHoldsJSON(t *testing.T) {
	since := time.Date(2026, 12, 5, 6, 0, 0, 500, time.FixedZone("CST", 8*3600))
	p := quota.PendingHolds{
		"cls-a": {Resources: quota.Resources{MilliCPU: 8000, Memory: 16 << 30, GPU: 1}, Since: since, Generation: 3, Seq: 42},
		"od-b":  {},                                                       // a release
		"bad":   {Resources: quota.Resources{MilliCPU: -1}, Since: since}, // as someone else may write it: kept, to be dropped as corrupt
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var strs map[string]string
	if err := json.Unmarshal(b, &strs); err != nil {
		t.Fatalf("%s: not strings: %v", b, err)
	}
	if got, want := strs["cls-a"], "8000,17179869184,1,3,42,2026-12-04T22:00:00.0000005Z"; got != want {
		t.Errorf("encoded %q, want %q", got, want)
	}
	var back quota.PendingHolds
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for holder, h := range p {
		if !back[holder].Same(h) || len(back) != len(p) {
			t.Errorf("%s read back as %+v, want %+v", holder, back[holder], h)
		}
	}

	for _, tc := range []struct {
		name, json string
		want       quota.Hold
		err        string
	}{
		{"object, as stored before", `{"h":{"resources":{"milliCPU":4000,"memory":8,"gpu":0},"since":"2026-12-05T06:00:00Z","generation":2,"seq":7}}`,
			quota.Hold{Resources: quota.Resources{MilliCPU: 4000, Memory: 8}, Since: time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC), Generation: 2, Seq: 7}, ""},
		{"object kept as a string", `{"h":"{\"resources\":{\"milliCPU\":1,\"memory\":0,\"gpu\":0},\"since\":\"2026-12-05T06:00:00Z\"}"}`,
			quota.Hold{Resources: quota.Resources{MilliCPU: 1}, Since: time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)}, ""},
		{"five fields", `{"h":"1,2,3,4,5"}`, quota.Hold{}, "is not milli-CPUs"},
		{"seven fields", `{"h":"1,2,3,4,5,2026-12-05T06:00:00Z,6"}`, quota.Hold{}, "is not milli-CPUs"},
		{"not a number", `{"h":"1,x,3,4,5,2026-12-05T06:00:00Z"}`, quota.Hold{}, "invalid syntax"},
		{"past int64", `{"h":"1,99999999999999999999,3,4,5,2026-12-05T06:00:00Z"}`, quota.Hold{}, "out of range"},
		{"not a date", `{"h":"1,2,3,4,5,yesterday"}`, quota.Hold{}, "cannot parse"},
		{"huge", `{"h":"` + strings.Repeat("1", 1<<20) + `"}`, quota.Hold{}, "a hold of 1048576 bytes"},
		{"a number", `{"h":7}`, quota.Hold{}, "pending hold of h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got quota.PendingHolds
			err := json.Unmarshal([]byte(tc.json), &got)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got["h"].Same(tc.want) {
				t.Errorf("read %+v, want %+v", got["h"], tc.want)
			}
		})
	}
}
