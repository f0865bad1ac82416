package dlc_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
)

// New refuses a value just outside an option's range with ErrInvalid,
// naming the option (and its parameter), and accepts the values at the
// edge of the range, the defaults and the zero values that mean
// something (docs/options.md). WithWorkers(0) in every case: no client
// made here starts a worker.
func TestOptionRanges(t *testing.T) {
	const ns = time.Nanosecond
	for _, tc := range []struct {
		name string
		opts []dlc.Option
		bad  []string // the fields of the error; none: accepted
	}{
		{"defaults", nil, nil},
		{"nil and empty: the defaults", []dlc.Option{dlc.WithBackend(nil), dlc.WithClock(nil), dlc.WithCatalogs(cluster.Catalogs{}),
			dlc.WithPolicy(nil), dlc.WithCOS(nil), dlc.WithLogger(logr.Logger{}), dlc.WithMetrics(nil), dlc.WithAuthorizer(nil),
			dlc.WithLogsLocation("")}, nil},
		{"a backend", []dlc.Option{dlc.WithBackend(memory.New(memory.Options{}))}, nil},

		{"WithWorkers 0", []dlc.Option{dlc.WithWorkers(0)}, nil},
		{"WithWorkers -1", []dlc.Option{dlc.WithWorkers(-1)}, []string{"WithWorkers"}},

		{"WithMaxWait 0", []dlc.Option{dlc.WithMaxWait(0)}, nil},
		{"WithMaxWait -1ns", []dlc.Option{dlc.WithMaxWait(-ns)}, []string{"WithMaxWait"}},

		{"WithRetries 0, 0, default base", []dlc.Option{dlc.WithRetries(0, 0, 10*time.Millisecond)}, nil},
		{"WithRetries 0, 1ns, 1ns", []dlc.Option{dlc.WithRetries(0, ns, ns)}, nil},
		{"WithRetries retries -1", []dlc.Option{dlc.WithRetries(-1, time.Millisecond, time.Second)}, []string{"WithRetries.retries"}},
		{"WithRetries base -1ns", []dlc.Option{dlc.WithRetries(8, -ns, time.Second)}, []string{"WithRetries.base"}},
		{"WithRetries max below base", []dlc.Option{dlc.WithRetries(8, time.Second, time.Second-ns)}, []string{"WithRetries.max"}},
		{"WithRetries max below the default base", []dlc.Option{dlc.WithRetries(8, 0, 10*time.Millisecond-ns)}, []string{"WithRetries.max"}},
		{"WithRetries max 0", []dlc.Option{dlc.WithRetries(8, time.Millisecond, 0)}, []string{"WithRetries.max"}},

		{"WithRunRetryBackoff 0, 0: the defaults", []dlc.Option{dlc.WithRunRetryBackoff(0, 0)}, nil},
		{"WithRunRetryBackoff max = base", []dlc.Option{dlc.WithRunRetryBackoff(time.Minute, time.Minute)}, nil},
		{"WithRunRetryBackoff base = the default max", []dlc.Option{dlc.WithRunRetryBackoff(job.RetryBackoffMax, 0)}, nil},
		{"WithRunRetryBackoff max = the default base", []dlc.Option{dlc.WithRunRetryBackoff(0, job.RetryBackoffBase)}, nil},
		{"WithRunRetryBackoff base -1ns", []dlc.Option{dlc.WithRunRetryBackoff(-ns, 0)}, []string{"WithRunRetryBackoff.base"}},
		{"WithRunRetryBackoff max -1ns", []dlc.Option{dlc.WithRunRetryBackoff(0, -ns)}, []string{"WithRunRetryBackoff.max"}},
		{"WithRunRetryBackoff max below base", []dlc.Option{dlc.WithRunRetryBackoff(time.Minute, time.Minute-ns)}, []string{"WithRunRetryBackoff.max"}},
		{"WithRunRetryBackoff base above the default max", []dlc.Option{dlc.WithRunRetryBackoff(job.RetryBackoffMax+ns, 0)}, []string{"WithRunRetryBackoff.max"}},
		{"WithRunRetryBackoff max below the default base", []dlc.Option{dlc.WithRunRetryBackoff(0, job.RetryBackoffBase-ns)}, []string{"WithRunRetryBackoff.max"}},

		{"WithRepairGrace 1ns", []dlc.Option{dlc.WithRepairGrace(ns)}, nil},
		{"WithRepairGrace 0", []dlc.Option{dlc.WithRepairGrace(0)}, []string{"WithRepairGrace"}},

		{"WithAutoscaleHeadroom 0", []dlc.Option{dlc.WithAutoscaleHeadroom(0)}, nil},
		{"WithAutoscaleHeadroom -1", []dlc.Option{dlc.WithAutoscaleHeadroom(-1)}, []string{"WithAutoscaleHeadroom"}},

		{"WithStepTimeout 1ns", []dlc.Option{dlc.WithStepTimeout(ns)}, nil},
		{"WithStepTimeout 0", []dlc.Option{dlc.WithStepTimeout(0)}, []string{"WithStepTimeout"}},

		{"WithWorkSharing 0", []dlc.Option{dlc.WithWorkSharing(0)}, nil},
		{"WithWorkSharing an hour", []dlc.Option{dlc.WithWorkSharing(time.Hour)}, nil},
		{"WithWorkSharing -1ns", []dlc.Option{dlc.WithWorkSharing(-ns)}, []string{"WithWorkSharing"}},

		{"WithReconcileTimeout 0: the default", []dlc.Option{dlc.WithReconcileTimeout(0)}, nil},
		{"WithReconcileTimeout 1ns", []dlc.Option{dlc.WithReconcileTimeout(ns)}, nil},
		{"WithReconcileTimeout -1ns", []dlc.Option{dlc.WithReconcileTimeout(-ns)}, []string{"WithReconcileTimeout"}},

		{"WithResync 0", []dlc.Option{dlc.WithResync(0)}, nil},
		{"WithResync -1ns", []dlc.Option{dlc.WithResync(-ns)}, []string{"WithResync"}},

		{"WithRunRetention 0, 0", []dlc.Option{dlc.WithRunRetention(0, 0)}, nil},
		{"WithRunRetention maxAge -1ns", []dlc.Option{dlc.WithRunRetention(-ns, 0)}, []string{"WithRunRetention.maxAge"}},
		{"WithRunRetention perJob -1", []dlc.Option{dlc.WithRunRetention(0, -1)}, []string{"WithRunRetention.perJob"}},

		{"WithMaxFinishedRuns 0", []dlc.Option{dlc.WithMaxFinishedRuns(0)}, nil},
		{"WithMaxFinishedRuns -1", []dlc.Option{dlc.WithMaxFinishedRuns(-1)}, []string{"WithMaxFinishedRuns"}},

		{"WithMemberProbation 0", []dlc.Option{dlc.WithMemberProbation(0)}, nil},
		{"WithMemberProbation -1", []dlc.Option{dlc.WithMemberProbation(-1)}, []string{"WithMemberProbation"}},

		{"WithRunStartTimeout 0", []dlc.Option{dlc.WithRunStartTimeout(0)}, nil},
		{"WithRunStartTimeout -1ns", []dlc.Option{dlc.WithRunStartTimeout(-ns)}, []string{"WithRunStartTimeout"}},

		{"WithRayUnreachableTimeout 1ns", []dlc.Option{dlc.WithRayUnreachableTimeout(ns)}, nil},
		{"WithRayUnreachableTimeout 0", []dlc.Option{dlc.WithRayUnreachableTimeout(0)}, []string{"WithRayUnreachableTimeout"}},

		{"WithScheduleFloor 0", []dlc.Option{dlc.WithScheduleFloor(0)}, nil},
		{"WithScheduleFloor -1ns", []dlc.Option{dlc.WithScheduleFloor(-ns)}, []string{"WithScheduleFloor"}},

		{"WithMaxUnfinishedRuns 0", []dlc.Option{dlc.WithMaxUnfinishedRuns(0)}, nil},
		{"WithMaxUnfinishedRuns -1", []dlc.Option{dlc.WithMaxUnfinishedRuns(-1)}, []string{"WithMaxUnfinishedRuns"}},

		{"the last one counts", []dlc.Option{dlc.WithWorkers(-1), dlc.WithWorkers(0)}, nil},
		{"two bad options at once", []dlc.Option{dlc.WithStepTimeout(0), dlc.WithResync(-ns)},
			[]string{"WithStepTimeout", "WithResync"}},
		{"both parameters of one option", []dlc.Option{dlc.WithRunRetention(-ns, -1)},
			[]string{"WithRunRetention.maxAge", "WithRunRetention.perJob"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := dlc.New(append([]dlc.Option{dlc.WithWorkers(0)}, tc.opts...)...)
			if len(tc.bad) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				return
			}
			if err == nil {
				_ = c.Close()
				t.Fatalf("accepted, want ErrInvalid on %v", tc.bad)
			}
			if !errors.Is(err, dlc.ErrInvalid) {
				t.Errorf("%v: not ErrInvalid", err)
			}
			var got []string
			for _, fe := range dlc.Fields(err) {
				got = append(got, fe.Path.String())
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.bad))
			if !slices.Equal(got, want) {
				t.Errorf("%v: fields %v, want %v", err, got, want)
			}
			for _, f := range tc.bad {
				if !strings.Contains(err.Error(), f+":") {
					t.Errorf("%v: does not name %s", err, f)
				}
			}
		})
	}
}

// docs/options.md has one row for each option of package dlc, and no
// other.
func TestOptionsDocumented(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var options []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "With") || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 {
				continue
			}
			if id, ok := fn.Type.Results.List[0].Type.(*ast.Ident); ok && id.Name == "Option" {
				options = append(options, fn.Name.Name)
			}
		}
	}
	if len(options) < 20 {
		t.Fatalf("found %d options in package dlc: %v", len(options), options)
	}
	doc, err := os.ReadFile(filepath.Join("docs", "options.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	row := regexp.MustCompile("(?m)^\\| `(With[A-Za-z]+)\\(")
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		rows[m[1]]++
	}
	for _, o := range options {
		if rows[o] != 1 {
			t.Errorf("docs/options.md has %d rows for %s, want 1", rows[o], o)
		}
		delete(rows, o)
	}
	for o := range rows {
		t.Errorf("docs/options.md has a row for %s, which package dlc does not have", o)
	}
}
