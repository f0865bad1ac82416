package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/job"
)

// MaxDescribeRuns bounds the runs a job's describe page lists (the newest).
const MaxDescribeRuns = 20

func (a *app) describeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "describe cluster|run|job ID",
		Short: "Show the details page of a cluster, a run or a job config",
		Long: `Show everything the platform knows of one object.

cluster: basic info, its reservation and its resource group's quota, worker
groups, pods, the Ray dashboard while it runs, its job history and events.
run: its state, where it runs or why it waits, attempts and events.
job: its config, its latest runs and events.`,
		Example: `  kubectl dlc describe cluster cls-0123abcd
  kubectl dlc describe run run-0123abcd
  kubectl dlc describe job job-0123abcd`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := resource(args[0], resClusters, resRuns, resJobs)
			if err != nil {
				return err
			}
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				d := &describer{c: c, w: cmd.OutOrStdout(), now: a.env.Now()}
				switch kind {
				case resClusters:
					return d.cluster(ctx, args[1])
				case resRuns:
					return d.run(ctx, args[1])
				default:
					return d.job(ctx, args[1])
				}
			})
		},
	}
}

type describer struct {
	c   *dlc.Client
	w   io.Writer
	now time.Time
}

func (d *describer) cluster(ctx context.Context, id string) error {
	det, err := d.c.Clusters().Details(ctx, id)
	if err != nil {
		return err
	}
	c := &det.Cluster
	k := kv{w: d.w}
	k.line("Name", c.Spec.Name)
	k.line("ID", c.ID)
	k.line("State", string(c.State))
	if c.Reason != "" {
		k.line("Reason", c.Reason)
	}
	k.line("Creator", orNone(c.Creator))
	k.line("Created", when(d.now, c.CreatedAt))
	if !c.RunningSince.IsZero() {
		k.line("Running Since", when(d.now, c.RunningSince))
	}
	kind := "standing"
	if c.Temporary {
		kind = "on-demand (run " + c.OwnerRun + ")"
	}
	k.line("Kind", kind)
	k.line("Priority", strconv.Itoa(c.Spec.EffectivePriority()))
	k.line("Groups", orNone(strings.Join(c.Spec.Groups, ", ")))
	k.line("Tags", orNone(tags(c.Spec.Tags)))
	k.line("Image", c.Spec.Image)
	head := c.Spec.Head.Name + " " + c.Spec.Head.NodeSpec
	if c.Spec.Head.HighAvailability {
		head += " (high availability)"
	}
	k.line("Head", head)
	if t, ok := c.Spec.IdleTimeout(); ok {
		k.line("Idle Timeout", t.String())
	}
	if len(c.PendingRestart) > 0 {
		k.line("Pending Restart", strings.Join(c.PendingRestart, ", "))
	}
	k.line("Dashboard", orNone(det.Dashboard))
	k.section("Worker Groups")
	t := newTable(indent(d.w), "NAME", "NODE-SPEC", "MIN", "MAX", "REPLICAS")
	for _, w := range c.Spec.Workers {
		rep := "<none>"
		if n, ok := c.Replicas[w.Name]; ok {
			rep = strconv.Itoa(n)
		}
		t.row(w.Name, w.NodeSpec, strconv.Itoa(w.Instances.Min), strconv.Itoa(w.Instances.MaxOrMin()), rep)
	}
	t.flush()
	k.section("Reservation")
	ki := kv{w: d.w, indent: "  "}
	ki.line("Resource Group", c.Spec.ResourceGroup+" (package "+c.Spec.ResourcePackage+")")
	ki.line("Reserved", det.Resources.String())
	if len(c.Draining) > 0 {
		var held []string
		for _, g := range slices.Sorted(maps.Keys(c.Draining)) {
			held = append(held, fmt.Sprintf("%s %d workers", g, c.Draining[g]))
		}
		ki.line("Draining", strings.Join(held, ", ")+" (held until Ray runs the lower ceiling)")
	}
	if g := c.Growth; g != nil {
		ki.line("Growth Waiting", fmt.Sprintf("%s to %d workers, in the resource group's queue at priority %d since %s",
			g.Group, g.Want, c.Spec.EffectivePriority(), g.Since.UTC().Format(time.RFC3339)))
	}
	if u, err := d.c.ResourceGroups().Get(ctx, c.Spec.ResourceGroup); err == nil {
		ki.line("Group Capacity", u.Capacity.String())
		ki.line("Group Reserved", u.Reserved.String())
		ki.line("Allocatable", u.Allocatable.String())
	} else {
		ki.line("Group Quota", "<unavailable: "+err.Error()+">")
	}
	k.section("Pods")
	if len(det.Pods) == 0 {
		fmt.Fprintln(d.w, "  <none>")
	} else {
		t := newTable(indent(d.w), "NAME", "ROLE", "GROUP", "STATUS", "IP", "NODE", "AGE")
		for _, p := range det.Pods {
			t.row(p.Name, p.Role, p.Group, p.Status, p.IP, p.Node, age(d.now, p.CreatedAt))
		}
		t.flush()
	}
	k.section("Job History")
	if len(det.History) == 0 {
		fmt.Fprintln(d.w, "  <none>")
	} else {
		t := newTable(indent(d.w), "RUN", "JOB", "NAME", "STATUS", "DURATION", "AGE")
		for _, h := range det.History {
			t.row(h.RunID, h.JobID, h.Name, h.Status, dur(h.Duration), age(d.now, h.SubmittedAt))
		}
		t.flush()
	}
	d.events(det.Events)
	return nil
}

