package usage

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func node(spec string, count int, cores, gib, gpu int64, gpuType string) Node {
	return Node{Group: "g", Role: "worker", NodeSpec: spec, GPUType: gpuType, Count: count,
		Each: quota.Resources{MilliCPU: cores * 1000, Memory: gib * quota.GiB, GPU: gpu}}
}

func records() []Record {
	return []Record{
		{ID: "a1", Attribution: Attribution{Cluster: "a", ResourceGroup: "rg-1", ResourcePackage: "pkg-1", Creator: "alice", Tags: map[string]string{"team": "x"}},
			Start: t0, End: t0.Add(2 * time.Hour), Nodes: []Node{node("cu.4c8g", 2, 4, 8, 0, "")}},
		{ID: "b1", Attribution: Attribution{Cluster: "b", ResourceGroup: "rg-2", ResourcePackage: "pkg-2", Creator: "bob", Tags: map[string]string{"team": "y"}, Temporary: true, JobConfig: "job-1", Run: "run-1"},
			Start: t0.Add(time.Hour), End: t0.Add(90 * time.Minute), Nodes: []Node{node("gu.8c32g.1xt4", 1, 8, 32, 1, "T4")}},
		{ID: "b2", Attribution: Attribution{Cluster: "b", ResourceGroup: "rg-2", ResourcePackage: "pkg-2", Creator: "bob"},
			Start: t0.Add(3 * time.Hour), End: t0.Add(4 * time.Hour), Open: true, Nodes: []Node{node("cu.4c8g", 1, 4, 8, 0, "")}},
	}
}

func TestAggregate(t *testing.T) {
	prices := &PriceList{Currency: "CNY", NodeHour: map[string]float64{"cu.4c8g": 1}, Packages: map[string]map[string]float64{"pkg-2": {"cu.4c8g": 3}}}
	for _, tc := range []struct {
		name      string
		q         Query
		rows      map[string][2]float64 // key → core-hours, amount
		total     float64
		gpu       float64
		unpriced  []string
		totalRecs int
	}{
		{name: "all, by resource group", q: Query{From: t0, To: t0.Add(5 * time.Hour), GroupBy: ByResourceGroup, Prices: prices},
			rows:  map[string][2]float64{"rg-1": {16, 4}, "rg-2": {8, 3}},
			total: 24, gpu: 0.5, unpriced: []string{"gu.8c32g.1xt4"}, totalRecs: 3},
		{name: "a window cuts records", q: Query{From: t0.Add(time.Hour), To: t0.Add(75 * time.Minute), GroupBy: ByCluster},
			rows: map[string][2]float64{"a": {2, 0}, "b": {2, 0}}, total: 4, gpu: 0.25, totalRecs: 2},
		{name: "by tag, untagged is empty", q: Query{From: t0, To: t0.Add(5 * time.Hour), GroupBy: TagKey("team")},
			rows: map[string][2]float64{"x": {16, 0}, "y": {4, 0}, "": {4, 0}}, total: 24, gpu: 0.5, totalRecs: 3},
		{name: "filtered by job", q: Query{From: t0, To: t0.Add(5 * time.Hour), GroupBy: ByJob, Filter: Filter{JobConfig: "job-1"}},
			rows: map[string][2]float64{"job-1": {4, 0}}, total: 4, gpu: 0.5, totalRecs: 1},
		{name: "filtered by tag", q: Query{From: t0, To: t0.Add(5 * time.Hour), Filter: Filter{Tags: map[string]string{"team": "x"}}},
			rows: map[string][2]float64{"": {16, 0}}, total: 16, totalRecs: 1},
		{name: "nothing in the window", q: Query{From: t0.Add(10 * time.Hour), To: t0.Add(11 * time.Hour)},
			rows: map[string][2]float64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Aggregate(records(), tc.q, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Rows) != len(tc.rows) {
				t.Fatalf("rows %+v, want %v", rep.Rows, tc.rows)
			}
			for _, r := range rep.Rows {
				w, ok := tc.rows[r.Key]
				if !ok || r.CPUCoreHours != w[0] || r.Amount != w[1] {
					t.Errorf("row %q: %v core-hours, amount %v; want %v", r.Key, r.CPUCoreHours, r.Amount, w)
				}
			}
			if rep.Total.CPUCoreHours != tc.total || rep.Total.GPUHours["T4"] != tc.gpu || rep.Total.Records != tc.totalRecs {
				t.Errorf("total %+v, want %v core-hours, %v T4-hours, %d records", rep.Total, tc.total, tc.gpu, tc.totalRecs)
			}
			if strings.Join(rep.Unpriced, ",") != strings.Join(tc.unpriced, ",") {
				t.Errorf("unpriced %v, want %v", rep.Unpriced, tc.unpriced)
			}
		})
	}
}

