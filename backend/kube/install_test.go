package kube_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend/kube"
	v1 "github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/dlctest/kubetest"
)

const stamp = "2026-12-02T10:11:12.123456789Z"

func raw(t *testing.T, v any) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

func jobBody(t *testing.T) v1.JobConfigBody {
	return v1.JobConfigBody{
		Name:       "训练 job",
		OnDemand:   &v1.OnDemand{ResourcePackage: "pkg", ResourceGroup: "rg", Priority: new(int32(7))},
		Package:    raw(t, map[string]string{"cos": "cos://b-1250000000/a.zip"}),
		Entrypoint: "python main.py",
		RuntimeEnv: raw(t, map[string]any{"pip": []string{"torch>=2.0"}}),
	}
}

// kindCase is one of dlc's kinds: a valid object, a change of its status,
// and changes the API server must refuse.
type kindCase struct {
	kind     string
	obj      func() client.Object
	status   func(client.Object) // a valid status change
	readBack func(t *testing.T, got client.Object)
	invalid  map[string]func(client.Object) // by name; applied to spec or status
	// columns are the printer columns that kubectl get shows by default,
	// in order after NAME, each with its JSONPath (Age, last, is
	// metadata.creationTimestamp); wide are those of -o wide alone.
	columns, wide [][2]string
	// shortName is what kubectl get takes for the kind's plural.
	shortName string
}