func (d *describer) events(evs []event.Event) {
	kv{w: d.w}.section("Events")
	if len(evs) == 0 {
		fmt.Fprintln(d.w, "  <none>")
		return
	}
	t := newTable(indent(d.w), "AGE", "SOURCE", "ACTOR", "ACTION", "MESSAGE")
	for _, e := range evs {
		t.row(eventAge(d.now, e), e.Source, e.Actor, e.Action, e.Message)
	}
	t.flush()
}

// eventAge is an entry's age, as kubectl describe shows an Event's: of an
// entry that happened more than once (folded), the latest time's age and
// how many times over how long, from the first: "2m (x37 over 38m)";
// "(x3)" when all of them were at the latest time.
func eventAge(now time.Time, e event.Event) string {
	a := age(now, e.Time)
	switch {
	case e.Times() > 1 && e.First.IsZero():
		a += fmt.Sprintf(" (x%d)", e.Times())
	case e.Times() > 1:
		a += fmt.Sprintf(" (x%d over %s)", e.Times(), age(now, e.First))
	}
	return a
}

func (d *describer) run(ctx context.Context, id string) error {
	r, err := d.c.Runs().Get(ctx, id)
	if err != nil {
		return err
	}
	k := kv{w: d.w}
	k.line("ID", r.ID)
	k.line("Job", r.JobID+" ("+r.Config.Name+", revision "+strconv.Itoa(r.Revision)+")")
	k.line("State", string(r.State))
	if r.WaitReason != "" {
		k.line("Waiting", string(r.WaitReason))
	}
	if r.Message != "" {
		k.line("Message", r.Message)
	}
	k.line("Mode", string(r.Config.Mode())+" "+r.Config.Target())
	k.line("Cluster", orNone(r.ClusterID))
	if r.Placement != "" {
		k.line("Placement", r.Placement)
	}
	k.line("Creator", orNone(r.Creator))
	k.line("Submitted", when(d.now, r.SubmittedAt))
	k.line("Started", when(d.now, r.StartedAt))
	k.line("Finished", when(d.now, r.FinishedAt))
	if !r.StartedAt.IsZero() {
		k.line("Duration", dur(r.Duration(d.now)))
	}
	k.line("Entrypoint", r.Config.Entrypoint)
	k.line("Package", r.Config.Package.String())
	if r.Config.OnDemand != nil {
		k.line("Priority", strconv.Itoa(r.Priority))
		k.line("Demand", r.Demand.String())
	}
	k.line("Attempt", strconv.Itoa(r.AttemptNumber()))
	if r.PreviousAttempt != "" {
		k.line("Retries", r.PreviousAttempt)
	}
	if r.NextAttempt != "" {
		k.line("Retried By", r.NextAttempt)
	}
	if r.Logs != "" {
		k.line("Logs", r.Logs)
	}
	if r.State.Live() && r.State != job.Running {
		if p, err := d.c.Runs().Pending(ctx, r.ID); err == nil {
			k.section("Pending")
			writePending(kv{w: d.w, indent: "  "}, p)
		}
	}
	d.events(r.Events)
	return nil
}

