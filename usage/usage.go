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
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
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
	// NodeMillis is, in a compacted record, the node-milliseconds these
	// nodes ran in all over the record's span (Count is then 0): a day's
	// intervals added up.
	NodeMillis int64 `json:"nodeMillis,omitempty"`
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
	// ClusterGroups are the cluster's groups (sorted): what a policy on
	// dlc:cluster_group decides by, when a report is read.
	ClusterGroups []string `json:"clusterGroups,omitempty"`
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
		slices.Equal(a.ClusterGroups, b.ClusterGroups) &&
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
	// Compacted marks the record of one cluster's day, for one
	// attribution: the records of that day that started up to Through
	// added up (Nodes' NodeMillis), from the earliest start to the latest
	// end. A report counts its part of a span in proportion.
	Compacted bool      `json:"compacted,omitempty"`
	Through   time.Time `json:"through,omitzero"`
}

// Day is the UTC day a record is compacted into: its start's.
func Day(start time.Time) string { return start.UTC().Format("20060102") }

// Month is the UTC month of a record's start, which a report lists the
// records of its span by.
func Month(start time.Time) string { return start.UTC().Format("200601") }

// Compact adds record r, a closed interval of the same cluster and
// attribution that started on into's day, to into (nil for the first):
// the compacted record that results. It adds nothing when into already
// holds r (r started no later than into.Through: records of a cluster
// never overlap, and are added in the order they started).
func Compact(into *Record, id string, r Record) Record {
	if into != nil && !r.Start.After(into.Through) {
		return *into
	}
	out := Record{ID: id, Attribution: r.Attribution, Start: r.Start, End: r.End, Compacted: true, Through: r.Start}
	byKind := map[Node]int{}
	if into != nil {
		out.Start, out.End = earlier(into.Start, r.Start), later(into.End, r.End)
		for _, n := range into.Nodes {
			byKind[kindOf(n)] = len(out.Nodes)
			out.Nodes = append(out.Nodes, n)
		}
	}
	ms := r.End.Sub(r.Start).Milliseconds()
	for _, n := range r.Nodes {
		add := n.NodeMillis
		if !r.Compacted {
			add = ms * int64(max(n.Count, 0))
		}
		k := kindOf(n)
		if i, ok := byKind[k]; ok {
			out.Nodes[i].NodeMillis += add
			continue
		}
		k.NodeMillis = add
		byKind[kindOf(n)] = len(out.Nodes)
		out.Nodes = append(out.Nodes, k)
	}
	out.Nodes = SortNodes(out.Nodes)
	return out
}

// CompactedID is the id of the compacted record r goes into: its
// cluster's, its day's and its attribution's.
func CompactedID(r Record) string {
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(r.Attribution) // maps encode in key order
	return r.Cluster + ".d" + Day(r.Start) + "." + hex.EncodeToString(h.Sum(nil)[:6])
}

// covered reports whether r was added to one of the compacted records
// (their Through by id), so that r, until it is deleted, is not counted
// twice.
func covered(compacted map[string]time.Time, r Record) bool {
	if r.Compacted || len(compacted) == 0 {
		return false
	}
	through, ok := compacted[CompactedID(r)]
	return ok && !r.Start.After(through)
}

// kindOf is n without its count: what a compacted record adds up by.
func kindOf(n Node) Node {
	n.Count, n.NodeMillis = 0, 0
	return n
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

// MaxPrice bounds a price per node-hour, so that an amount stays finite.
const MaxPrice = 1e9

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
				if !(v >= 0 && v <= MaxPrice) { // NaN fails both
					l = append(l, errs.Invalid(pp.Key(spec), "U1", v, fmt.Sprintf("a price is a number from 0 to %g", float64(MaxPrice))))
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

	// node-milliseconds by node spec, by what each node requests, and
	// GPU-milliseconds by GPU type: summed exactly (node-milliseconds stay
	// far from int64's bounds) before they are turned into hours.
	nodeMS map[string]int64
	eachMS map[quota.Resources]int64
	gpuMS  map[string]int64
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
	compacted := map[string]time.Time{}
	for _, r := range records {
		if r.Compacted {
			compacted[r.ID] = r.Through
		}
	}
	for _, r := range records {
		start, end := later(r.Start, q.From), earlier(r.End, q.To)
		if !start.Before(end) || covered(compacted, r) || !q.Filter.Matches(r.Attribution) || (allow != nil && !allow(r)) {
			continue
		}
		ms := end.Sub(start).Milliseconds()
		// A compacted record counts its part of the span in proportion.
		part := 1.0
		if span := r.End.Sub(r.Start).Milliseconds(); r.Compacted && span > 0 && ms < span {
			part = float64(ms) / float64(span)
		}
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
				nms := ms * int64(n.Count)
				if r.Compacted {
					nms = int64(math.Round(float64(n.NodeMillis) * part))
				}
				if nms <= 0 {
					continue
				}
				target.nodeMS[n.NodeSpec] += nms
				target.eachMS[n.Each] += nms
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
	return Row{Key: key, NodeHours: map[string]float64{}, nodeMS: map[string]int64{}, eachMS: map[quota.Resources]int64{}, gpuMS: map[string]int64{}}
}

// hours turns the exact sums into hours.
func (r *Row) hours() {
	for spec, ms := range r.nodeMS {
		r.NodeHours[spec] = float64(ms) / msPerHour
	}
	r.CPUCoreHours, r.MemoryGiBHours = 0, 0
	eaches := slices.SortedFunc(maps.Keys(r.eachMS), func(a, b quota.Resources) int {
		return cmp.Or(cmp.Compare(a.MilliCPU, b.MilliCPU), cmp.Compare(a.Memory, b.Memory), cmp.Compare(a.GPU, b.GPU))
	})
	for _, each := range eaches { // in one order, so that the sum is the same every time
		ms := r.eachMS[each]
		r.CPUCoreHours += float64(ms) * float64(each.MilliCPU) / 1000 / msPerHour
		r.MemoryGiBHours += float64(ms) * float64(each.Memory) / float64(quota.GiB) / msPerHour
	}
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
	header := []string{csvSafe(key), "cpu_core_hours", "memory_gib_hours"}
	for _, s := range specList {
		header = append(header, csvSafe("node_hours:"+s))
	}
	for _, g := range gpuList {
		header = append(header, csvSafe("gpu_hours:"+g))
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
