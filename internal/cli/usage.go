package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/usage"
)

// outCSV is the usage report's CSV output.
const outCSV = "csv"

func (a *app) usageCmd() *cobra.Command {
	var (
		output, from, to, by, selector, prices string
		filter                                 usage.Filter
	)
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Report what clusters ran: core-hours, GiB-hours, GPU-hours and node-hours, grouped and priced",
		Long: `Report the compute clusters ran in a span (metered from the pods Ray ran, once
per interval, across replicas), grouped by resource group, resource package,
creator, cluster, job config or a tag key, optionally priced by a price list
(a YAML or JSON file: currency, nodeHour per node spec, packages per resource
package). Only the clusters you may describe are counted.`,
		Example: `  kubectl dlc usage --from 2026-12-01 --to 2026-12-08 --by tag:team
  kubectl dlc usage --by resourcePackage --prices prices.yaml -o csv > december.csv
  kubectl dlc usage --by job -l team=nlp --resource-group rg-gpu -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != outJSON && output != outYAML && output != outCSV {
				return fmt.Errorf("--output %q: want json, yaml or csv (or none, for a table)", output)
			}
			now := a.env.Now()
			q := usage.Query{From: now.Add(-30 * 24 * time.Hour), To: now, GroupBy: usage.GroupBy(by), Filter: filter}
			var err error
			if from != "" {
				if q.From, err = parseWhen(from); err != nil {
					return fmt.Errorf("--from: %w", err)
				}
			}
			if to != "" {
				if q.To, err = parseWhen(to); err != nil {
					return fmt.Errorf("--to: %w", err)
				}
			}
			sel, err := parseSelector(selector)
			if err != nil {
				return err
			}
			if len(sel.notEqual) > 0 || len(sel.exists) > 0 || len(sel.absent) > 0 {
				return fmt.Errorf("selector %q: usage selects by tag equality only (key=value)", selector)
			}
			q.Filter.Tags = sel.equal
			if prices != "" {
				b, err := readFile(prices, cmd.InOrStdin())
				if err != nil {
					return err
				}
				q.Prices = &usage.PriceList{}
				if err := yaml.UnmarshalStrict(b, q.Prices); err != nil {
					return fmt.Errorf("--prices %s: %w", prices, err)
				}
			}
			out := cmd.OutOrStdout()
			return a.withSession(cmd, func(ctx context.Context, c *dlc.Client) error {
				rep, err := c.Usage(ctx, q)
				if err != nil {
					return err
				}
				switch output {
				case outCSV:
					return rep.WriteCSV(out)
				case outJSON, outYAML:
					return printObject(out, output, rep)
				}
				return writeUsage(out, rep)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json, yaml or csv")
	cmd.Flags().StringVar(&from, "from", "", "the span's start: RFC 3339 or YYYY-MM-DD (UTC); default 30 days ago")
	cmd.Flags().StringVar(&to, "to", "", "the span's end (excluded): RFC 3339 or YYYY-MM-DD (UTC); default now")
	cmd.Flags().StringVar(&by, "by", "", "group by resourceGroup, resourcePackage, creator, cluster, job or tag:KEY; default one total")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only clusters with these tags (key=value,…)")
	cmd.Flags().StringVar(&prices, "prices", "", "a price list file (YAML or JSON; - for stdin)")
	cmd.Flags().StringVar(&filter.ResourceGroup, "resource-group", "", "only this resource group")
	cmd.Flags().StringVar(&filter.ResourcePackage, "package", "", "only this resource package")
	cmd.Flags().StringVar(&filter.Creator, "creator", "", "only clusters this user created")
	cmd.Flags().StringVar(&filter.Cluster, "cluster", "", "only this cluster")
	cmd.Flags().StringVar(&filter.JobConfig, "job", "", "only the on-demand clusters of this job config")
	return cmd
}

// parseWhen reads RFC 3339 or a date (midnight UTC).
func parseWhen(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor YYYY-MM-DD", s)
	}
	return t, nil
}

func writeUsage(w io.Writer, rep *usage.Report) error {
	key := strings.ToUpper(string(rep.GroupBy))
	if key == "" {
		key = "KEY"
	}
	priced := rep.Currency != "" || rep.Total.Amount != 0
	header := []string{key, "CPU-CORE-HOURS", "MEMORY-GIB-HOURS", "GPU-HOURS"}
	if priced {
		header = append(header, "AMOUNT")
	}
	t := newTable(w, header...)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	gpus := func(m map[string]float64) string {
		if len(m) == 0 {
			return "0"
		}
		var parts []string
		for _, k := range sortedKeys(m) {
			parts = append(parts, orNone(k)+"="+f(m[k]))
		}
		return strings.Join(parts, ",")
	}
	row := func(name string, r usage.Row) {
		cells := []string{name, f(r.CPUCoreHours), f(r.MemoryGiBHours), gpus(r.GPUHours)}
		if priced {
			cells = append(cells, strings.TrimSpace(f(r.Amount)+" "+rep.Currency))
		}
		t.row(cells...)
	}
	for _, r := range rep.Rows {
		row(orNone(oneLine(r.Key)), r)
	}
	row("TOTAL", rep.Total)
	if err := t.flush(); err != nil {
		return err
	}
	if len(rep.Unpriced) > 0 {
		fmt.Fprintf(w, "not priced (counted as 0): %s\n", strings.Join(rep.Unpriced, ", "))
	}
	return nil
}
