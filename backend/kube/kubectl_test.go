package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// table is what the API server answers kubectl get: the columns' values by
// row (the object's name) and column name.
type table struct {
	columns []string
	rows    map[string]map[string]any
}

// getTable asks the API server for the table of a resource of dlc's group
// in namespace ns, as kubectl get does, with a label selector (or "").
func getTable(t *testing.T, cfg *rest.Config, ns, plural, selector string) table {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := fmt.Sprintf("%s/apis/%s/%s/namespaces/%s/%s", strings.TrimSuffix(cfg.Host, "/"), v1alpha1.Group, v1alpha1.Version, ns, plural)
	if selector != "" {
		u += "?labelSelector=" + url.QueryEscape(selector)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s %v", u, resp.Status, body, err)
	}
	var tb metav1.Table
	if err := json.Unmarshal(body, &tb); err != nil {
		t.Fatalf("not a Table: %v\n%s", err, body)
	}
	out := table{rows: map[string]map[string]any{}}
	for _, c := range tb.ColumnDefinitions {
		out.columns = append(out.columns, c.Name)
	}
	for _, r := range tb.Rows {
		row := map[string]any{}
		for i, c := range r.Cells {
			row[out.columns[i]] = c
		}
		out.rows[fmt.Sprint(r.Cells[0])] = row
	}
	return out
}

