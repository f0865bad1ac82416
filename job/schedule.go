package job

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // time zones resolve on a machine without a zoneinfo database

	"github.com/robfig/cron/v3"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
)

// Limits of a schedule and of a run's lifecycle settings.
const (
	MaxCronLen              = 128              // bytes of Schedule.Cron
	MaxStartingDeadline     = 7 * 24 * 3600    // seconds (a week)
	MaxActiveDeadline       = 30 * 24 * 3600   // seconds (30 days)
	MaxBackoffLimit         = 10               // retries of a failed run
	MaxNextTimes            = 100              // fire times Schedule.NextTimes returns at most
	RetryBackoffBase        = 10 * time.Second // a failed run's first retry waits this long
	RetryBackoffMax         = 5 * time.Minute  // and no retry waits longer
	scheduleMissedHorizon   = 400 * 24 * time.Hour
	scheduleMaxTicksPerStep = 100_000
)

// ConcurrencyPolicy says what a schedule's tick does while an earlier run
// of the job has not ended, as a Kubernetes CronJob's.
type ConcurrencyPolicy string

// The concurrency policies.
const (
	// AllowConcurrent starts the tick's run whatever else runs (the default).
	AllowConcurrent ConcurrencyPolicy = "Allow"
	// ForbidConcurrent skips the tick, and records it, while a run of the
	// job has not ended.
	ForbidConcurrent ConcurrencyPolicy = "Forbid"
	// ReplaceConcurrent stops the job's runs that have not ended, then
	// starts the tick's run.
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// Schedule starts runs of a job config at the times a cron expression
// names (rule L1, an SDK addition to the product's rules): "定时批处理",
// scheduled batch work. Each tick starts exactly one run, however many
// clients run and whatever restarts happen: the run's id derives from the
// job and the tick.
type Schedule struct {
	// Cron is the expression: five fields (minute hour day-of-month month
	// day-of-week, as crontab), six with seconds first, or a descriptor
	// (@yearly, @monthly, @weekly, @daily, @hourly, @every 1h30m). The
	// time zone is TimeZone's, not a CRON_TZ= prefix.
	Cron string `json:"cron"`
	// TimeZone is the IANA zone the expression is read in, e.g.
	// "Asia/Shanghai"; empty means UTC.
	TimeZone string `json:"timeZone,omitempty"`
	// ConcurrencyPolicy is Allow (the default), Forbid or Replace.
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`
	// StartingDeadlineSeconds, when set, is how late a tick may still
	// start its run; a tick missed by longer (the platform was down, or
	// behind) is skipped and recorded. When unset, of the ticks missed
	// only the latest starts its run, the others are skipped and recorded.
	StartingDeadlineSeconds *int `json:"startingDeadlineSeconds,omitempty"`
}

// DeepCopy returns a copy of s that shares nothing with it.
func (s *Schedule) DeepCopy() *Schedule {
	if s == nil {
		return nil
	}
	out := *s
	if s.StartingDeadlineSeconds != nil {
		out.StartingDeadlineSeconds = new(*s.StartingDeadlineSeconds)
	}
	return &out
}

// Policy returns the concurrency policy with its default filled in.
func (s *Schedule) Policy() ConcurrencyPolicy {
	if s.ConcurrencyPolicy == "" {
		return AllowConcurrent
	}
	return s.ConcurrencyPolicy
}

// StartingDeadline returns the starting deadline and whether one is set.
func (s *Schedule) StartingDeadline() (time.Duration, bool) {
	if s.StartingDeadlineSeconds == nil {
		return 0, false
	}
	return time.Duration(*s.StartingDeadlineSeconds) * time.Second, true
}

var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// compiled is a parsed schedule in its zone.
type compiled struct {
	spec cron.Schedule
	loc  *time.Location
}

// next returns the first tick after t, or the zero time when there is
// none within five years.
func (c compiled) next(t time.Time) time.Time { return c.spec.Next(t.In(c.loc)) }

func (s *Schedule) compile() (compiled, error) {
	if len(s.Cron) > MaxCronLen {
		return compiled{}, fmt.Errorf("longer than %d bytes", MaxCronLen)
	}
	if strings.HasPrefix(s.Cron, "TZ=") || strings.HasPrefix(s.Cron, "CRON_TZ=") {
		return compiled{}, fmt.Errorf("a time zone is set with timeZone, not in the expression")
	}
	spec, err := cronParser.Parse(s.Cron)
	if err != nil {
		return compiled{}, err
	}
	loc := time.UTC
	if s.TimeZone != "" {
		if loc, err = time.LoadLocation(s.TimeZone); err != nil {
			return compiled{}, errTimeZone
		}
	}
	return compiled{spec: spec, loc: loc}, nil
}

var errTimeZone = fmt.Errorf("not an IANA time zone")

// NextTimes returns the next n (at most MaxNextTimes) fire times after t,
// in the schedule's time zone; fewer when the schedule stops firing (a
// date that comes within five years is looked for). A schedule that does
// not validate is an error.
func (s *Schedule) NextTimes(after time.Time, n int) ([]time.Time, error) {
	if err := s.problems(errs.NewPath("schedule")).ToError(); err != nil {
		return nil, err
	}
	c, _ := s.compile()
	n = min(max(n, 0), MaxNextTimes)
	out := make([]time.Time, 0, n)
	for t := after; len(out) < n; {
		t = c.next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out, nil
}

// MinIntervalSamples is how many ticks MinInterval looks at.
const MinIntervalSamples = 256

// MinInterval returns the shortest time between two of the schedule's next
// MinIntervalSamples ticks after after (a six-field expression may fire
// every second), and false when it fires fewer than twice in five years
// or does not validate.
func (s *Schedule) MinInterval(after time.Time) (time.Duration, bool) {
	c, err := s.compile()
	if err != nil {
		return 0, false
	}
	var gap time.Duration
	prev := c.next(after)
	for range MinIntervalSamples - 1 {
		if prev.IsZero() {
			break
		}
		t := c.next(prev)
		if t.IsZero() {
			break
		}
		if d := t.Sub(prev); gap == 0 || d < gap {
			gap = d
		}
		prev = t
	}
	return gap, gap > 0
}

// problems checks a schedule (L1).
func (s *Schedule) problems(p errs.Path) errs.List {
	var l errs.List
	switch _, err := s.compile(); {
	case s.Cron == "":
		l = append(l, errs.Required(p.Child("cron"), "L1", "a schedule needs a cron expression"))
	case err == errTimeZone:
		l = append(l, errs.Invalid(p.Child("timeZone"), "L1", s.TimeZone, err.Error()))
	case err != nil:
		l = append(l, errs.Invalid(p.Child("cron"), "L1", clip(s.Cron), err.Error()))
	default:
		c, _ := s.compile()
		if c.next(time.Now()).IsZero() {
			l = append(l, errs.Invalid(p.Child("cron"), "L1", s.Cron, "it never fires (no date within five years matches)"))
		}
	}
	switch s.ConcurrencyPolicy {
	case "", AllowConcurrent, ForbidConcurrent, ReplaceConcurrent:
	default:
		l = append(l, errs.NotSupported(p.Child("concurrencyPolicy"), "L1", string(s.ConcurrencyPolicy),
			[]string{string(AllowConcurrent), string(ForbidConcurrent), string(ReplaceConcurrent)}))
	}
	if d := s.StartingDeadlineSeconds; d != nil && (*d < 1 || *d > MaxStartingDeadline) {
		l = append(l, errs.Invalid(p.Child("startingDeadlineSeconds"), "L1", fmt.Sprint(*d),
			fmt.Sprintf("must be 1 to %d seconds", MaxStartingDeadline)))
	}
	return l
}

// clip bounds a value quoted in an error.
func clip(s string) string {
	if len(s) > MaxCronLen {
		return check.Prefix(s, MaxCronLen) + "…"
	}
	return s
}

// Ticks is what a schedule owes between two times: Start, the ticks whose
// runs start now, oldest first, and Missed, how many ticks are skipped
// (missed by more than the starting deadline, or, without one, every
// missed tick but the latest), with the latest of them.
type Ticks struct {
	Start      []time.Time
	Missed     int
	LastMissed time.Time
	// Through is how far the ticks were looked at: the schedule's last
	// handled tick becomes Through. It is before now when the look was cut
	// short (too many ticks for one step) and goes on at the next.
	Through time.Time
	// Next is the first tick after now (zero when none comes).
	Next time.Time
}

// Due returns the ticks of s after last and up to now, at most maxStart
// of them to start (the rest wait for the next call: Through says how
// far it went). The work is bounded whatever the gap: ticks further back
// than 400 days are not counted, and one call looks at no more than
// 100,000.
func (s *Schedule) Due(last, now time.Time, maxStart int) (Ticks, error) {
	c, err := s.compile()
	if err != nil {
		return Ticks{}, errs.Invalid("schedule.cron", "L1", clip(s.Cron), err.Error())
	}
	out := Ticks{Through: last}
	from := last
	if now.Sub(from) > scheduleMissedHorizon {
		from = now.Add(-scheduleMissedHorizon)
	}
	deadline, hasDeadline := s.StartingDeadline()
	var latest time.Time // without a deadline: the latest tick, held back until the end
	for looked := 0; ; looked++ {
		t := c.next(from)
		if t.IsZero() || t.After(now) {
			out.Through = now
			break
		}
		if looked >= scheduleMaxTicksPerStep || len(out.Start) >= maxStart {
			if !latest.IsZero() { // a later tick comes: it is missed
				out.Missed++
				out.LastMissed = latest
			}
			return out, nil // go on from Through at the next call
		}
		from = t
		switch {
		case hasDeadline && now.Sub(t) > deadline:
			out.Missed++
			out.LastMissed = t
		case hasDeadline:
			out.Start = append(out.Start, t)
		default:
			if !latest.IsZero() {
				out.Missed++
				out.LastMissed = latest
			}
			latest = t
		}
		out.Through = t
	}
	if !latest.IsZero() {
		out.Start = append(out.Start, latest)
	}
	out.Next = c.next(now)
	return out, nil
}

// RetryBackoff returns how long a run's next attempt waits after the
// failed attempt'th, with the default backoff: RetryBackoffBase,
// doubling per attempt, at most RetryBackoffMax.
func RetryBackoff(attempt int) time.Duration {
	return Backoff(attempt, RetryBackoffBase, RetryBackoffMax)
}

// Backoff returns how long the retry after the failed attempt'th waits:
// base, doubling per attempt, at most max.
func Backoff(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}