func TestAggregateAllow(t *testing.T) {
	rep, err := Aggregate(records(), Query{From: t0, To: t0.Add(5 * time.Hour)}, func(r Record) bool { return r.Creator == "bob" })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.CPUCoreHours != 8 || rep.Total.Records != 2 {
		t.Fatalf("total %+v, want bob's 8 core-hours in 2 records", rep.Total)
	}
}

func TestQueryValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		q     Query
		paths []string
	}{
		{"zero", Query{}, []string{"query.from"}},
		{"backwards, bad grouping, negative price", Query{From: t0, To: t0.Add(-time.Second), GroupBy: "team",
			Prices: &PriceList{NodeHour: map[string]float64{"cu.4c8g": -1}}}, []string{"query.to", "query.groupBy", "query.prices.nodeHour[cu.4c8g]"}},
		{"too long", Query{From: t0, To: t0.Add(MaxRange + time.Hour)}, []string{"query.to"}},
		{"empty tag key", Query{From: t0, To: t0.Add(time.Hour), GroupBy: TagKey("")}, []string{"query.groupBy"}},
		{"ok", Query{From: t0, To: t0.Add(time.Hour), GroupBy: TagKey("team")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.q.Validate()
			fields := errs.Fields(err)
			var got []string
			for _, f := range fields {
				got = append(got, string(f.Path))
				if f.Rule != "U1" {
					t.Errorf("%s: rule %s", f.Path, f.Rule)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.paths, " ") {
				t.Fatalf("paths %v, want %v (%v)", got, tc.paths, err)
			}
			if tc.paths != nil && !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("%v is not ErrInvalid", err)
			}
			if _, aerr := Aggregate(records(), tc.q, nil); (aerr == nil) != (tc.paths == nil) {
				t.Fatalf("Aggregate: %v", aerr)
			}
		})
	}
}

