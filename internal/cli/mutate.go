package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

type fileOptions struct {
	file      string
	kind      string
	requestID string
}

func (o *fileOptions) addFlags(cmd *cobra.Command, what string, required bool) {
	cmd.Flags().StringVarP(&o.file, "filename", "f", "", what+" (YAML; - reads standard input)")
	cmd.Flags().StringVar(&o.kind, "kind", "", "the documents' kind: cluster, job or template (default: told by their fields)")
	if required {
		_ = cmd.MarkFlagRequired("filename")
	}
}

const fileKinds = `A file holds one or more YAML documents (separated by ---): cluster specs,
job configs or templates, as in examples/configs, each read strictly (an
unknown field is an error naming its line). Their kind is told by their fields
(a job has an entrypoint, a cluster a resource group, a template neither), or
set with --kind.`

func (a *app) createCmd() *cobra.Command {
	var o fileOptions
	cmd := &cobra.Command{
		Use:   "create -f FILE",
		Short: "Create clusters, job configs and templates from a file",
		Long: "Create every object of a file; an object that exists already is an error (see apply).\n\n" + fileKinds +
			"\n\nWith --request-id a retried create of one cluster or job config returns what the first made.",
		Example: `  kubectl dlc create -f examples/configs/cluster-cpu-autoscaling.yaml
  kubectl dlc create -f job-on-cluster.yaml --request-id 7f3c1e`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, err := readDocuments(o.file, o.kind, cmd.InOrStdin())
			if err != nil {
				return err
			}
			if o.requestID != "" && len(docs) > 1 {
				return errors.New("--request-id is for a file of one document")
			}
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				for _, d := range docs {
					if err := create(ctx, c, d, o.requestID, cmd.OutOrStdout()); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	o.addFlags(cmd, "the file to create from", true)
	cmd.Flags().StringVar(&o.requestID, "request-id", "", "make the create idempotent under this id")
	return cmd
}

func create(ctx context.Context, c *dlc.Client, d *document, requestID string, out io.Writer) error {
	what := fmt.Sprintf("%s: create %s %q", d.source, d.kind, d.name())
	switch d.kind {
	case kindCluster:
		cl, err := c.Clusters().Create(ctx, d.cluster, dlc.ClusterCreateOptions{RequestID: requestID})
		if err != nil {
			return wrap(what, err)
		}
		fmt.Fprintf(out, "cluster/%s created (%s)\n", cl.ID, cl.Spec.Name)
	case kindJob:
		rec, err := c.Jobs().Create(ctx, d.job, dlc.SaveOptions{RequestID: requestID})
		if err != nil {
			return wrap(what, err)
		}
		fmt.Fprintf(out, "job/%s created (%s)\n", rec.ID, rec.Config.Name)
	default:
		if _, err := c.Templates().Get(ctx, d.template.Name); err == nil {
			return wrap(what, fmt.Errorf("%w: template %q exists (apply replaces it)", errs.ErrConflict, d.template.Name))
		} else if !errors.Is(err, errs.ErrNotFound) {
			return wrap(what, err)
		}
		if err := c.Templates().Save(ctx, d.template); err != nil {
			return wrap(what, err)
		}
		fmt.Fprintf(out, "template/%s created\n", d.template.Name)
	}
	return nil
}

func (a *app) applyCmd() *cobra.Command {
	var o fileOptions
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update clusters, job configs and templates from a file",
		Long: `Create every object of a file that does not exist, and update the ones that
do: a cluster or a job config is found by its name (one standing cluster, one
job config of that name; several are an error), then updated over the version
read, so that an edit made meanwhile is a conflict, not lost. A running
cluster takes worker ranges and metadata at once and the rest at its next
start (printed); a job config takes a new revision, of the fields a revision
may change (J15). A template is replaced.

` + fileKinds,
		Example: `  kubectl dlc apply -f examples/configs/cluster-cpu-autoscaling.yaml
  kubectl dlc apply -f jobs.yaml --kind job
  cat cluster.yaml | kubectl dlc apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, err := readDocuments(o.file, o.kind, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				for _, d := range docs {
					if err := apply(ctx, c, d, cmd.OutOrStdout()); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	o.addFlags(cmd, "the file to apply", true)
	return cmd
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func apply(ctx context.Context, c *dlc.Client, d *document, out io.Writer) error {
	what := fmt.Sprintf("%s: apply %s %q", d.source, d.kind, d.name())
	switch d.kind {
	case kindCluster:
		all, err := c.Clusters().List(ctx, dlc.ClusterListOptions{Kind: cluster.KindStanding})
		if err != nil {
			return wrap(what, err)
		}
		var found []*cluster.Cluster
		for _, cl := range all {
			if cl.Spec.Name == d.cluster.Name {
				found = append(found, cl)
			}
		}
		switch len(found) {
		case 0:
			return create(ctx, c, d, "", out)
		case 1:
		default:
			return wrap(what, fmt.Errorf("%w: %d clusters are called %q", errs.ErrConflict, len(found), d.cluster.Name))
		}
		cur := found[0]
		if sameJSON(&cur.Spec, d.cluster) {
			fmt.Fprintf(out, "cluster/%s unchanged\n", cur.ID)
			return nil
		}
		cur.Spec = *d.cluster
		res, err := c.Clusters().Update(ctx, cur)
		if err != nil {
			return wrap(what, err)
		}
		fmt.Fprintf(out, "cluster/%s configured", res.Cluster.ID)
		if len(res.NeedsRestart) > 0 {
			fmt.Fprintf(out, " (at the next start: %s)", strings.Join(res.NeedsRestart, ", "))
		}
		fmt.Fprintln(out)
	case kindJob:
		entries, err := c.Jobs().List(ctx, dlc.JobListOptions{NameContains: d.job.Name})
		if err != nil {
			return wrap(what, err)
		}
		var found []job.ListEntry
		for _, e := range entries {
			if e.Name == d.job.Name {
				found = append(found, e)
			}
		}
		switch len(found) {
		case 0:
			return create(ctx, c, d, "", out)
		case 1:
		default:
			return wrap(what, fmt.Errorf("%w: %d job configs are called %q", errs.ErrConflict, len(found), d.job.Name))
		}
		rec, err := c.Jobs().Get(ctx, found[0].ID)
		if err != nil {
			return wrap(what, err)
		}
		if sameJSON(&rec.Config, d.job) {
			fmt.Fprintf(out, "job/%s unchanged\n", rec.ID)
			return nil
		}
		rec.Config = *d.job
		rec, err = c.Jobs().Update(ctx, rec)
		if err != nil {
			return wrap(what, err)
		}
		fmt.Fprintf(out, "job/%s configured (revision %d)\n", rec.ID, rec.Revision)
	default:
		old, err := c.Templates().Get(ctx, d.template.Name)
		switch {
		case errors.Is(err, errs.ErrNotFound):
			return create(ctx, c, d, "", out)
		case err != nil:
			return wrap(what, err)
		case sameJSON(old, d.template):
			fmt.Fprintf(out, "template/%s unchanged\n", d.template.Name)
			return nil
		}
		if err := c.Templates().Save(ctx, d.template); err != nil {
			return wrap(what, err)
		}
		fmt.Fprintf(out, "template/%s configured\n", d.template.Name)
	}
	return nil
}

func (a *app) startCmd() *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "start CLUSTER-ID",
		Short: "Start a created or hibernated cluster",
		Long: `Start a cluster: its reservation is made in its resource group (the start is
refused when the quota cannot hold it), then Ray brings it up. With --wait the
command returns once it runs (or fails when it becomes abnormal).`,
		Example: `  kubectl dlc start cls-0123abcd --wait`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				cl, err := c.Clusters().Start(ctx, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "cluster/%s %s\n", cl.ID, cl.State)
				if !wait {
					return nil
				}
				cl, err = c.Clusters().Wait(ctx, cl.ID, func(cl *cluster.Cluster) (bool, error) {
					if cl.State == cluster.Abnormal {
						return false, fmt.Errorf("cluster %s is abnormal: %s", cl.ID, cl.Reason)
					}
					return cl.State == cluster.Running, nil
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "cluster/%s %s\n", cl.ID, cl.State)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the cluster runs")
	return cmd
}

func (a *app) hibernateCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "hibernate CLUSTER-ID",
		Short: "Release a cluster's compute and quota, keeping its configuration",
		Long: `Hibernate a running or abnormal cluster: Ray lets its compute go and its
reservation is released; its configuration and storage stay, and start brings
it back. Active runs on it refuse the hibernate unless --force, which stops
them.`,
		Example: `  kubectl dlc hibernate cls-0123abcd
  kubectl dlc hibernate cls-0123abcd --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				cl, err := c.Clusters().Hibernate(ctx, args[0], dlc.HibernateOptions{Force: force})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "cluster/%s %s\n", cl.ID, cl.State)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "stop the cluster's active runs")
	return cmd
}

