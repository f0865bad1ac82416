package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// The kinds get, describe and delete name, with their aliases.
const (
	resClusters       = "clusters"
	resGroups         = "groups"
	resTemplates      = "templates"
	resJobs           = "jobs"
	resRuns           = "runs"
	resResourceGroups = "resourcegroups"
)

var aliases = map[string]string{
	"cluster": resClusters, "clusters": resClusters, "cls": resClusters,
	"group": resGroups, "groups": resGroups, "grp": resGroups,
	"template": resTemplates, "templates": resTemplates,
	"job": resJobs, "jobs": resJobs,
	"run": resRuns, "runs": resRuns,
	"resourcegroup": resResourceGroups, "resourcegroups": resResourceGroups, "rg": resResourceGroups,
}

// singular names one object of a kind, as create and delete print it.
var singular = map[string]string{resClusters: "cluster", resGroups: "group", resTemplates: "template",
	resJobs: "job", resRuns: "run", resResourceGroups: "resourcegroup"}

func resource(kind string, allowed ...string) (string, error) {
	r, ok := aliases[strings.ToLower(kind)]
	if !ok || !slices.Contains(allowed, r) {
		return "", fmt.Errorf("unknown kind %q: use one of %s", kind, strings.Join(allowed, ", "))
	}
	return r, nil
}

type getOptions struct {
	output   string
	selector string
	watch    bool
	chunk    int
	states   []string
	jobID    string
	cluster  string
}

func (a *app) getCmd() *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:   "get KIND [ID]",
		Short: "List clusters, groups, templates, jobs, runs or resource groups, or show one",
		Long: `Print a table of the objects of a kind, or of one object by its id (a
template by its name).

KIND is clusters, groups, templates, jobs, runs or resourcegroups (singular
forms and cls, grp, rg work too). -l selects by tags, as kubectl's label
selectors do (clusters, jobs and runs have tags; a run has its config's):
key=value and key==value are the SDK's own filter, key!=value, key and !key
are checked on what it returns. --watch keeps printing changes of clusters or
runs until interrupted. Lists are read in pages of --chunk-size.`,
		Example: `  kubectl dlc get clusters
  kubectl dlc get clusters -l team=search,env!=prod -o wide
  kubectl dlc get cluster cls-0123abcd -o yaml
  kubectl dlc get runs --job job-0123abcd --state running,queued
  kubectl dlc get runs -w`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := resource(args[0], resClusters, resGroups, resTemplates, resJobs, resRuns, resResourceGroups)
			if err != nil {
				return err
			}
			if err := checkOutput(o.output); err != nil {
				return err
			}
			if o.chunk < 0 || o.chunk > MaxChunkSize {
				return fmt.Errorf("--chunk-size must be 0 to %d", MaxChunkSize)
			}
			sel, err := parseSelector(o.selector)
			if err != nil {
				return err
			}
			if !sel.empty() && kind != resClusters && kind != resJobs && kind != resRuns {
				return fmt.Errorf("%s have no tags: -l selects clusters, jobs and runs", kind)
			}
			if o.watch && kind != resClusters && kind != resRuns {
				return fmt.Errorf("--watch is for clusters and runs")
			}
			if len(o.states) > 0 && kind != resClusters && kind != resRuns {
				return fmt.Errorf("--state is for clusters and runs")
			}
			valid := clusterStates
			if kind == resRuns {
				valid = runStates
			}
			for _, st := range o.states {
				if !slices.Contains(valid, st) {
					return fmt.Errorf("--state %q: %s are %s", st, kind, strings.Join(valid, ", "))
				}
			}
			if (o.jobID != "" || o.cluster != "") && kind != resRuns {
				return fmt.Errorf("--job and --on-cluster are for runs")
			}
			id := ""
			if len(args) == 2 {
				id = args[1]
			}
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				g := &getter{app: a, c: c, o: o, sel: sel, out: cmd.OutOrStdout(), now: a.env.Now()}
				return g.get(ctx, kind, id)
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "output format: yaml, json or wide")
	f.StringVarP(&o.selector, "selector", "l", "", "tag selector, e.g. team=a,env!=prod")
	f.BoolVarP(&o.watch, "watch", "w", false, "after listing, print every change (clusters, runs)")
	f.IntVar(&o.chunk, "chunk-size", 500, "read lists in pages of this many objects (0: in one call)")
	f.StringSliceVar(&o.states, "state", nil, "only clusters or runs in these states")
	f.StringVar(&o.jobID, "job", "", "only runs of this job config")
	f.StringVar(&o.cluster, "on-cluster", "", "only runs placed on this cluster")
	return cmd
}