func kindCases(t *testing.T) []kindCase {
	env := v1.Environment{
		Image:        "ray:2.9",
		HeadGroup:    raw(t, map[string]any{"name": "head", "nodeSpec": "CU4", "resources": map[string]float64{"x": 0.5}}),
		WorkerGroups: []runtime.RawExtension{raw(t, map[string]any{"name": "w", "instances": map[string]int{"min": 1, "max": 3}})},
	}
	return []kindCase{{
		kind: "ComputeCluster",
		obj: func() client.Object {
			return &v1.ComputeCluster{Spec: v1.ComputeClusterSpec{
				Name: "集群一", Priority: new(int32(5)), ResourcePackage: "pkg", ResourceGroup: "rg",
				Environment: env, Bookkeeping: v1.Bookkeeping{Creator: "alice", CreatedAt: stamp},
			}}
		},
		status: func(o client.Object) {
			c := o.(*v1.ComputeCluster)
			c.Status.State, c.Status.Reason, c.Status.Generation = "starting", "waiting for the head", 2
			c.Status.Events = []v1.Event{{Time: stamp, Source: v1.EventSourceUser, Actor: "alice", Action: "start"}}
		},
		readBack: func(t *testing.T, got client.Object) {
			c := got.(*v1.ComputeCluster)
			var head map[string]any
			if err := json.Unmarshal(c.Spec.HeadGroup.Raw, &head); err != nil || head["resources"].(map[string]any)["x"] != 0.5 {
				t.Errorf("headGroup read back as %s (%v): raw fields must be kept", c.Spec.HeadGroup.Raw, err)
			}
			if c.Spec.CreatedAt != stamp {
				t.Errorf("createdAt = %q, want %q", c.Spec.CreatedAt, stamp)
			}
		},
		invalid: map[string]func(client.Object){
			"state not in the enum": func(o client.Object) { o.(*v1.ComputeCluster).Status.State = "exploded" },
			"priority 0":            func(o client.Object) { o.(*v1.ComputeCluster).Spec.Priority = new(int32(0)) },
			"priority 10":           func(o client.Object) { o.(*v1.ComputeCluster).Spec.Priority = new(int32(10)) },
			"negative idle timeout": func(o client.Object) { o.(*v1.ComputeCluster).Spec.IdleTimeoutSeconds = -1 },
			"name too long":         func(o client.Object) { o.(*v1.ComputeCluster).Spec.Name = string(make([]rune, 65)) },
			"event source": func(o client.Object) {
				o.(*v1.ComputeCluster).Status.Events = []v1.Event{{Time: stamp, Source: "nobody", Action: "x"}}
			},
		},
		columns: [][2]string{{"Display", ".spec.name"}, {"State", ".status.state"}, {"Reason", ".status.reason"},
			{"On-Demand-Run", ".spec.ownerRun"}},
		wide: [][2]string{{"Resource-Group", ".spec.resourceGroup"}, {"Generation", ".status.generation"},
			{"Idle-Timeout", ".spec.idleTimeoutSeconds"}, {"Running-Since", ".status.runningSince"}},
		shortName: "cc",
	}, {
		kind: "ClusterGroup",
		obj: func() client.Object {
			return &v1.ClusterGroup{Spec: v1.ClusterGroupSpec{Name: "组", Policy: "ordered-failover", Order: []string{"cls-b", "cls-a"}}}
		},
		status: func(o client.Object) { o.(*v1.ClusterGroup).Status.UpdatedAt = stamp },
		invalid: map[string]func(client.Object){
			"policy not in the enum": func(o client.Object) { o.(*v1.ClusterGroup).Spec.Policy = "round-robin" },
			"empty name":             func(o client.Object) { o.(*v1.ClusterGroup).Spec.Name = "" },
			"order id not an id":     func(o client.Object) { o.(*v1.ClusterGroup).Spec.Order = []string{"Cls_A"} },
			"order too long": func(o client.Object) {
				ids := make([]string, 65)
				for i := range ids {
					ids[i] = "cls-" + strconv.Itoa(i)
				}
				o.(*v1.ClusterGroup).Spec.Order = ids
			},
		},
		columns:   [][2]string{{"Display", ".spec.name"}, {"Policy", ".spec.policy"}},
		wide:      [][2]string{{"Order", ".spec.order"}},
		shortName: "cg",
	}, {
		kind: "ClusterTemplate",
		obj: func() client.Object {
			return &v1.ClusterTemplate{Spec: v1.ClusterTemplateSpec{Name: "t", Environment: env}}
		},
		status: func(o client.Object) { o.(*v1.ClusterTemplate).Status.UpdatedAt = stamp },
		invalid: map[string]func(client.Object){
			"updatedAt not a time": func(o client.Object) { o.(*v1.ClusterTemplate).Status.UpdatedAt = "yesterday" },
		},
		columns:   [][2]string{{"Display", ".spec.name"}, {"Image", ".spec.image"}},
		shortName: "ct",
	}, {
		kind: "JobConfig",
		obj: func() client.Object {
			return &v1.JobConfig{Spec: v1.JobConfigSpec{Config: jobBody(t), Revision: 1}}
		},
		status: func(o client.Object) {
			o.(*v1.JobConfig).Status.Events = []v1.Event{{Time: stamp, Source: v1.EventSourceSystem, Action: "edit"}}
		},
		invalid: map[string]func(client.Object){
			"priority 0":       func(o client.Object) { o.(*v1.JobConfig).Spec.Config.OnDemand.Priority = new(int32(0)) },
			"priority 10":      func(o client.Object) { o.(*v1.JobConfig).Spec.Config.OnDemand.Priority = new(int32(10)) },
			"two modes":        func(o client.Object) { o.(*v1.JobConfig).Spec.Config.Cluster = "c-1" },
			"backoff limit 11": func(o client.Object) { o.(*v1.JobConfig).Spec.Config.BackoffLimit = 11 },
			"concurrency policy not in the enum": func(o client.Object) {
				o.(*v1.JobConfig).Spec.Config.Schedule = &v1.Schedule{Cron: "* * * * *", ConcurrencyPolicy: "Sometimes"}
			},
			"schedule without an expression": func(o client.Object) { o.(*v1.JobConfig).Spec.Config.Schedule = &v1.Schedule{} },
		},
		columns: [][2]string{{"Display", ".spec.config.name"}, {"Revision", ".spec.revision"},
			{"Schedule", ".spec.config.schedule.cron"}, {"Next-Tick", ".status.scheduleStatus.nextTick"}},
		wide: [][2]string{{"Suspended", ".status.scheduleStatus.suspended"}, {"Cluster", ".spec.config.cluster"}, {"Group", ".spec.config.group"},
			{"Resource-Group", ".spec.config.onDemand.resourceGroup"}},
		shortName: "jc",
	}, {
		kind: "Run",
		obj: func() client.Object {
			return &v1.Run{Spec: v1.RunSpec{JobID: "j-1", Revision: 1, Config: jobBody(t), Priority: new(int32(7)),
				Demand: &v1.Resources{MilliCPU: 4000, Memory: 8 << 30}, SubmittedAt: stamp}}
		},
		status: func(o client.Object) {
			r := o.(*v1.Run)
			r.Status.State, r.Status.WaitReason = "waiting", "insufficient unused quota"
		},
		invalid: map[string]func(client.Object){
			"state not in the enum":       func(o client.Object) { o.(*v1.Run).Status.State = "paused" },
			"wait reason not in the enum": func(o client.Object) { o.(*v1.Run).Status.WaitReason = "bored" },
			"priority 0":                  func(o client.Object) { o.(*v1.Run).Spec.Priority = new(int32(0)) },
			"priority 10":                 func(o client.Object) { o.(*v1.Run).Spec.Priority = new(int32(10)) },
			"negative demand":             func(o client.Object) { o.(*v1.Run).Spec.Demand.GPU = -1 },
			"placement too long":          func(o client.Object) { o.(*v1.Run).Status.Placement = string(make([]byte, 257)) },
		},
		columns: [][2]string{{"Job", ".spec.config.name"}, {"State", ".status.state"}, {"Wait", ".status.waitReason"},
			{"Started", ".status.startedAt"}, {"Duration", ".status.summary.duration"}, {"Attempt", ".spec.attempt"}},
		wide: [][2]string{{"Job-ID", ".spec.jobID"}, {"Cluster", ".status.clusterID"}, {"Placement", ".status.placement"},
			{"Priority", ".spec.priority"}, {"Message", ".status.message"}},
		shortName: "jr",
	}, {
		kind: "ResourceGroup",
		obj: func() client.Object {
			return &v1.ResourceGroup{Spec: v1.ResourceGroupSpec{Package: "pkg",
				Capacity: v1.Resources{MilliCPU: 64000, Memory: 256 << 30, GPU: 8}}}
		},
		status: func(o client.Object) {
			g := o.(*v1.ResourceGroup)
			h := v1.Resources{MilliCPU: 8000, Memory: 16 << 30, GPU: 1}
			g.Status.Pending = map[string]v1.Hold{"c-1": v1.Hold("8000,17179869184,1,3,7," + stamp)}
			g.Status.Reserved, g.Status.Seq, g.Status.Settled = h, 7, "1234"
		},
		readBack: func(t *testing.T, got client.Object) {
			if h := got.(*v1.ResourceGroup).Status.Pending["c-1"]; h != v1.Hold("8000,17179869184,1,3,7,"+stamp) {
				t.Errorf("hold read back as %q", h)
			}
		},
		invalid: map[string]func(client.Object){
			"negative capacity": func(o client.Object) { o.(*v1.ResourceGroup).Spec.Capacity.MilliCPU = -1 },
			"hold without since": func(o client.Object) {
				o.(*v1.ResourceGroup).Status.Pending = map[string]v1.Hold{"c-2": "0,0,1,0,0"}
			},
			"negative hold": func(o client.Object) {
				o.(*v1.ResourceGroup).Status.Pending = map[string]v1.Hold{"c-2": v1.Hold("0,0,-1,0,0," + stamp)}
			},
			"hold with a zone": func(o client.Object) {
				o.(*v1.ResourceGroup).Status.Pending = map[string]v1.Hold{"c-2": "0,0,1,0,0,2026-12-05T06:00:00+08:00"}
			},
			"negative seq": func(o client.Object) { o.(*v1.ResourceGroup).Status.Seq = -1 },
		},
		columns: [][2]string{{"Package", ".spec.package"}, {"Cores", ".status.summary.cpu"}, {"Memory", ".status.summary.memory"},
			{"GPUs", ".status.summary.gpu"}},
		wide:      [][2]string{{"Pending", ".status.summary.pending"}},
		shortName: "rg",
	}}
}