func (a *app) deleteCmd() *cobra.Command {
	var force bool
	var moveTo string
	cmd := &cobra.Command{
		Use:   "delete cluster|job|group|template|resourcegroup ID",
		Short: "Delete a cluster, a job config, a cluster group, a template or a resource group",
		Long: `Delete one object (a template by its name).

cluster: refused while runs are active on it, unless --force, which stops them
and deletes in any state. job: refused while its runs are active. group: its
clusters move to the group of --move-to. resourcegroup: refused while anything
holds quota in it or a run queues, runs or is cleaned up in it.`,
		Example: `  kubectl dlc delete cluster cls-0123abcd
  kubectl dlc delete group grp-0123abcd --move-to grp-4567efab
  kubectl dlc delete template "A100 训练环境"
  kubectl dlc delete resourcegroup rg-spare`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := resource(args[0], resClusters, resJobs, resGroups, resTemplates, resResourceGroups)
			if err != nil {
				return err
			}
			if force && kind != resClusters {
				return errors.New("--force is for clusters")
			}
			if moveTo != "" && kind != resGroups {
				return errors.New("--move-to is for groups")
			}
			id := args[1]
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				var err error
				switch kind {
				case resClusters:
					err = c.Clusters().Delete(ctx, id, dlc.DeleteOptions{Force: force})
				case resJobs:
					err = c.Jobs().Delete(ctx, id)
				case resGroups:
					err = c.Groups().Delete(ctx, id, moveTo)
				case resResourceGroups:
					err = c.ResourceGroups().Delete(ctx, id)
				default:
					err = c.Templates().Delete(ctx, id)
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s/%s deleted\n", singular[kind], id)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "cluster: stop its active runs and delete in any state")
	cmd.Flags().StringVar(&moveTo, "move-to", "", "group: the group its clusters move to")
	return cmd
}