func TestReportCSVAndJSON(t *testing.T) {
	recs := records()
	recs[0].Tags = map[string]string{"team": "=HYPERLINK(\"x\")"}
	rep, err := Aggregate(recs, Query{From: t0, To: t0.Add(5 * time.Hour), GroupBy: TagKey("team"),
		Prices: &PriceList{Currency: "CNY", NodeHour: map[string]float64{"cu.4c8g": 1.5}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	want := `tag:team,cpu_core_hours,memory_gib_hours,node_hours:cu.4c8g,node_hours:gu.8c32g.1xt4,gpu_hours:T4,amount,currency,records
,4,8,1,0,0,1.5,CNY,1
"'=HYPERLINK(""x"")",16,32,4,0,0,6,CNY,1
y,4,16,0,0.5,0.5,0,CNY,1
total,24,56,5,0.5,0.5,7.5,CNY,3
`
	if b.String() != want {
		t.Fatalf("CSV:\n%s\nwant:\n%s", b.String(), want)
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Total.CPUCoreHours != 24 || len(back.Rows) != 3 || back.Currency != "CNY" || back.GroupBy != TagKey("team") {
		t.Fatalf("JSON round trip: %s", js)
	}
}

func TestSameNodes(t *testing.T) {
	a := []Node{node("cu.4c8g", 2, 4, 8, 0, ""), {Group: "h", Role: "head", NodeSpec: "cu.4c8g", Count: 1}}
	b := []Node{a[1], a[0]}
	if !SameNodes(a, b) || SameNodes(a, a[:1]) || SameNodes(a, []Node{a[0], node("cu.4c8g", 3, 4, 8, 0, "")}) {
		t.Fatal("SameNodes")
	}
}

// A platform's year: 1,300 nodes of 64 cores and 256 GiB for 365 days,
// summed without overflow; a price past MaxPrice, or not finite, is
// refused (an amount stays finite, so that the report encodes).
func TestAggregateLargeAndPrices(t *testing.T) {
	to := t0.Add(365 * 24 * time.Hour)
	var recs []Record
	for i := range 13 {
		recs = append(recs, Record{ID: "r", Attribution: Attribution{Cluster: string(rune('a' + i))}, Start: t0, End: to,
			Nodes: []Node{{Role: "worker", NodeSpec: "cu.64c256g", Count: 100, Each: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}}}})
	}
	rep, err := Aggregate(recs, Query{From: t0, To: to, Prices: &PriceList{NodeHour: map[string]float64{"cu.64c256g": MaxPrice}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1300.0 * 256 * 365 * 24; rep.Total.MemoryGiBHours != want {
		t.Errorf("memory GiB-hours %.0f, want %.0f", rep.Total.MemoryGiBHours, want)
	}
	if want := 1300.0 * 64 * 365 * 24; rep.Total.CPUCoreHours != want {
		t.Errorf("core-hours %.0f, want %.0f", rep.Total.CPUCoreHours, want)
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("the report does not encode: %v", err)
	}
	for _, p := range []float64{math.Inf(1), math.NaN(), MaxPrice * 10, -1} {
		if err := (Query{From: t0, To: to, Prices: &PriceList{NodeHour: map[string]float64{"cu.4c8g": p}}}).Validate(); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("price %v: %v, want refused", p, err)
		}
	}
}

// Compact adds a day's records once each, in the order they started;
// until the records added are deleted, a report counts them once (the
// compacted record says through which start it holds them).
func TestCompact(t *testing.T) {
	a := Attribution{Cluster: "c", ResourceGroup: "rg-1", Tags: map[string]string{"team": "x"}}
	r1 := Record{ID: "c.1", Attribution: a, Start: t0, End: t0.Add(time.Hour), Nodes: []Node{node("cu.4c8g", 2, 4, 8, 0, "")}}
	r2 := Record{ID: "c.2", Attribution: a, Start: t0.Add(time.Hour), End: t0.Add(3 * time.Hour), Nodes: []Node{node("cu.4c8g", 1, 4, 8, 0, ""), node("gu.8c32g.1xt4", 1, 8, 32, 1, "T4")}}
	id := CompactedID(r1)
	if id != CompactedID(r2) || id == CompactedID(Record{Attribution: Attribution{Cluster: "c"}, Start: t0}) || id == CompactedID(Record{Attribution: a, Start: t0.AddDate(0, 0, 1)}) {
		t.Fatalf("compacted ids: one per cluster, day and attribution: %s", id)
	}
	c := Compact(nil, id, r1)
	c = Compact(&c, id, r2)
	if again := Compact(&c, id, r1); !reflect.DeepEqual(again, c) {
		t.Fatalf("a record added twice: %+v", again)
	}
	if !c.Compacted || !c.Start.Equal(t0) || !c.End.Equal(t0.Add(3*time.Hour)) || !c.Through.Equal(r2.Start) || len(c.Nodes) != 2 {
		t.Fatalf("compacted %+v", c)
	}
	q := Query{From: t0, To: t0.Add(24 * time.Hour), GroupBy: TagKey("team")}
	want, err := Aggregate([]Record{r1, r2}, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, recs := range [][]Record{{c}, {c, r1}, {c, r1, r2}} { // added, not all deleted yet
		got, err := Aggregate(recs, q, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Total.CPUCoreHours != want.Total.CPUCoreHours || got.Total.GPUHours["T4"] != want.Total.GPUHours["T4"] || got.Rows[0].NodeHours["cu.4c8g"] != want.Rows[0].NodeHours["cu.4c8g"] {
			t.Errorf("%d records: %+v, want %+v", len(recs), got.Total, want.Total)
		}
	}
	// A span that cuts the compacted day counts it in proportion.
	half, err := Aggregate([]Record{c}, Query{From: t0, To: t0.Add(90 * time.Minute)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := half.Total.CPUCoreHours; math.Abs(got-want.Total.CPUCoreHours/2) > 1e-9 {
		t.Errorf("half the compacted span: %v core-hours, want %v", got, want.Total.CPUCoreHours/2)
	}
}
