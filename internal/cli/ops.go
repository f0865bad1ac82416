package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/plan"
	"github.com/aidlc/dlc/quota"
)

// ErrRunNotSucceeded is what submit --wait or --follow returns when the run
// ended otherwise than succeeded.
var ErrRunNotSucceeded = errors.New("the run did not succeed")

func (a *app) submitCmd() *cobra.Command {
	var o fileOptions
	var wait, follow bool
	cmd := &cobra.Command{
		Use:   "submit -f JOB-FILE",
		Short: "Save a job config and start a run of it",
		Long: `Save the job config of a file and start a run of it, in one call. When the run
cannot start, the saved config stays (its id is printed) and the error says
why. Under --request-id the whole call can be retried after a lost reply
without saving or running twice.

--wait returns once the run has ended; --follow prints its log lines as they
come, until it ends. Either exits non-zero when the run did not succeed.`,
		Example: `  kubectl dlc submit -f examples/configs/job-on-cluster.yaml
  kubectl dlc submit -f job.yaml --follow --request-id nightly-2026-01-01`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, err := readDocuments(o.file, kindJob, cmd.InOrStdin())
			if err != nil {
				return err
			}
			if len(docs) != 1 {
				return fmt.Errorf("%s: submit takes one job config, the file has %d", o.file, len(docs))
			}
			out := cmd.OutOrStdout()
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				rec, run, err := job.Submit(ctx, c, docs[0].job, o.requestID)
				if rec != nil {
					fmt.Fprintf(out, "job/%s saved (%s)\n", rec.ID, rec.Config.Name)
				}
				if err != nil {
					return wrap(fmt.Sprintf("submit %q", docs[0].job.Name), err)
				}
				fmt.Fprintf(out, "run/%s %s\n", run.ID, run.State)
				switch {
				case follow:
					return followRun(ctx, c, run.ID, out, true)
				case wait:
					return waitRun(ctx, c, run.ID, out)
				}
				return nil
			})
		},
	}
	o.addFlags(cmd, "the job config", true)
	cmd.Flags().StringVar(&o.requestID, "request-id", "", "make the submit idempotent under this id")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the run ends")
	cmd.Flags().BoolVar(&follow, "follow", false, "print the run's log lines until it ends")
	_ = cmd.Flags().MarkHidden("kind")
	return cmd
}

// waitRun waits until the run ends and prints how.
func waitRun(ctx context.Context, c *dlc.Client, id string, out io.Writer) error {
	r, err := c.Runs().Wait(ctx, id, job.Ended)
	if err != nil {
		return err
	}
	return ended(r, out)
}

func ended(r *job.Run, out io.Writer) error {
	msg := ""
	if r.Message != "" {
		msg = ": " + r.Message
	}
	fmt.Fprintf(out, "run/%s %s%s\n", r.ID, r.State, msg)
	if r.State != job.Succeeded {
		return fmt.Errorf("run %s %s: %w", r.ID, r.State, ErrRunNotSucceeded)
	}
	return nil
}

// followRun prints the run's log lines as they come until it ends (or ctx
// does); with final it then prints how it ended.
func followRun(ctx context.Context, c *dlc.Client, id string, out io.Writer, final bool) error {
	lines, err := c.Runs().Follow(ctx, id)
	if err != nil {
		return err
	}
	for l := range lines {
		fmt.Fprintln(out, l)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: run %s goes on (kubectl dlc logs -f %s): %w", id, id, ctx.Err())
	}
	if !final {
		return nil
	}
	// Follow closes once the run has ended; its last state may still be
	// on its way to this client's cache.
	r, err := c.Runs().Wait(ctx, id, job.Ended)
	if err != nil {
		return err
	}
	return ended(r, out)
}

func (a *app) logsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs RUN-ID",
		Short: "Print a run's log lines",
		Long: `Print what a run has logged: from Ray while Ray has it, else the tail kept
when it ended. -f keeps printing new lines until the run ends.`,
		Example: `  kubectl dlc logs run-0123abcd
  kubectl dlc logs -f run-0123abcd`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				if follow {
					return followRun(ctx, c, args[0], out, false)
				}
				lines, err := c.Runs().Logs(ctx, args[0])
				if err != nil {
					return err
				}
				for _, l := range lines {
					fmt.Fprintln(out, l)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until the run ends")
	return cmd
}

