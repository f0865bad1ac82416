package kube_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
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
	columns  []string                       // printer columns that must exist
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
			"name too long":         func(o client.Object) { o.(*v1.ComputeCluster).Spec.Name = string(make([]rune, 65)) },
			"event source": func(o client.Object) {
				o.(*v1.ComputeCluster).Status.Events = []v1.Event{{Time: stamp, Source: "nobody", Action: "x"}}
			},
		},
		columns: []string{"State", "Reason"},
	}, {
		kind: "ClusterGroup",
		obj: func() client.Object {
			return &v1.ClusterGroup{Spec: v1.ClusterGroupSpec{Name: "组", Policy: "random"}}
		},
		status: func(o client.Object) { o.(*v1.ClusterGroup).Status.UpdatedAt = stamp },
		invalid: map[string]func(client.Object){
			"policy not in the enum": func(o client.Object) { o.(*v1.ClusterGroup).Spec.Policy = "round-robin" },
			"empty name":             func(o client.Object) { o.(*v1.ClusterGroup).Spec.Name = "" },
		},
		columns: []string{"Name", "Policy"},
	}, {
		kind: "ClusterTemplate",
		obj: func() client.Object {
			return &v1.ClusterTemplate{Spec: v1.ClusterTemplateSpec{Name: "t", Environment: env}}
		},
		status: func(o client.Object) { o.(*v1.ClusterTemplate).Status.UpdatedAt = stamp },
		invalid: map[string]func(client.Object){
			"updatedAt not a time": func(o client.Object) { o.(*v1.ClusterTemplate).Status.UpdatedAt = "yesterday" },
		},
		columns: []string{"Name", "Image"},
	}, {
		kind: "JobConfig",
		obj: func() client.Object {
			return &v1.JobConfig{Spec: v1.JobConfigSpec{Config: jobBody(t), Revision: 1}}
		},
		status: func(o client.Object) {
			o.(*v1.JobConfig).Status.Events = []v1.Event{{Time: stamp, Source: v1.EventSourceSystem, Action: "edit"}}
		},
		invalid: map[string]func(client.Object){
			"priority 0":  func(o client.Object) { o.(*v1.JobConfig).Spec.Config.OnDemand.Priority = new(int32(0)) },
			"priority 10": func(o client.Object) { o.(*v1.JobConfig).Spec.Config.OnDemand.Priority = new(int32(10)) },
			"two modes":   func(o client.Object) { o.(*v1.JobConfig).Spec.Config.Cluster = "c-1" },
		},
		columns: []string{"Name", "Revision"},
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
		},
		columns: []string{"Job", "State", "Wait"},
	}, {
		kind: "ResourceGroup",
		obj: func() client.Object {
			return &v1.ResourceGroup{Spec: v1.ResourceGroupSpec{Package: "pkg",
				Capacity: v1.Resources{MilliCPU: 64000, Memory: 256 << 30, GPU: 8}}}
		},
		status: func(o client.Object) {
			g := o.(*v1.ResourceGroup)
			h := v1.Resources{MilliCPU: 8000, Memory: 16 << 30, GPU: 1}
			g.Status.Holders = map[string]v1.Hold{"c-1": {Resources: h, Since: stamp, Generation: 3}}
			g.Status.Reserved = h
		},
		readBack: func(t *testing.T, got client.Object) {
			if h := got.(*v1.ResourceGroup).Status.Holders["c-1"]; h.Generation != 3 || h.Resources.GPU != 1 || h.Since != stamp {
				t.Errorf("hold read back as %+v", h)
			}
		},
		invalid: map[string]func(client.Object){
			"negative capacity": func(o client.Object) { o.(*v1.ResourceGroup).Spec.Capacity.MilliCPU = -1 },
			"hold without since": func(o client.Object) {
				o.(*v1.ResourceGroup).Status.Holders = map[string]v1.Hold{"c-2": {Resources: v1.Resources{GPU: 1}}}
			},
		},
		columns: []string{"CPU-m", "CPU-m-Reserved", "GPU", "GPU-Reserved"},
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
	if len(crds) != len(kindCases(t)) {
		t.Errorf("%d CRDs embedded, want %d", len(crds), len(kindCases(t)))
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
			cols := map[string]bool{}
			for _, col := range ver.AdditionalPrinterColumns {
				cols[col.Name] = true
			}
			for _, want := range append(tc.columns, "Age") {
				if !cols[want] {
					t.Errorf("no printer column %q in %v", want, ver.AdditionalPrinterColumns)
				}
			}
		})
	}
}