// TestKinds creates each of dlc's kinds on a real API server, reads it back,
// changes its status through the status subresource, and checks that a
// write from a stale read is a conflict and that the schema is enforced.
func TestKinds(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	c := cp.Client()
	ns := cp.NewNamespace(t)
	for _, tc := range kindCases(t) {
		t.Run(tc.kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			obj := tc.obj()
			obj.SetNamespace(ns)
			obj.SetName("x-1")
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("create: %v", err)
			}
			got := tc.obj()
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
				t.Fatalf("get: %v", err)
			}
			stale := got.DeepCopyObject().(client.Object)

			tc.status(got)
			want := got.DeepCopyObject().(client.Object)
			if err := c.Status().Update(ctx, got); err != nil {
				t.Fatalf("status update: %v", err)
			}
			back := tc.obj()
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), back); err != nil {
				t.Fatalf("get after the status update: %v", err)
			}
			if a, b := statusJSON(t, want), statusJSON(t, back); a != b {
				t.Errorf("status read back as\n%s\nwant\n%s", b, a)
			}
			if tc.readBack != nil {
				tc.readBack(t, back)
			}

			// A write from the stale read is a conflict, on either part.
			tc.status(stale)
			if err := c.Status().Update(ctx, stale.DeepCopyObject().(client.Object)); !apierrors.IsConflict(err) {
				t.Errorf("status update from a stale read: got %v, want a conflict", err)
			}
			if err := c.Update(ctx, stale); !apierrors.IsConflict(err) {
				t.Errorf("update from a stale read: got %v, want a conflict", err)
			}

			for name, mutate := range tc.invalid {
				t.Run(name, func(t *testing.T) {
					cur := tc.obj()
					if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
						t.Fatal(err)
					}
					mutate(cur)
					errSpec := c.Update(ctx, cur.DeepCopyObject().(client.Object))
					errStatus := c.Status().Update(ctx, cur)
					// The change is in one part; the write of that part is refused,
					// the other part's write ignores it.
					if !apierrors.IsInvalid(errSpec) && !apierrors.IsInvalid(errStatus) {
						t.Errorf("got %v (update) and %v (status update), want one invalid", errSpec, errStatus)
					}
					fresh := tc.obj()
					mutate(fresh)
					fresh.SetNamespace(ns)
					fresh.SetName("invalid")
					if err := c.Create(ctx, fresh); err == nil {
						// Create drops status: a status-only change is allowed here.
						_ = c.Delete(ctx, fresh)
					} else if !apierrors.IsInvalid(err) {
						t.Errorf("create: got %v, want invalid or success", err)
					}
				})
			}
		})
	}
}