func (a *app) whyCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "why RUN-ID",
		Short: "Say why a run waits: its place in the queue, what it lacks, what is ahead",
		Long: `Say why a run has not started: for an on-demand run its place in its resource
group's queue, the runs ahead of it and the quota it lacks; for a run on a
cluster or a group, the clusters it waits for and their states.`,
		Example: `  kubectl dlc why run-0123abcd`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPageOutput(output); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				p, err := c.Runs().Pending(ctx, args[0])
				if errors.Is(err, errs.ErrState) {
					// It does not wait (any more): say what it does.
					r, gerr := c.Runs().Get(ctx, args[0])
					if gerr != nil {
						return err
					}
					if output == outYAML || output == outJSON {
						return printObject(out, output, &job.Pending{RunID: r.ID, State: r.State, Message: r.Message})
					}
					fmt.Fprintf(out, "Run %s is %s: it does not wait", r.ID, r.State)
					if r.ClusterID != "" {
						fmt.Fprintf(out, " (cluster %s)", r.ClusterID)
					}
					if r.Message != "" {
						fmt.Fprintf(out, ": %s", r.Message)
					}
					fmt.Fprintln(out)
					return nil
				}
				if err != nil {
					return err
				}
				var ahead []job.Pending
				if p.ResourceGroup != "" && p.Position > 1 {
					q, err := c.ResourceGroups().Pending(ctx, p.ResourceGroup)
					if err == nil {
						for _, o := range q {
							if o.Position > 0 && o.Position < p.Position {
								ahead = append(ahead, o)
							}
						}
					}
				}
				if output == outYAML || output == outJSON {
					return printObject(out, output, struct {
						*job.Pending `json:",inline"`
						AheadRuns    []job.Pending `json:"aheadRuns,omitempty"`
					}{p, ahead})
				}
				fmt.Fprintf(out, "Run %s is %s", p.RunID, p.State)
				if p.Reason != "" {
					fmt.Fprintf(out, ": %s", p.Reason)
				}
				fmt.Fprintln(out)
				writePending(kv{w: out}, p)
				if len(ahead) > 0 {
					kv{w: out}.section("Ahead")
					t := newTable(indent(out), "POSITION", "RUN", "NEEDS")
					for _, o := range ahead {
						t.row(strconv.Itoa(o.Position), o.RunID, o.Needs.String())
					}
					return t.flush()
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml or json")
	return cmd
}

func (a *app) planCmd() *cobra.Command {
	var o fileOptions
	var output string
	cmd := &cobra.Command{
		Use:   "plan -f FILE | plan start CLUSTER-ID | plan run JOB-ID",
		Short: "Say what a create, start or run would do, writing nothing",
		Long: `Say what an operation would do without doing it: the objects the backend
would write (-o yaml shows them whole: on Kubernetes the RayCluster or RayJob),
the quota it reserves beside what its resource group holds, whether it fits
now, and where an on-demand run that does not fit would wait.

plan -f FILE plans the create of a cluster spec, or a run of a job config;
a job config must be saved first (create -f), as a run is of a saved config:
its name finds it. plan start plans a cluster's start, plan run a job's run.`,
		Example: `  kubectl dlc plan -f examples/configs/cluster-cpu-autoscaling.yaml
  kubectl dlc plan -f job-on-demand.yaml -o yaml
  kubectl dlc plan start cls-0123abcd
  kubectl dlc plan run job-0123abcd`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.file != "" {
				return cobra.NoArgs(cmd, args)
			}
			if len(args) != 2 || (args[0] != "start" && args[0] != "run") {
				return errors.New("give -f FILE, or start CLUSTER-ID, or run JOB-ID")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPageOutput(output); err != nil {
				return err
			}
			var doc *document
			if o.file != "" {
				docs, err := readDocuments(o.file, o.kind, cmd.InOrStdin())
				if err != nil {
					return err
				}
				if len(docs) != 1 || docs[0].kind == kindTemplate {
					return fmt.Errorf("%s: plan takes one cluster spec or job config", o.file)
				}
				doc = docs[0]
			}
			out := cmd.OutOrStdout()
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				var p *dlc.Plan
				var err error
				switch {
				case doc != nil && doc.kind == kindCluster:
					p, err = c.Clusters().PlanCreate(ctx, doc.cluster)
					err = wrap(fmt.Sprintf("%s: plan create cluster %q", doc.source, doc.name()), err)
				case doc != nil:
					var id string
					if id, err = savedJob(ctx, c, doc.job.Name); err == nil {
						p, err = c.Jobs().PlanRun(ctx, id)
					}
					err = wrap(fmt.Sprintf("%s: plan run of job %q", doc.source, doc.name()), err)
				case args[0] == "start":
					p, err = c.Clusters().PlanStart(ctx, args[1])
				default:
					p, err = c.Jobs().PlanRun(ctx, args[1])
				}
				if err != nil {
					return err
				}
				if output == outYAML || output == outJSON {
					return printObject(out, output, p)
				}
				return writePlan(out, p)
			})
		},
	}
	o.addFlags(cmd, "a cluster spec or a saved job config", false)
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml or json (with the manifests)")
	return cmd
}