// TestKubectlTables writes each kind through the store and reads it back
// as kubectl get does (a Table from the API server): one NAME column with
// the display name beside it, the job's name and a finished run's duration
// on runs, capacities in cores and binary units, and on-demand clusters
// told from standing ones by a label.
func TestKubectlTables(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	s, err := kube.NewStore(t.Context(), cp.Config(), ns, kube.StoreOptions{NoEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// put creates a document and writes it again, as the platform's first
	// step does, so that its status subresource is written.
	put := func(kind, id string, v any) {
		t.Helper()
		d := backend.Doc{Kind: kind, ID: id, Data: mustJSON(t, v)}
		ver, err := s.Create(ctx, d)
		if err != nil {
			t.Fatalf("Create %s/%s: %v", kind, id, err)
		}
		d.Version = ver
		if _, err := s.Update(ctx, d); err != nil {
			t.Fatalf("Update %s/%s: %v", kind, id, err)
		}
	}

	cases := storeCases()
	standing := cases[0].v2.(*cluster.Cluster)
	put("cluster", standing.ID, standing)
	od := standing.DeepCopy()
	od.ID, od.Spec.Name, od.Temporary, od.OwnerRun = "od-run-1", "train_od", true, "run-1"
	put("cluster", od.ID, od)

	run := *cases[4].v2.(*job.Run)
	run.State, run.RayDone = job.Succeeded, true
	run.StartedAt = t0.Add(time.Minute)
	run.FinishedAt = run.StartedAt.Add(3*time.Minute + 12*time.Second)
	run.Attempt = 2
	put("run", run.ID, &run)
	sched := cases[3].v2.(*job.Record) // scheduled (L1)
	put("job", sched.ID, sched)
	queued := *cases[4].v.(*job.Run)
	queued.ID = "run-2"
	put("run", queued.ID, &queued)

	used := cases[5].v2.(*quota.Account) // 4 cores and 16 GiB held of 64, 256 GiB and 8 GPUs
	put("resourcegroup", used.ID, used)
	// A resource group just registered: its summary is written at once.
	fresh := &quota.Account{Group: quota.Group{ID: "rg-new", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 500, Memory: 512 << 20, GPU: 1}}}
	if _, err := s.Create(ctx, backend.Doc{Kind: "resourcegroup", ID: fresh.ID, Data: mustJSON(t, fresh)}); err != nil {
		t.Fatal(err)
	}

	cfg := cp.Config()
	for _, tc := range []struct {
		plural, selector string
		want             map[string]map[string]any // row → column → cell; nil: no cell
	}{{
		plural: "computeclusters",
		want: map[string]map[string]any{
			standing.ID: {"Display": "集群 二", "State": "running", "On-Demand-Run": nil, "Resource-Group": "rg-1"},
			od.ID:       {"Display": "train_od", "State": "running", "On-Demand-Run": "run-1"},
		},
	}, {
		plural: "computeclusters", selector: v1alpha1.LabelOnDemand + "=true",
		want: map[string]map[string]any{od.ID: {"On-Demand-Run": "run-1"}},
	}, {
		plural: "computeclusters", selector: v1alpha1.LabelOnDemand + "=false",
		want: map[string]map[string]any{standing.ID: {"On-Demand-Run": nil}},
	}, {
		plural: "runs",
		want: map[string]map[string]any{
			run.ID:    {"Job": "训练 resnet", "State": "succeeded", "Duration": "3m12s", "Job-ID": "job-1", "Cluster": "cls-od-1", "Attempt": float64(2)},
			queued.ID: {"Job": "训练 resnet", "State": "waiting", "Wait": "insufficient unused quota", "Started": nil, "Duration": nil, "Attempt": nil},
		},
	}, {
		plural: "jobconfigs",
		want:   map[string]map[string]any{sched.ID: {"Schedule": "0 2 * * *", "Suspended": true}},
	}, {
		plural: "resourcegroups",
		want: map[string]map[string]any{
			used.ID:  {"Package": "pkg-1", "Cores": "4/64", "Memory": "16Gi/256Gi", "GPUs": "0/8", "Pending": float64(1)},
			fresh.ID: {"Cores": "0/0.5", "Memory": "0Mi/512Mi", "GPUs": "0/1", "Pending": float64(0)},
		},
	}} {
		t.Run(tc.plural+" "+tc.selector, func(t *testing.T) {
			tb := getTable(t, cfg, ns, tc.plural, tc.selector)
			t.Logf("columns %v, rows %v", tb.columns, tb.rows)
			names := 0
			for _, c := range tb.columns {
				if strings.EqualFold(c, "name") {
					names++
				}
			}
			if names != 1 {
				t.Errorf("columns %v: %d named Name, want 1", tb.columns, names)
			}
			if len(tb.rows) != len(tc.want) {
				t.Errorf("rows %v, want %d", tb.rows, len(tc.want))
			}
			for name, cells := range tc.want {
				row, ok := tb.rows[name]
				if !ok {
					t.Errorf("no row %s in %v", name, tb.rows)
					continue
				}
				for col, want := range cells {
					if got := row[col]; got != want {
						t.Errorf("%s: %s = %#v, want %#v (row %v)", name, col, got, want, row)
					}
				}
			}
		})
	}
	if tb := getTable(t, cfg, ns, "jobconfigs", ""); tb.rows[sched.ID]["Next-Tick"] == nil {
		t.Errorf("a scheduled config has no Next-Tick cell: %v", tb.rows[sched.ID])
	}
	// A finished run's Started column is its start's age.
	if tb := getTable(t, cfg, ns, "runs", ""); tb.rows[run.ID]["Started"] == nil {
		t.Errorf("a finished run has no Started cell: %v", tb.rows[run.ID])
	}

	// What the store derives for kubectl never reaches the domain, and a
	// new resource group carries no initial-status annotation.
	for _, k := range []struct{ kind, id string }{{"resourcegroup", used.ID}, {"resourcegroup", fresh.ID}, {"run", run.ID}} {
		d, err := s.Get(ctx, k.kind, k.id)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(d.Data), `"summary"`) {
			t.Errorf("%s/%s reads with the summary: %s", k.kind, k.id, d.Data)
		}
	}
	var rg v1alpha1.ResourceGroup
	if err := cp.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: fresh.ID}, &rg); err != nil {
		t.Fatal(err)
	}
	if _, ok := rg.Annotations[kube.StoreKeyInitialStatus]; ok {
		t.Errorf("a new resource group has the initial-status annotation: %v", rg.Annotations)
	}
}
