// Package usage is what the platform meters: the intervals in which a
// cluster's compute ran (Record), whom each is billed to (Attribution),
// and the reports made of them (Query, Report): node-spec hours, CPU
// core-hours, memory GiB-hours and GPU-hours by GPU type, grouped by
// resource group, resource package, creator, cluster, job config or a tag,
// and turned into amounts by a PriceList. Reports are written as JSON or
// CSV.
//
// The client records the intervals (dlc.Client.Usage reads them): one
// Record per stretch of time in which a cluster ran the same nodes for
// the same attribution, from what Ray runs (the pods Ray reports
// running), not from what the cluster reserves. A hibernated, deleted or
// never started cluster accrues nothing. This package holds the values
// and the arithmetic only; it does no I/O.
package usage

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// Node is one kind of node that ran through an interval: Count nodes of
// one node spec in one node group, each requesting Each.
type Node struct {
	Group    string          `json:"group"`
	Role     string          `json:"role"` // "head" or "worker"
	NodeSpec string          `json:"nodeSpec"`
	GPUType  string          `json:"gpuType,omitempty"`
	Count    int             `json:"count"`
	Each     quota.Resources `json:"each"`
}

// Attribution says whom an interval is billed to: the cluster as it was
// while the interval ran.
type Attribution struct {
	Cluster         string            `json:"cluster"`
	ClusterName     string            `json:"clusterName,omitempty"`
	ResourceGroup   string            `json:"resourceGroup,omitempty"`
	ResourcePackage string            `json:"resourcePackage,omitempty"`
	Creator         string            `json:"creator,omitempty"`
	Tags            map[string]string `json:"tags,omitempty"`
	// Temporary marks an on-demand cluster, with the job config and the
	// run it ran for.
	Temporary bool   `json:"temporary,omitempty"`
	JobConfig string `json:"jobConfig,omitempty"`
	Run       string `json:"run,omitempty"`
}

// Equal reports whether a and b bill to the same.
func (a Attribution) Equal(b Attribution) bool {
	return a.Cluster == b.Cluster && a.ClusterName == b.ClusterName && a.ResourceGroup == b.ResourceGroup &&
		a.ResourcePackage == b.ResourcePackage && a.Creator == b.Creator && maps.Equal(a.Tags, b.Tags) &&
		a.Temporary == b.Temporary && a.JobConfig == b.JobConfig && a.Run == b.Run
}

// Record is one interval [Start, End) in which a cluster ran Nodes for
// Attribution. An open record is the cluster's current interval, known to
// have run until End (the last time the platform looked); a closed one
// never changes again.
type Record struct {
	ID string `json:"id"`
	Attribution
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Open  bool      `json:"open,omitempty"`
	Nodes []Node    `json:"nodes,omitempty"`
}

// SameNodes reports whether two node lists describe the same nodes,
// whatever their order.
func SameNodes(a, b []Node) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = SortNodes(a), SortNodes(b)
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// SortNodes returns a copy of nodes in a fixed order (role, group, node
// spec).
func SortNodes(nodes []Node) []Node {
	out := slices.Clone(nodes)
	slices.SortFunc(out, func(x, y Node) int {
		return cmp.Or(cmp.Compare(x.Role, y.Role), cmp.Compare(x.Group, y.Group), cmp.Compare(x.NodeSpec, y.NodeSpec),
			cmp.Compare(x.GPUType, y.GPUType), cmp.Compare(x.Count, y.Count))
	})
	return out
}

// GroupBy is what a report's rows are per.
type GroupBy string

// The groupings of a report; a tag's is TagKey(key).
const (
	ByResourceGroup   GroupBy = "resourceGroup"
	ByResourcePackage GroupBy = "resourcePackage"
	ByCreator         GroupBy = "creator"
	ByCluster         GroupBy = "cluster"
	ByJob             GroupBy = "job"
	tagPrefix                 = "tag:"
)

// TagKey groups a report by the value of the tag key: the rows are per
// value, with "" for what has no such tag.
func TagKey(key string) GroupBy { return GroupBy(tagPrefix + key) }

// valid reports whether g is a grouping a report knows.
func (g GroupBy) valid() bool {
	switch g {
	case "", ByResourceGroup, ByResourcePackage, ByCreator, ByCluster, ByJob:
		return true
	}
	key, ok := strings.CutPrefix(string(g), tagPrefix)
	return ok && key != "" && len(key) <= 128
}

// key returns the row key of a for grouping g ("" groups everything).
func (g GroupBy) key(a Attribution) string {
	switch g {
	case ByResourceGroup:
		return a.ResourceGroup
	case ByResourcePackage:
		return a.ResourcePackage
	case ByCreator:
		return a.Creator
	case ByCluster:
		return a.Cluster
	case ByJob:
		return a.JobConfig
	case "":
		return ""
	}
	return a.Tags[strings.TrimPrefix(string(g), tagPrefix)]
}