func (d *describer) job(ctx context.Context, id string) error {
	rec, err := d.c.Jobs().Get(ctx, id)
	if err != nil {
		return err
	}
	cfg := &rec.Config
	k := kv{w: d.w}
	k.line("Name", cfg.Name)
	k.line("ID", rec.ID)
	k.line("Revision", strconv.Itoa(rec.Revision))
	k.line("Mode", string(cfg.Mode()))
	k.line("Target", cfg.Target())
	k.line("Priority", strconv.Itoa(cfg.Priority()))
	k.line("Creator", orNone(rec.Creator))
	k.line("Created", when(d.now, rec.CreatedAt))
	k.line("Tags", orNone(tags(cfg.Tags)))
	k.line("Package", cfg.Package.String())
	k.line("Entrypoint", cfg.Entrypoint)
	if cfg.Schedule != nil {
		k.line("Schedule", cfg.Schedule.Cron)
	}
	if cfg.ActiveDeadlineSeconds > 0 {
		k.line("Deadline", (time.Duration(cfg.ActiveDeadlineSeconds) * time.Second).String())
	}
	if cfg.BackoffLimit > 0 {
		k.line("Retries", strconv.Itoa(cfg.BackoffLimit))
	}
	if !rec.Deleting.IsZero() {
		k.line("Deleting", "since "+when(d.now, rec.Deleting.At)+" by "+rec.Deleting.By)
	}
	runs, err := d.c.Runs().List(ctx, dlc.RunListOptions{JobID: rec.ID})
	if err != nil {
		return err
	}
	k.section("Runs")
	if len(runs) == 0 {
		fmt.Fprintln(d.w, "  <none>")
	} else {
		if len(runs) > MaxDescribeRuns {
			fmt.Fprintf(d.w, "  (the newest %d of %d)\n", MaxDescribeRuns, len(runs))
			runs = runs[len(runs)-MaxDescribeRuns:]
		}
		t := newTable(indent(d.w), "ID", "STATE", "CLUSTER", "AGE", "MESSAGE")
		for _, r := range runs {
			t.row(r.ID, string(r.State), r.ClusterID, age(d.now, r.SubmittedAt), r.Message)
		}
		t.flush()
	}
	d.events(rec.Events)
	return nil
}

// writePending writes why a run waits.
func writePending(k kv, p *job.Pending) {
	k.line("State", string(p.State))
	if p.Reason != "" {
		k.line("Reason", string(p.Reason))
	}
	if p.Message != "" {
		k.line("Message", p.Message)
	}
	if p.ResourceGroup != "" {
		k.line("Resource Group", p.ResourceGroup)
		pos := "admitted"
		if p.Position > 0 {
			pos = fmt.Sprintf("%d (%d ahead)", p.Position, p.Ahead)
		}
		k.line("Queue Position", pos)
		k.line("Needs", p.Needs.String())
		k.line("Allocatable", p.Allocatable.String())
	}
	if p.Lacks != "" {
		k.line("Lacks", p.Lacks)
	}
	if len(p.Clusters) > 0 {
		k.section("Waits For")
		t := newTable(indent(indent(k.w)), "CLUSTER", "NAME", "STATE")
		for _, c := range p.Clusters {
			t.row(c.ID, c.Name, c.State)
		}
		t.flush()
	}
}

// indent returns a writer that starts every line with two spaces.
func indent(w io.Writer) io.Writer { return &indenter{w: w, bol: true} }

type indenter struct {
	w   io.Writer
	bol bool
}

func (i *indenter) Write(p []byte) (int, error) {
	for n, b := range p {
		if i.bol {
			if _, err := io.WriteString(i.w, "  "); err != nil {
				return n, err
			}
			i.bol = false
		}
		if _, err := i.w.Write([]byte{b}); err != nil {
			return n, err
		}
		i.bol = b == '\n'
	}
	return len(p), nil
}