// savedJob returns the id of the one saved job config called name.
func savedJob(ctx context.Context, c *dlc.Client, name string) (string, error) {
	entries, err := c.Jobs().List(ctx, dlc.JobListOptions{NameContains: name})
	if err != nil {
		return "", err
	}
	var ids []string
	for _, e := range entries {
		if e.Name == name {
			ids = append(ids, e.ID)
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("%w: no saved job config is called %q: save it first (kubectl dlc create -f)", errs.ErrNotFound, name)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%w: %d job configs are called %q: plan run JOB-ID", errs.ErrConflict, len(ids), name)
}

func writePlan(w io.Writer, p *plan.Plan) error {
	k := kv{w: w}
	k.line("Operation", p.Operation)
	if p.Cluster != nil {
		id := p.Cluster.ID
		if id == "" {
			id = "<new>"
		}
		k.line("Cluster", fmt.Sprintf("%s (%s), %s", p.Cluster.Spec.Name, id, orNone(string(p.Cluster.State))))
	}
	if p.Run != nil {
		k.line("Run", fmt.Sprintf("of job %s, %s %s", p.Run.JobID, p.Run.Config.Mode(), p.Run.Config.Target()))
	}
	if q := p.Quota; q != nil {
		k.section("Quota")
		ki := kv{w: w, indent: "  "}
		ki.line("Resource Group", q.ResourceGroup)
		ki.line("Capacity", q.Capacity.String())
		ki.line("Needs", q.Needs.String())
		ki.line("Reserved Before", q.ReservedBefore.String())
		ki.line("Reserved After", q.ReservedAfter.String())
		ki.line("Allocatable", q.Allocatable.String())
		fits := "yes"
		if !q.Fits {
			fits = "no"
		}
		ki.line("Fits", fits)
		if q.Lacks != "" {
			ki.line("Lacks", q.Lacks)
		}
	} else {
		k.line("Quota", "<none: reserves nothing>")
	}
	if p.Position > 0 {
		k.line("Queue Position", fmt.Sprintf("%d (%d ahead)", p.Position, p.Ahead))
	}
	if len(p.Notes) > 0 {
		k.section("Notes")
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  - %s\n", oneLine(n))
		}
	}
	k.section("Manifests")
	if len(p.Manifests) == 0 {
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	t := newTable(indent(w), "KIND", "NAME")
	for _, m := range p.Manifests {
		t.row(m.Kind, m.Name)
	}
	return t.flush()
}

func (a *app) quotaCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "quota RESOURCE-GROUP",
		Short: "Show a resource group's quota, who holds it, and its queue",
		Long: `Show a resource group's capacity, what is reserved and by whom, what it can
allocate now, and the on-demand runs waiting in its queue in admission order
(priority, then submission), each with what it needs.`,
		Example: `  kubectl dlc quota rg-cpu
  kubectl dlc quota rg-cpu -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPageOutput(output); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				u, err := c.ResourceGroups().Get(ctx, args[0])
				if err != nil {
					return err
				}
				q, err := c.ResourceGroups().Pending(ctx, args[0])
				if err != nil {
					return err
				}
				if output == outYAML || output == outJSON {
					return printObject(out, output, struct {
						quota.Usage `json:",inline"`
						Queue       []job.Pending `json:"queue"`
					}{u, q})
				}
				return writeQuota(out, u, q)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml or json")
	return cmd
}

func writeQuota(w io.Writer, u quota.Usage, q []job.Pending) error {
	k := kv{w: w}
	k.line("Resource Group", u.ID)
	k.line("Package", u.Package)
	k.line("Capacity", u.Capacity.String())
	k.line("Reserved", u.Reserved.String())
	k.line("Allocatable", u.Allocatable.String())
	if !u.Headroom.IsZero() {
		k.line("Headroom", u.Headroom.String()+" (reserved, not running: autoscaling headroom)")
	}
	k.section("Holders")
	if len(u.Holders) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		t := newTable(indent(w), "HOLDER", "RESERVED")
		for _, h := range sortedKeys(u.Holders) {
			t.row(h, u.Holders[h].String())
		}
		t.flush()
	}
	k.section("Queue")
	if len(q) == 0 {
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	t := newTable(indent(w), "POSITION", "RUN", "STATE", "NEEDS", "LACKS")
	for _, p := range q {
		t.row(strconv.Itoa(p.Position), p.RunID, string(p.State), p.Needs.String(), strings.TrimSpace(p.Lacks))
	}
	return t.flush()
}
