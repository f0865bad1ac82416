package job_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// L1–L3: every problem of a schedule, a deadline and a retry limit, with
// its field path and rule.
func TestLifecycleValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*job.Config)
		want []string // "path rule" of each problem; none: valid
	}{
		{"every minute", func(c *job.Config) { c.Schedule = &job.Schedule{Cron: "* * * * *"} }, nil},
		{"with seconds and a zone", func(c *job.Config) {
			c.Schedule = &job.Schedule{Cron: "*/5 * * * * *", TimeZone: "Asia/Shanghai", ConcurrencyPolicy: job.ForbidConcurrent, StartingDeadlineSeconds: new(30)}
		}, nil},
		{"a descriptor", func(c *job.Config) { c.Schedule = &job.Schedule{Cron: "@daily"} }, nil},
		{"no expression", func(c *job.Config) { c.Schedule = &job.Schedule{} }, []string{"schedule.cron L1"}},
		{"a bad expression", func(c *job.Config) { c.Schedule = &job.Schedule{Cron: "61 * * * *"} }, []string{"schedule.cron L1"}},
		{"a zone in the expression", func(c *job.Config) { c.Schedule = &job.Schedule{Cron: "CRON_TZ=UTC * * * * *"} }, []string{"schedule.cron L1"}},
		{"never fires", func(c *job.Config) { c.Schedule = &job.Schedule{Cron: "0 0 30 2 *"} }, []string{"schedule.cron L1"}},
		{"too long", func(c *job.Config) { c.Schedule = &job.Schedule{Cron: strings.Repeat("*", 200)} }, []string{"schedule.cron L1"}},
		{"every problem at once", func(c *job.Config) {
			c.Schedule = &job.Schedule{Cron: "* * * * *", TimeZone: "Mars/Olympus", ConcurrencyPolicy: "Sometimes", StartingDeadlineSeconds: new(0)}
			c.ActiveDeadlineSeconds = -1
			c.BackoffLimit = 11
		}, []string{"schedule.timeZone L1", "schedule.concurrencyPolicy L1", "schedule.startingDeadlineSeconds L1", "activeDeadlineSeconds L2", "backoffLimit L3"}},
		{"deadline and retries", func(c *job.Config) { c.ActiveDeadlineSeconds, c.BackoffLimit = 3600, 10 }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &job.Config{Name: "j", Cluster: "cls-1", Entrypoint: "python main.py"}
			c.Package.COS = "cos://jobs-1250000000/a.zip"
			tc.set(c)
			var got []string
			for _, f := range errs.Fields(c.Validate()) {
				got = append(got, string(f.Path)+" "+f.Rule)
			}
			if strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Fatalf("problems %q, want %q (%v)", got, tc.want, c.Validate())
			}
		})
	}
}

// L1: which ticks start, which are missed, with and without a starting
// deadline, however long the gap.
func TestScheduleDue(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	min := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for _, tc := range []struct {
		name      string
		cron      string
		deadline  *int
		last, now time.Time
		max       int
		start     []time.Time
		missed    int
		through   time.Time
	}{
		{"nothing due", "* * * * *", nil, t0, t0.Add(30 * time.Second), 10, nil, 0, t0.Add(30 * time.Second)},
		{"one tick", "* * * * *", nil, t0, min(1), 10, []time.Time{min(1)}, 0, min(1)},
		{"the latest of five, no deadline", "* * * * *", nil, t0, min(5).Add(time.Second), 10, []time.Time{min(5)}, 4, min(5).Add(time.Second)},
		{"within a 150 s deadline", "* * * * *", new(150), t0, min(5).Add(30 * time.Second), 10, []time.Time{min(3), min(4), min(5)}, 2, min(5).Add(30 * time.Second)},
		{"cut short at two", "* * * * *", new(3600), t0, min(5), 2, []time.Time{min(1), min(2)}, 0, min(2)},
		// Cut short at 100,000 ticks looked at: the step after goes on.
		{"a year missed, every minute", "* * * * *", nil, t0.AddDate(-1, 0, 0), t0, 10, nil, 100_000, t0.AddDate(-1, 0, 0).Add(100_000 * time.Minute)},
		{"in Shanghai, 16:00 daily", "0 16 * * *", nil, t0.Add(-time.Hour), t0, 10, []time.Time{t0}, 0, t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &job.Schedule{Cron: tc.cron, StartingDeadlineSeconds: tc.deadline}
			if strings.Contains(tc.name, "Shanghai") {
				s.TimeZone = "Asia/Shanghai"
			}
			got, err := s.Due(tc.last, tc.now, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Start) != len(tc.start) || got.Missed != tc.missed {
				t.Fatalf("start %v, missed %d; want %v, %d", got.Start, got.Missed, tc.start, tc.missed)
			}
			for i := range got.Start {
				if !got.Start[i].Equal(tc.start[i]) {
					t.Fatalf("start %v, want %v", got.Start, tc.start)
				}
			}
			if !got.Through.Equal(tc.through) {
				t.Fatalf("through %s, want %s", got.Through, tc.through)
			}
		})
	}
}