func statusJSON(t *testing.T, obj client.Object) string {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return string(m["status"])
}

// TestInstallCRDs installs the CRDs again over the ones the control plane
// has (an update), checks each is established and served, and that kubectl
// get shows the columns the kind promises.
func TestInstallCRDs(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 {
		if err := kube.InstallCRDs(ctx, cp.Config()); err != nil {
			t.Fatalf("InstallCRDs: %v", err)
		}
	}
	crds, err := kube.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != len(kindCases(t))+1 { // and StoreEntry, below
		t.Errorf("%d CRDs embedded, want %d", len(crds), len(kindCases(t))+1)
	}
	c, err := client.New(cp.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	byKind := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range crds {
		installed := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, installed); err != nil {
			t.Fatalf("get %s: %v", crd.Name, err)
		}
		byKind[installed.Spec.Names.Kind] = installed
	}
	t.Run("short names collide with no other resource", func(t *testing.T) {
		shortNamesAreOurs(t, cp.Config(), crds)
	})
	t.Run("StoreEntry", func(t *testing.T) {
		// The store's bookkeeping: namespaced, no status (only the backend
		// writes it, whole), its store kind as a column.
		crd := byKind["StoreEntry"]
		if crd == nil {
			t.Fatal("no CRD for StoreEntry")
		}
		if crd.Spec.Scope != apiextensionsv1.NamespaceScoped || crd.Spec.Group != v1.Group || len(crd.Spec.Versions) != 1 {
			t.Fatalf("scope %s, group %s, versions %d", crd.Spec.Scope, crd.Spec.Group, len(crd.Spec.Versions))
		}
		ver := crd.Spec.Versions[0]
		if ver.Subresources != nil && ver.Subresources.Status != nil {
			t.Errorf("a status subresource")
		}
		if len(ver.AdditionalPrinterColumns) == 0 || ver.AdditionalPrinterColumns[0].JSONPath != `.metadata.labels.store\.dlc\.aidlc\.io/kind` {
			t.Errorf("columns %+v, want the store kind first", ver.AdditionalPrinterColumns)
		}
	})
	for _, tc := range kindCases(t) {
		t.Run(tc.kind, func(t *testing.T) {
			crd := byKind[tc.kind]
			if crd == nil {
				t.Fatalf("no CRD for %s", tc.kind)
			}
			if crd.Spec.Scope != apiextensionsv1.NamespaceScoped || crd.Spec.Group != v1.Group {
				t.Errorf("scope %s, group %s", crd.Spec.Scope, crd.Spec.Group)
			}
			established := false
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				t.Errorf("not established: %+v", crd.Status.Conditions)
			}
			if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != v1.Version {
				t.Fatalf("versions %+v", crd.Spec.Versions)
			}
			ver := crd.Spec.Versions[0]
			if ver.Subresources == nil || ver.Subresources.Status == nil {
				t.Errorf("no status subresource")
			}
			// One NAME column (kubectl's own, the object's name): a display
			// name is Display. The default columns in order, then -o wide's.
			var got, gotWide [][2]string
			for _, col := range ver.AdditionalPrinterColumns {
				if strings.EqualFold(col.Name, "name") {
					t.Errorf("a printer column %q (%s) beside kubectl's own NAME", col.Name, col.JSONPath)
				}
				if col.Priority == 0 {
					got = append(got, [2]string{col.Name, col.JSONPath})
				} else {
					gotWide = append(gotWide, [2]string{col.Name, col.JSONPath})
				}
			}
			if want := append(slices.Clone(tc.columns), [2]string{"Age", ".metadata.creationTimestamp"}); !slices.Equal(got, want) {
				t.Errorf("printer columns\n%v\nwant\n%v", got, want)
			}
			if !slices.Equal(gotWide, tc.wide) {
				t.Errorf("-o wide printer columns\n%v\nwant\n%v", gotWide, tc.wide)
			}
			if names := crd.Spec.Names; !slices.Contains(names.ShortNames, tc.shortName) || !slices.Contains(names.Categories, "dlc") {
				t.Errorf("short names %v, categories %v; want %s and dlc", names.ShortNames, names.Categories, tc.shortName)
			}
		})
	}
}