type getter struct {
	*app
	c   *dlc.Client
	o   getOptions
	sel *selector
	out io.Writer
	now time.Time
}

func (g *getter) get(ctx context.Context, kind, id string) error {
	switch kind {
	case resClusters:
		return g.clusters(ctx, id)
	case resGroups:
		return g.groups(ctx, id)
	case resTemplates:
		return g.templates(ctx, id)
	case resJobs:
		return g.jobs(ctx, id)
	case resRuns:
		return g.runs(ctx, id)
	default:
		return g.resourceGroups(ctx, id)
	}
}

// pages reads a list page by page, chunk objects a page, until the last.
func pages[T any](chunk int, page func(limit int, cont string) ([]T, string, error)) ([]T, error) {
	var all []T
	cont := ""
	seen := map[string]bool{}
	for {
		items, next, err := page(chunk, cont)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("the list returned the continue token %q twice", next)
		}
		seen[next] = true
		cont = next
	}
}

// --- clusters

var clusterHeader = []string{"ID", "NAME", "STATE", "RESOURCE-GROUP", "PRIORITY", "WORKERS", "AGE"}
var clusterWide = []string{"GROUPS", "TAGS", "CREATOR", "IMAGE", "REASON"}

func (g *getter) header(base, wide []string) []string {
	if g.o.output == outWide {
		return append(slices.Clone(base), wide...)
	}
	return base
}

func (g *getter) clusterRow(c *cluster.Cluster) []string {
	workers := make([]string, 0, len(c.Spec.Workers))
	for _, w := range c.Spec.Workers {
		n, ok := c.Replicas[w.Name]
		if !ok {
			n = w.Instances.Min
		}
		workers = append(workers, fmt.Sprintf("%s=%d", w.Name, n))
	}
	row := []string{c.ID, c.Spec.Name, string(c.State), c.Spec.ResourceGroup,
		strconv.Itoa(c.Spec.EffectivePriority()), strings.Join(workers, ","), age(g.now, c.CreatedAt)}
	if g.o.output == outWide {
		row = append(row, strings.Join(c.Spec.Groups, ","), tags(c.Spec.Tags), c.Creator, c.Spec.Image, c.Reason)
	}
	return row
}