// Filter selects the records a report counts: each field set must match
// (Tags: every pair).
type Filter struct {
	ResourceGroup   string            `json:"resourceGroup,omitempty"`
	ResourcePackage string            `json:"resourcePackage,omitempty"`
	Creator         string            `json:"creator,omitempty"`
	Cluster         string            `json:"cluster,omitempty"`
	JobConfig       string            `json:"jobConfig,omitempty"`
	Tags            map[string]string `json:"tags,omitempty"`
}

// Matches reports whether f selects a.
func (f Filter) Matches(a Attribution) bool {
	eq := func(want, got string) bool { return want == "" || want == got }
	if !eq(f.ResourceGroup, a.ResourceGroup) || !eq(f.ResourcePackage, a.ResourcePackage) || !eq(f.Creator, a.Creator) ||
		!eq(f.Cluster, a.Cluster) || !eq(f.JobConfig, a.JobConfig) {
		return false
	}
	for k, v := range f.Tags {
		if got, ok := a.Tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// PriceList turns usage into amounts: a price per node-spec hour, and
// per resource package a price list of its own that replaces the default
// for the specs it names. A node spec priced nowhere costs nothing, and
// the report names it (Report.Unpriced).
type PriceList struct {
	Currency string             `json:"currency,omitempty"`
	NodeHour map[string]float64 `json:"nodeHour,omitempty"`
	// Packages are prices per resource package, by node spec.
	Packages map[string]map[string]float64 `json:"packages,omitempty"`
}

// price returns the hourly price of a node of spec in package pkg.
func (p *PriceList) price(pkg, spec string) (float64, bool) {
	if p == nil {
		return 0, false
	}
	if v, ok := p.Packages[pkg][spec]; ok {
		return v, true
	}
	v, ok := p.NodeHour[spec]
	return v, ok
}

// Query asks for a report of what ran in [From, To): records are
// counted for the part of them inside it.
type Query struct {
	From    time.Time  `json:"from"`
	To      time.Time  `json:"to"`
	GroupBy GroupBy    `json:"groupBy,omitempty"`
	Filter  Filter     `json:"filter,omitzero"`
	Prices  *PriceList `json:"prices,omitempty"`
}

// MaxRange bounds a query's [From, To): a report reads every record in
// it.
const MaxRange = 400 * 24 * time.Hour

// Validate reports every problem of the query at once (rule U1).
func (q Query) Validate() error {
	var l errs.List
	p := errs.Path("query")
	switch {
	case q.From.IsZero() || q.To.IsZero():
		l = append(l, errs.Required(p.Child("from"), "U1", "a report needs from and to"))
	case !q.From.Before(q.To):
		l = append(l, errs.Invalid(p.Child("to"), "U1", q.To, "must be after from"))
	case q.To.Sub(q.From) > MaxRange:
		l = append(l, errs.Invalid(p.Child("to"), "U1", q.To, fmt.Sprintf("a report spans at most %s", MaxRange)))
	}
	if !q.GroupBy.valid() {
		l = append(l, errs.Invalid(p.Child("groupBy"), "U1", string(q.GroupBy),
			"must be resourceGroup, resourcePackage, creator, cluster, job or tag:<key>"))
	}
	if q.Prices != nil {
		check := func(pp errs.Path, m map[string]float64) {
			for spec, v := range m {
				if v < 0 || v != v {
					l = append(l, errs.Invalid(pp.Key(spec), "U1", v, "a price must not be negative"))
				}
			}
		}
		check(p.Child("prices").Child("nodeHour"), q.Prices.NodeHour)
		for pkg, m := range q.Prices.Packages {
			check(p.Child("prices").Child("packages").Key(pkg), m)
		}
	}
	return l.ToError()
}

// Row is the usage of one group of a report.
type Row struct {
	// Key is the group's value (a resource group's id, a creator, a tag's
	// value, …); "" in a report not grouped, or for what has none.
	Key string `json:"key"`
	// NodeHours are node-hours by node spec.
	NodeHours map[string]float64 `json:"nodeHours"`
	// CPUCoreHours, MemoryGiBHours are what the nodes requested, by the
	// hour.
	CPUCoreHours   float64 `json:"cpuCoreHours"`
	MemoryGiBHours float64 `json:"memoryGiBHours"`
	// GPUHours are GPU-hours by GPU type.
	GPUHours map[string]float64 `json:"gpuHours,omitempty"`
	// Amount is what the row costs by the query's price list.
	Amount float64 `json:"amount,omitempty"`
	// Records is how many records the row counts.
	Records int `json:"records"`

	// node-milliseconds and the like, summed exactly before they are
	// turned into hours.
	nodeMS            map[string]int64
	milliCPUMS, memMS int64 // milli-core·ms, MiB·ms
	gpuMS             map[string]int64
}

// Report is what a Query returns.
type Report struct {
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	GroupBy  GroupBy   `json:"groupBy,omitempty"`
	Currency string    `json:"currency,omitempty"`
	Rows     []Row     `json:"rows"`
	Total    Row       `json:"total"`
	// Unpriced are the node specs that ran and that the price list does
	// not price (they cost nothing in Amount).
	Unpriced []string `json:"unpriced,omitempty"`
}

const msPerHour = float64(time.Hour / time.Millisecond)

// Aggregate makes q's report of records: each record counted for its
// part inside [q.From, q.To) (an open one up to its End), selected by
// q.Filter and by allow (nil allows all), grouped by q.GroupBy. Rows are
// by key.
func Aggregate(records []Record, q Query, allow func(Record) bool) (*Report, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{From: q.From, To: q.To, GroupBy: q.GroupBy, Total: newRow("")}
	if q.Prices != nil {
		rep.Currency = q.Prices.Currency
	}
	rows := map[string]*Row{}
	unpriced := map[string]bool{}
	for _, r := range records {
		start, end := later(r.Start, q.From), earlier(r.End, q.To)
		if !start.Before(end) || !q.Filter.Matches(r.Attribution) || (allow != nil && !allow(r)) {
			continue
		}
		ms := end.Sub(start).Milliseconds()
		key := q.GroupBy.key(r.Attribution)
		row := rows[key]
		if row == nil {
			nr := newRow(key)
			row = &nr
			rows[key] = row
		}
		for _, target := range []*Row{row, &rep.Total} {
			target.Records++
			for _, n := range r.Nodes {
				if n.Count <= 0 {
					continue
				}
				nms := ms * int64(n.Count)
				target.nodeMS[n.NodeSpec] += nms
				target.milliCPUMS += nms * n.Each.MilliCPU
				target.memMS += nms * (n.Each.Memory / (quota.GiB / 1024))
				if n.Each.GPU > 0 {
					target.gpuMS[n.GPUType] += nms * n.Each.GPU
				}
				if q.Prices != nil {
					if p, ok := q.Prices.price(r.ResourcePackage, n.NodeSpec); ok {
						target.Amount += p * float64(nms) / msPerHour
					} else {
						unpriced[n.NodeSpec] = true
					}
				}
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(rows)) {
		rows[key].hours()
		rep.Rows = append(rep.Rows, *rows[key])
	}
	rep.Total.hours()
	if rep.Rows == nil {
		rep.Rows = []Row{}
	}
	rep.Unpriced = slices.Sorted(maps.Keys(unpriced))
	return rep, nil
}

func newRow(key string) Row {
	return Row{Key: key, NodeHours: map[string]float64{}, nodeMS: map[string]int64{}, gpuMS: map[string]int64{}}
}

// hours turns the exact sums into hours.
func (r *Row) hours() {
	for spec, ms := range r.nodeMS {
		r.NodeHours[spec] = float64(ms) / msPerHour
	}
	r.CPUCoreHours = float64(r.milliCPUMS) / 1000 / msPerHour
	r.MemoryGiBHours = float64(r.memMS) / 1024 / msPerHour
	if len(r.gpuMS) > 0 {
		r.GPUHours = map[string]float64{}
		for t, ms := range r.gpuMS {
			r.GPUHours[t] = float64(ms) / msPerHour
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// WriteCSV writes the report as CSV: a header, one line per row and a
// last line "total". Node-spec and GPU-type columns are those that
// appear in any row, sorted.
func (r *Report) WriteCSV(w io.Writer) error {
	specs, gpus := map[string]bool{}, map[string]bool{}
	for _, row := range append(slices.Clone(r.Rows), r.Total) {
		for s := range row.NodeHours {
			specs[s] = true
		}
		for g := range row.GPUHours {
			gpus[g] = true
		}
	}
	specList, gpuList := slices.Sorted(maps.Keys(specs)), slices.Sorted(maps.Keys(gpus))
	key := string(r.GroupBy)
	if key == "" {
		key = "key"
	}
	header := []string{key, "cpu_core_hours", "memory_gib_hours"}
	for _, s := range specList {
		header = append(header, "node_hours:"+s)
	}
	for _, g := range gpuList {
		header = append(header, "gpu_hours:"+g)
	}
	header = append(header, "amount", "currency", "records")
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	line := func(name string, row Row) []string {
		out := []string{csvSafe(name), f(row.CPUCoreHours), f(row.MemoryGiBHours)}
		for _, s := range specList {
			out = append(out, f(row.NodeHours[s]))
		}
		for _, g := range gpuList {
			out = append(out, f(row.GPUHours[g]))
		}
		return append(out, f(row.Amount), r.Currency, strconv.Itoa(row.Records))
	}
	for _, row := range r.Rows {
		if err := cw.Write(line(row.Key, row)); err != nil {
			return err
		}
	}
	if err := cw.Write(line("total", r.Total)); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// csvSafe keeps a value a spreadsheet would read as a formula (a tag's
// value is a user's) from being one.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
