package soak_test

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/aidlc/dlc/backend/kube/internal/loadtest"
)

// row is one minute of the soak.
type row struct {
	elapsed                                   time.Duration
	heaps                                     []uint64          // each replica's heap in use, as it last reported it
	testHeap                                  uint64            // the test process's (KubeRay, the heads, the watch)
	stored                                    map[string][2]int // kind → documents, bytes
	writesPerS                                float64           // the replicas' API writes a second over the minute
	conflicts                                 int64             // of them answered 409
	made, succeeded, failed, stopped, deleted int               // runs in the minute
	clusters                                  string            // clusters by state
	hibernations                              int               // clusters hibernated in the minute
	pods                                      int               // in the namespace
	events                                    int               // Kubernetes events in the namespace
	ticks                                     tickCheck
	over                                      []string // capacity broken
	audit                                     int      // CheckQuota's problems
	stuck                                     []string
	abnormal                                  []string
}

func mib(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// line is the row as the test logs it each minute.
func (r row) line(s *soak) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: heap", r.elapsed.Round(time.Second))
	for i, h := range r.heaps {
		fmt.Fprintf(&b, " %s=%s MiB", s.replicas[i].name, mib(h))
	}
	fmt.Fprintf(&b, "; stored")
	for _, k := range slices.Sorted(maps.Keys(r.stored)) {
		fmt.Fprintf(&b, " %s %d/%.0f KiB", k, r.stored[k][0], float64(r.stored[k][1])/1024)
	}
	fmt.Fprintf(&b, "; %.1f writes/s (%d conflicts); runs made %d, succeeded %d, failed %d, stopped %d, deleted %d; hibernated %d; "+
		"ticks due %d = started %d + missed %d + unaccounted %d, behind %d, twice %d; quota over %d, audit %d; stuck %d, abnormal %d; "+
		"clusters %s; pods %d, events %d; test heap %s MiB",
		r.writesPerS, r.conflicts, r.made, r.succeeded, r.failed, r.stopped, r.deleted, r.hibernations,
		r.ticks.due, r.ticks.started, r.ticks.missed, r.ticks.unaccounted, r.ticks.behind, len(r.ticks.twice),
		len(r.over), r.audit, len(r.stuck), len(r.abnormal), r.clusters, r.pods, r.events, mib(r.testHeap))
	for _, x := range append(slices.Clone(r.stuck), r.abnormal...) {
		fmt.Fprintf(&b, "\n  %s", x)
	}
	return b.String()
}

// series is one figure of the rows the flat verdict judges.
type series struct {
	name  string
	floor float64 // growth below this is flat whatever the fraction
	of    func(r row) float64
}