func (g *getter) clusters(ctx context.Context, id string) error {
	var items []*cluster.Cluster
	// A watch starts before the list, so that no change between them is
	// missed (one may be printed twice).
	var ch <-chan dlc.ClusterEvent
	if g.o.watch {
		var err error
		if ch, err = g.c.Clusters().Watch(ctx, dlc.ClusterWatchOptions{IDs: ids(id)}); err != nil {
			return err
		}
	}
	if id != "" {
		c, err := g.c.Clusters().Get(ctx, id)
		if err != nil {
			return err
		}
		items = []*cluster.Cluster{c}
	} else {
		states := make([]cluster.State, 0, len(g.o.states))
		for _, s := range g.o.states {
			states = append(states, cluster.State(s))
		}
		opts := dlc.ClusterListOptions{Tags: g.sel.equal, States: states}
		var err error
		if g.o.chunk == 0 {
			items, err = g.c.Clusters().List(ctx, opts)
		} else {
			items, err = pages(g.o.chunk, func(limit int, cont string) ([]*cluster.Cluster, string, error) {
				opts.Limit, opts.Continue = limit, cont
				p, err := g.c.Clusters().ListPage(ctx, opts)
				if err != nil {
					return nil, "", err
				}
				return p.Items, p.Continue, nil
			})
		}
		if err != nil {
			return err
		}
		items = slices.DeleteFunc(items, func(c *cluster.Cluster) bool { return !g.sel.matches(c.Spec.Tags) })
	}
	// The watch's rows go to the list's table, which remembers its
	// columns' widths: they line up with the list.
	t, err := g.printClusters(items, id != "")
	if err != nil || !g.o.watch {
		return err
	}
	// A delete is shown only for a cluster the filters selected: the
	// event of a delete carries no cluster to filter.
	shown := watchShown{}
	for _, c := range items {
		shown[c.ID] = true
	}
	for ev := range ch {
		if !shown.selects(ev.ID, ev.Cluster != nil && g.sel.matches(ev.Cluster.Spec.Tags) && g.inStates(string(ev.Cluster.State)), ev.Cluster == nil) {
			continue
		}
		g.now = g.env.Now()
		if g.o.output == outYAML || g.o.output == outJSON {
			if err := g.printWatched(ev.Type, ev.ID, ev.Cluster); err != nil {
				return err
			}
			continue
		}
		if ev.Cluster == nil {
			row := make([]string, len(g.header(clusterHeader, clusterWide)))
			row[0], row[2] = ev.ID, "deleted"
			t.row(row...)
		} else {
			t.row(g.clusterRow(ev.Cluster)...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

func (g *getter) inStates(s string) bool {
	return len(g.o.states) == 0 || slices.Contains(g.o.states, s)
}

// printWatched prints one watched change as YAML or JSON: a document with
// the change's type and the object.
func (g *getter) printWatched(typ dlc.EventType, id string, obj any) error {
	v := struct {
		Type   dlc.EventType `json:"type"`
		ID     string        `json:"id"`
		Object any           `json:"object,omitempty"`
	}{typ, id, obj}
	if g.o.output == outYAML {
		fmt.Fprintln(g.out, "---")
	}
	return printObject(g.out, g.o.output, v)
}

func (g *getter) printClusters(items []*cluster.Cluster, one bool) (*table, error) {
	switch g.o.output {
	case outYAML, outJSON:
		if one {
			return nil, printObject(g.out, g.o.output, items[0])
		}
		return nil, printObject(g.out, g.o.output, list[*cluster.Cluster]{Items: items})
	}
	if len(items) == 0 && !g.o.watch {
		fmt.Fprintln(g.out, "No clusters found.")
		return nil, nil
	}
	t := newTable(g.out, g.header(clusterHeader, clusterWide)...)
	for _, c := range items {
		t.row(g.clusterRow(c)...)
	}
	return t, t.flush()
}

// --- groups

func (g *getter) groups(ctx context.Context, id string) error {
	var items []*group.Group
	if id != "" {
		gr, err := g.c.Groups().Get(ctx, id)
		if err != nil {
			return err
		}
		items = []*group.Group{gr}
	} else {
		var err error
		if items, err = g.c.Groups().List(ctx); err != nil {
			return err
		}
	}
	switch g.o.output {
	case outYAML, outJSON:
		if id != "" {
			return printObject(g.out, g.o.output, items[0])
		}
		return printObject(g.out, g.o.output, list[*group.Group]{Items: items})
	}
	if len(items) == 0 {
		fmt.Fprintln(g.out, "No groups found.")
		return nil
	}
	t := newTable(g.out, g.header([]string{"ID", "NAME", "POLICY", "MEMBERS", "AGE"}, []string{"CREATOR", "ORDER"})...)
	for _, gr := range items {
		members, err := g.c.Groups().Members(ctx, gr.ID)
		n := strconv.Itoa(len(members))
		if err != nil {
			n = "<unknown>"
		}
		row := []string{gr.ID, gr.Name, string(gr.Policy), n, age(g.now, gr.CreatedAt)}
		if g.o.output == outWide {
			row = append(row, gr.Creator, strings.Join(gr.Order, ","))
		}
		t.row(row...)
	}
	return t.flush()
}

// --- templates

func (g *getter) templates(ctx context.Context, name string) error {
	var items []*cluster.Template
	if name != "" {
		t, err := g.c.Templates().Get(ctx, name)
		if err != nil {
			return err
		}
		items = []*cluster.Template{t}
	} else {
		var err error
		if items, err = g.c.Templates().List(ctx); err != nil {
			return err
		}
	}
	switch g.o.output {
	case outYAML, outJSON:
		if name != "" {
			return printObject(g.out, g.o.output, items[0])
		}
		return printObject(g.out, g.o.output, list[*cluster.Template]{Items: items})
	}
	if len(items) == 0 {
		fmt.Fprintln(g.out, "No templates found.")
		return nil
	}
	t := newTable(g.out, g.header([]string{"NAME", "IMAGE", "HEAD", "WORKER-GROUPS"}, []string{"DESCRIPTION"})...)
	for _, tp := range items {
		row := []string{tp.Name, tp.Image, tp.Head.NodeSpec, workerGroups(tp.Workers)}
		if g.o.output == outWide {
			row = append(row, tp.Description)
		}
		t.row(row...)
	}
	return t.flush()
}

// workerGroups writes "cpu:cu.8c32g[1-8],io:cu.4c8g[2]".
func workerGroups(ws []cluster.WorkerGroup) string {
	parts := make([]string, 0, len(ws))
	for _, w := range ws {
		r := strconv.Itoa(w.Instances.Min)
		if m := w.Instances.MaxOrMin(); m != w.Instances.Min {
			r += "-" + strconv.Itoa(m)
		}
		parts = append(parts, fmt.Sprintf("%s:%s[%s]", w.Name, w.NodeSpec, r))
	}
	return strings.Join(parts, ",")
}

// --- jobs

var jobHeader = []string{"ID", "NAME", "MODE", "TARGET", "RUNNING", "PRIORITY", "AGE"}
var jobWide = []string{"PACKAGE", "TAGS", "CREATOR"}

func (g *getter) jobs(ctx context.Context, id string) error {
	var items []job.ListEntry
	var rec *job.Record
	if id != "" {
		var err error
		if rec, err = g.c.Jobs().Get(ctx, id); err != nil {
			return err
		}
		runs, err := g.c.Runs().List(ctx, dlc.RunListOptions{JobID: id,
			States: []job.RunState{job.Queued, job.Waiting, job.Provisioning, job.Running}})
		if err != nil {
			return err
		}
		items = []job.ListEntry{{ID: rec.ID, Name: rec.Config.Name, Mode: rec.Config.Mode(), Resource: rec.Config.Target(),
			Package: rec.Config.Package.String(), Running: len(runs), Priority: rec.Config.Priority(), Tags: rec.Config.Tags,
			Creator: rec.Creator, CreatedAt: rec.CreatedAt}}
	} else {
		opts := dlc.JobListOptions{Tags: g.sel.equal}
		var err error
		if g.o.chunk == 0 {
			items, err = g.c.Jobs().List(ctx, opts)
		} else {
			items, err = pages(g.o.chunk, func(limit int, cont string) ([]job.ListEntry, string, error) {
				opts.Limit, opts.Continue = limit, cont
				p, err := g.c.Jobs().ListPage(ctx, opts)
				if err != nil {
					return nil, "", err
				}
				return p.Items, p.Continue, nil
			})
		}
		if err != nil {
			return err
		}
		items = slices.DeleteFunc(items, func(e job.ListEntry) bool { return !g.sel.matches(e.Tags) })
	}
	switch g.o.output {
	case outYAML, outJSON:
		if rec != nil {
			return printObject(g.out, g.o.output, rec)
		}
		return printObject(g.out, g.o.output, list[job.ListEntry]{Items: items})
	}
	if len(items) == 0 {
		fmt.Fprintln(g.out, "No jobs found.")
		return nil
	}
	t := newTable(g.out, g.header(jobHeader, jobWide)...)
	for _, e := range items {
		row := []string{e.ID, e.Name, string(e.Mode), e.Resource, strconv.Itoa(e.Running), strconv.Itoa(e.Priority), age(g.now, e.CreatedAt)}
		if g.o.output == outWide {
			row = append(row, e.Package, tags(e.Tags), e.Creator)
		}
		t.row(row...)
	}
	return t.flush()
}

// --- runs

var runHeader = []string{"ID", "JOB", "STATE", "CLUSTER", "DURATION", "AGE"}
var runWide = []string{"ATTEMPT", "WAITING", "CREATOR", "MESSAGE"}

func (g *getter) runRow(r *job.Run) []string {
	d := "<none>"
	if !r.StartedAt.IsZero() {
		d = dur(r.Duration(g.now))
	}
	row := []string{r.ID, r.JobID, string(r.State), r.ClusterID, d, age(g.now, r.SubmittedAt)}
	if g.o.output == outWide {
		row = append(row, strconv.Itoa(r.AttemptNumber()), string(r.WaitReason), r.Creator, r.Message)
	}
	return row
}

func dur(d time.Duration) string {
	return d.Round(time.Second).String()
}

func (g *getter) runs(ctx context.Context, id string) error {
	var items []*job.Run
	var ch <-chan dlc.RunEvent
	if g.o.watch {
		var err error
		if ch, err = g.c.Runs().Watch(ctx, dlc.RunWatchOptions{IDs: ids(id), JobID: g.o.jobID}); err != nil {
			return err
		}
	}
	if id != "" {
		r, err := g.c.Runs().Get(ctx, id)
		if err != nil {
			return err
		}
		items = []*job.Run{r}
	} else {
		states := make([]job.RunState, 0, len(g.o.states))
		for _, s := range g.o.states {
			states = append(states, job.RunState(s))
		}
		opts := dlc.RunListOptions{Tags: g.sel.equal, States: states, JobID: g.o.jobID, ClusterID: g.o.cluster}
		var err error
		if g.o.chunk == 0 {
			items, err = g.c.Runs().List(ctx, opts)
		} else {
			items, err = pages(g.o.chunk, func(limit int, cont string) ([]*job.Run, string, error) {
				opts.Limit, opts.Continue = limit, cont
				p, err := g.c.Runs().ListPage(ctx, opts)
				if err != nil {
					return nil, "", err
				}
				return p.Items, p.Continue, nil
			})
		}
		if err != nil {
			return err
		}
		items = slices.DeleteFunc(items, func(r *job.Run) bool { return !g.sel.matches(r.Config.Tags) })
	}
	// The watch's rows go to the list's table, which remembers its
	// columns' widths: they line up with the list.
	t, err := g.printRuns(items, id != "")
	if err != nil || !g.o.watch {
		return err
	}
	shown := watchShown{}
	for _, r := range items {
		shown[r.ID] = true
	}
	for ev := range ch {
		r := ev.Run
		if !shown.selects(ev.ID, r != nil && g.sel.matches(r.Config.Tags) && g.inStates(string(r.State)) &&
			(g.o.cluster == "" || r.ClusterID == g.o.cluster), r == nil) {
			continue
		}
		g.now = g.env.Now()
		if g.o.output == outYAML || g.o.output == outJSON {
			if err := g.printWatched(ev.Type, ev.ID, ev.Run); err != nil {
				return err
			}
			continue
		}
		if ev.Run == nil {
			row := make([]string, len(g.header(runHeader, runWide)))
			row[0], row[2] = ev.ID, "deleted"
			t.row(row...)
		} else {
			t.row(g.runRow(ev.Run)...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

func (g *getter) printRuns(items []*job.Run, one bool) (*table, error) {
	switch g.o.output {
	case outYAML, outJSON:
		if one {
			return nil, printObject(g.out, g.o.output, items[0])
		}
		return nil, printObject(g.out, g.o.output, list[*job.Run]{Items: items})
	}
	if len(items) == 0 && !g.o.watch {
		fmt.Fprintln(g.out, "No runs found.")
		return nil, nil
	}
	t := newTable(g.out, g.header(runHeader, runWide)...)
	for _, r := range items {
		t.row(g.runRow(r)...)
	}
	return t, t.flush()
}

// --- resource groups

func (g *getter) resourceGroups(ctx context.Context, id string) error {
	var items []quota.Usage
	if id != "" {
		u, err := g.c.ResourceGroups().Get(ctx, id)
		if err != nil {
			return err
		}
		items = []quota.Usage{u}
	} else {
		var err error
		if items, err = g.c.ResourceGroups().List(ctx); err != nil {
			return err
		}
	}
	switch g.o.output {
	case outYAML, outJSON:
		if id != "" {
			return printObject(g.out, g.o.output, items[0])
		}
		return printObject(g.out, g.o.output, list[quota.Usage]{Items: items})
	}
	if len(items) == 0 {
		fmt.Fprintln(g.out, "No resource groups found.")
		return nil
	}
	t := newTable(g.out, "ID", "PACKAGE", "CAPACITY", "RESERVED", "ALLOCATABLE", "HOLDERS")
	for _, u := range items {
		t.row(u.ID, u.Package, u.Capacity.String(), u.Reserved.String(), u.Allocatable.String(), strconv.Itoa(len(u.Holders)))
	}
	return t.flush()
}

func ids(id string) []string {
	if id == "" {
		return nil
	}
	return []string{id}
}

// watchShown is the objects a watch has shown as selected (listed, or a
// change that matched the filters), by id.
type watchShown map[string]bool

// selects says whether a watch's event of object id is shown: a change
// when it matches the filters (and the object is remembered), a delete
// when the object was shown before. A change that no longer matches is
// not shown, and the object forgotten.
func (w watchShown) selects(id string, matches, deleted bool) bool {
	switch {
	case deleted:
		was := w[id]
		delete(w, id)
		return was
	case matches:
		w[id] = true
		return true
	default:
		delete(w, id)
		return false
	}
}

// The states --state takes, of clusters and of runs.
var (
	clusterStates = []string{string(cluster.Creating), string(cluster.Created), string(cluster.Starting), string(cluster.Running),
		string(cluster.Hibernating), string(cluster.Hibernated), string(cluster.Deleting), string(cluster.Abnormal)}
	runStates = []string{string(job.Queued), string(job.Waiting), string(job.Provisioning), string(job.Running),
		string(job.Succeeded), string(job.Failed), string(job.Stopped)}
)