// A year-long gap is looked at in bounded steps that end.
func TestScheduleDueBounded(t *testing.T) {
	s := &job.Schedule{Cron: "* * * * *"}
	now := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	last := now.AddDate(-2, 0, 0)
	missed, started := 0, 0
	for step := 0; step < 20; step++ {
		got, err := s.Due(last, now, 10)
		if err != nil {
			t.Fatal(err)
		}
		missed += got.Missed
		started += len(got.Start)
		if got.Through.Equal(now) {
			if started != 1 || !got.Start[0].Equal(now) {
				t.Fatalf("after %d steps: started %d %v", step+1, started, got.Start)
			}
			t.Logf("%d steps, %d missed", step+1, missed)
			return
		}
		if !got.Through.After(last) {
			t.Fatalf("step %d made no progress from %s", step, last)
		}
		last = got.Through
	}
	t.Fatal("20 steps did not reach now")
}

func TestNextTimesAndBackoff(t *testing.T) {
	s := &job.Schedule{Cron: "30 9 * * 1-5", TimeZone: "Asia/Shanghai"}
	from := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC) // a Friday, 20:00 in Shanghai
	got, err := s.NextTimes(from, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"2026-12-07T09:30:00+08:00", "2026-12-08T09:30:00+08:00", "2026-12-09T09:30:00+08:00"}
	for i, g := range got {
		if g.Format(time.RFC3339) != want[i] {
			t.Fatalf("next times %v, want %v", got, want)
		}
	}
	if _, err := (&job.Schedule{Cron: "bad"}).NextTimes(from, 3); err == nil {
		t.Fatal("the next times of a bad schedule")
	}
	if got, _ := s.NextTimes(from, 1000); len(got) != job.MaxNextTimes {
		t.Fatalf("%d times asked 1000, want the bound %d", len(got), job.MaxNextTimes)
	}
	for attempt, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 6: 5 * time.Minute, 100: 5 * time.Minute} {
		if got := job.RetryBackoff(attempt); got != want {
			t.Errorf("backoff after attempt %d = %s, want %s", attempt, got, want)
		}
	}
}

// The lifecycle fields decode strictly from YAML.
func TestLifecycleYAML(t *testing.T) {
	cfg, err := job.UnmarshalYAML([]byte(`
name: nightly
cluster: cls-1
package: {cos: "cos://jobs-1250000000/a.zip"}
entrypoint: python main.py
schedule:
  cron: "0 2 * * *"
  timeZone: Asia/Shanghai
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: 600
activeDeadlineSeconds: 7200
backoffLimit: 2
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if s := cfg.Schedule; s.Cron != "0 2 * * *" || s.Policy() != job.ForbidConcurrent || *s.StartingDeadlineSeconds != 600 || cfg.BackoffLimit != 2 || cfg.ActiveDeadlineSeconds != 7200 {
		t.Fatalf("decoded %+v %+v", cfg, s)
	}
	if _, err := job.UnmarshalYAML([]byte("name: j\nschedule: {cron: '* * * * *', every: 1m}\n")); err == nil || !strings.Contains(err.Error(), "every") {
		t.Fatalf("an unknown schedule field: %v", err)
	}
}