// seriesOf returns the series of rows: each replica's heap, each kind's
// documents and bytes, the writes a second, the pods and the events.
func seriesOf(rows []row, replicas int) []series {
	var out []series
	for i := range replicas {
		out = append(out, series{fmt.Sprintf("replica-%d heap (MiB)", i), 8, func(r row) float64 {
			if i < len(r.heaps) {
				return float64(r.heaps[i]) / (1 << 20)
			}
			return 0
		}})
	}
	kinds := map[string]bool{}
	for _, r := range rows {
		for k := range r.stored {
			kinds[k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		out = append(out,
			series{k + " stored", 64, func(r row) float64 { return float64(r.stored[k][0]) }},
			series{k + " KiB", 256, func(r row) float64 { return float64(r.stored[k][1]) / 1024 }})
	}
	out = append(out,
		series{"API writes/s", 2, func(r row) float64 { return r.writesPerS }},
		series{"pods", 4, func(r row) float64 { return float64(r.pods) }})
	return out
}

// verdict is the flat verdict of one series.
type verdict struct {
	name         string
	middle, last float64
	grows        bool
}

// flat judges each series over the rows after skip: the mean of the last
// third against the mean of the middle third; it grows when the last is
// above the middle by more than tolerance (a fraction of the middle) and
// by more than the series' floor. Fewer than 6 rows after skip: no
// verdict (nil).
func flat(rows []row, skip time.Duration, tolerance float64, ss []series) []verdict {
	var after []row
	for _, r := range rows {
		if r.elapsed > skip {
			after = append(after, r)
		}
	}
	n := len(after)
	if n < 6 {
		return nil
	}
	mean := func(rs []row, f func(row) float64) float64 {
		sum := 0.0
		for _, r := range rs {
			sum += f(r)
		}
		return sum / float64(len(rs))
	}
	var out []verdict
	for _, s := range ss {
		mid, last := mean(after[n/3:2*n/3], s.of), mean(after[2*n/3:], s.of)
		d := last - mid
		out = append(out, verdict{name: s.name, middle: mid, last: last,
			grows: d > s.floor && d > tolerance*mid})
	}
	return out
}

// report renders the rows, the verdicts and the invariants as Markdown;
// it returns the series that grew (final only).
func (s *soak) report(final bool) (string, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.p
	var b strings.Builder
	fmt.Fprintf(&b, "\n## dlc soak: %v, %d job configs on minute schedules, %d clusters (%d hibernate after %v idle), 2 replicas\n\n",
		p.duration, p.configs, p.clusters, p.idle, p.idleAfter)
	fmt.Fprintf(&b, "%d resource groups at exactly their clusters' capacity; concurrency policies Allow, Forbid, Replace in turn; "+
		"retention %v and %d runs per config; log tails kept; a replica process killed (SIGKILL) and started again every %v, in turn; "+
		"envtest with KubeRay's reconcilers, the kubelet stand-in and a Ray head stand-in per cluster; %d CPUs. ",
		p.rgs, p.retention, p.perJob, p.restart, runtime.NumCPU())
	fmt.Fprintf(&b, "Ran %v", time.Since(s.began).Round(time.Second))
	if !final {
		b.WriteString(" so far")
	}
	b.WriteString(".\n\n")

	every := 1
	if len(s.rows) > 90 {
		every = 5
	}
	kinds := map[string]bool{}
	for _, r := range s.rows {
		for k := range r.stored {
			kinds[k] = true
		}
	}
	ks := slices.Sorted(maps.Keys(kinds))
	head := []string{"min", "heap r0 MiB", "heap r1 MiB"}
	for _, k := range ks {
		head = append(head, k+" n", k+" KiB")
	}
	head = append(head, "writes/s", "runs made", "ok", "failed/stopped", "deleted", "hibernated", "ticks due", "started", "missed",
		"unacc.", "behind", "twice", "over cap.", "audit", "stuck", "pods", "events", "test heap MiB")
	var rows [][]string
	for i, r := range s.rows {
		if (i+1)%every != 0 && i != len(s.rows)-1 {
			continue
		}
		c := []string{fmt.Sprintf("%.0f", r.elapsed.Minutes())}
		for j := range 2 {
			h := "—"
			if j < len(r.heaps) {
				h = mib(r.heaps[j])
			}
			c = append(c, h)
		}
		for _, k := range ks {
			c = append(c, fmt.Sprint(r.stored[k][0]), fmt.Sprintf("%.0f", float64(r.stored[k][1])/1024))
		}
		c = append(c, fmt.Sprintf("%.1f", r.writesPerS), fmt.Sprint(r.made), fmt.Sprint(r.succeeded),
			fmt.Sprintf("%d/%d", r.failed, r.stopped), fmt.Sprint(r.deleted), fmt.Sprint(r.hibernations), fmt.Sprint(r.ticks.due), fmt.Sprint(r.ticks.started),
			fmt.Sprint(r.ticks.missed), fmt.Sprint(r.ticks.unaccounted), fmt.Sprint(r.ticks.behind), fmt.Sprint(len(r.ticks.twice)),
			fmt.Sprint(len(r.over)), fmt.Sprint(r.audit), fmt.Sprint(len(r.stuck)), fmt.Sprint(r.pods), fmt.Sprint(r.events), mib(r.testHeap))
		rows = append(rows, c)
	}
	if every > 1 {
		fmt.Fprintf(&b, "Every %dth minute, and the last:\n\n", every)
	}
	b.WriteString(loadtest.Table(head, rows))
	b.WriteString("\nHeaps: each replica process's heap in use after a collection, as it last reported it (every 10 s); " +
		"a replica just restarted reports a new process's. Stored: documents by kind and their bytes of JSON, from a watch of the store. " +
		"Writes: the replicas' requests to the API server other than GET, over the minute (a killed process's writes after its last report are lost). " +
		"Ticks: through each config's last handled tick, since its creation; behind: ticks over a minute old not handled yet. " +
		"Audit: problems CheckQuota reported at that minute. Events: Kubernetes events in the namespace, kept an hour by the API server, not judged. Test heap: the test process (KubeRay, the kubelet and heads stand-ins, the watch), not judged.\n")

	var grew []string
	if final {
		vs := flat(s.rows, p.retention, p.tolerance, seriesOf(s.rows, len(s.replicas)))
		fmt.Fprintf(&b, "\n### Flat? (after the first retention period, %v: the last third's mean against the middle third's, tolerance %.0f %%)\n\n",
			p.retention, p.tolerance*100)
		if vs == nil {
			b.WriteString("Too few minutes after the first retention period to judge (fewer than 6).\n")
		} else {
			var vr [][]string
			for _, v := range vs {
				word := "flat"
				if v.grows {
					word = "GROWS"
					grew = append(grew, fmt.Sprintf("%s %.1f → %.1f", v.name, v.middle, v.last))
				}
				vr = append(vr, []string{v.name, fmt.Sprintf("%.1f", v.middle), fmt.Sprintf("%.1f", v.last), word})
			}
			b.WriteString(loadtest.Table([]string{"series", "middle third", "last third", "verdict"}, vr))
		}
		b.WriteString("\n### Invariants\n\n")
		c := s.final
		fmt.Fprintf(&b, "- each tick once: %d ticks due = %d started + %d counted missed + %d unaccounted; %d ticks with two runs\n",
			c.due, c.started, c.missed, c.unaccounted, len(c.twice))
		failed, stopped := 0, 0
		for _, r := range s.rows {
			failed, stopped = failed+r.failed, stopped+r.stopped
		}
		// Not an invariant (a Replace config stops a run that overruns its
		// tick), but a run of this workload takes seconds: one failed or
		// stopped says a run was held back.
		fmt.Fprintf(&b, "- runs failed: %d, stopped: %d\n", failed, stopped)
		fmt.Fprintf(&b, "- broken: %d\n", len(s.broken))
		for i, x := range s.broken {
			if i == 20 {
				fmt.Fprintf(&b, "  - … and %d more\n", len(s.broken)-i)
				break
			}
			fmt.Fprintf(&b, "  - %s\n", x)
		}
		b.WriteString("\n### Notes\n\n")
		fmt.Fprintf(&b, "- restarts: %d, each from the kill until the new process reported: %s\n", len(s.restarts), durations(s.restarts))
		for e, n := range s.startErr {
			fmt.Fprintf(&b, "- %d× starting a hibernated cluster: %s\n", n, e)
		}
		for _, n := range s.notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String(), grew
}

func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Round(100 * time.Millisecond).String()
	}
	return strings.Join(parts, ", ")
}

// writeReport prints the report (final) and writes it to DLC_SOAK_REPORT.
func (s *soak) writeReport(final bool) []string {
	out, grew := s.report(final)
	if final {
		fmt.Println(out)
	}
	if path := os.Getenv(envReport); path != "" {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			s.t.Errorf("writing the report to %s: %v", path, err)
		}
	}
	return grew
}

// anonymise leaves out of an error's text what names one object or one
// connection (loadtest.Anonymiser).
var anonymise = loadtest.NewAnonymiser("soak").Anonymise