// shortNamesAreOurs checks, by the API server's discovery, that no resource
// outside dlc's group (the built-in kinds, KubeRay's) is called by a short
// name, plural or singular name that is one of our short names, so that
// kubectl get cc (jr, rg, …) is never ambiguous; nor are two of ours.
func shortNamesAreOurs(t *testing.T, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	taken := map[string]string{} // a name kubectl resolves → the resource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || gv.Group == v1.Group {
			continue
		}
		for _, r := range l.APIResources {
			for _, n := range append([]string{r.Name, r.SingularName}, r.ShortNames...) {
				if n != "" && !strings.Contains(n, "/") {
					taken[n] = r.Name + "." + gv.Group
				}
			}
		}
	}
	for _, n := range []string{"cs", "rs", "rc", "pv", "sa", "svc", "ds", "deploy", "sts", "cm", "ep", "ev", "no", "ns", "po", "pc", "sc", "rayclusters"} {
		if _, ok := taken[n]; !ok {
			t.Fatalf("discovery found no resource called %q among %d names: not the built-in kinds and KubeRay's?", n, len(taken))
		}
	}
	ours := map[string]string{}
	for _, crd := range crds {
		if len(crd.Spec.Names.ShortNames) == 0 {
			t.Errorf("%s has no short name", crd.Name)
		}
		for _, n := range crd.Spec.Names.ShortNames {
			if other, ok := taken[n]; ok {
				t.Errorf("%s: short name %q is also %s", crd.Name, n, other)
			}
			if other, ok := ours[n]; ok {
				t.Errorf("%s: short name %q is also %s's", crd.Name, n, other)
			}
			ours[n] = crd.Name
		}
	}
}
