package kube_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/event"
)

// TestStoreEvents: the system entries a write adds to a cluster's event
// log appear as Kubernetes Events on its ComputeCluster, each once, the
// user's entries not; with NoEvents, none.
func TestStoreEvents(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := storeCases()[0]
	// writes creates the cluster with a user and a system entry, then
	// updates it twice: a system and a user entry more, then a system
	// entry as the bounded log drops its two oldest.
	writes := func(s *kube.Store) {
		t.Helper()
		cl := c.v.(*cluster.Cluster).DeepCopy()
		put := func(version string) string {
			t.Helper()
			d := backend.Doc{Kind: c.kind, ID: c.id, Version: version, Labels: c.labels, Data: mustJSON(t, cl)}
			var v string
			var err error
			if version == "" {
				v, err = s.Create(ctx, d)
			} else {
				v, err = s.Update(ctx, d)
			}
			if err != nil {
				t.Fatalf("write: %v", err)
			}
			return v
		}
		v := put("")
		cl.State = cluster.Running
		cl.Events = append(cl.Events,
			event.Event{Time: t0.Add(2 * time.Second), Source: "system", Action: "running", Message: "3 pods"},
			event.Event{Time: t0.Add(3 * time.Second), Source: "user", Actor: "alice", Action: "scale", Message: "gpu: 2 workers"})
		v = put(v)
		cl.State, cl.Reason = cluster.Abnormal, "head pod lost"
		cl.Events = append(slices.Clone(cl.Events[2:]),
			event.Event{Time: t0.Add(4 * time.Second), Source: "system", Action: "abnormal", Message: "head pod lost"})
		put(v)
	}
	list := func(ns string) []corev1.Event {
		t.Helper()
		var l corev1.EventList
		if err := cp.Client().List(ctx, &l, client.InNamespace(ns)); err != nil {
			t.Fatalf("listing events: %v", err)
		}
		return l.Items
	}

	// The store without Events writes first, so that it has had at least
	// as long as the other to write any.
	quiet := cp.NewNamespace(t)
	qs, err := kube.NewStore(ctx, cp.Config(), quiet, kube.StoreOptions{NoEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer qs.Close()
	writes(qs)

	ns := cp.NewNamespace(t)
	var logged logs
	s, err := kube.NewStore(ctx, cp.Config(), ns, kube.StoreOptions{Logger: logged.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	writes(s)
	var cc v1alpha1.ComputeCluster
	if err := cp.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: c.id}, &cc); err != nil {
		t.Fatal(err)
	}

	want := map[string]struct{ typ, message string }{
		"Created":  {corev1.EventTypeNormal, "Ray has it"},
		"Running":  {corev1.EventTypeNormal, "3 pods"},
		"Abnormal": {corev1.EventTypeWarning, "head pod lost"},
	}
	var got []corev1.Event
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got = list(ns); len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%d events within %v of the first write", len(got), time.Since(start))
	check := func(got []corev1.Event) {
		t.Helper()
		var reasons []string
		for _, e := range got {
			reasons = append(reasons, e.Reason)
			w, ok := want[e.Reason]
			if !ok {
				continue
			}
			o := e.InvolvedObject
			if o.Kind != "ComputeCluster" || o.APIVersion != v1alpha1.GroupVersion.String() || o.Namespace != ns || o.Name != c.id || o.UID != cc.UID {
				t.Errorf("%s: involvedObject %+v, want the ComputeCluster %s/%s (uid %s)", e.Reason, o, ns, c.id, cc.UID)
			}
			if e.Type != w.typ || e.Message != w.message || e.Count != 1 {
				t.Errorf("%s: type %s, message %q, count %d; want %s, %q, 1", e.Reason, e.Type, e.Message, e.Count, w.typ, w.message)
			}
			if e.Source.Component != kube.EventComponent || e.ReportingController != kube.EventComponent {
				t.Errorf("%s: source %+v, reportingController %q; want %q", e.Reason, e.Source, e.ReportingController, kube.EventComponent)
			}
		}
		slices.Sort(reasons)
		if strings.Join(reasons, " ") != "Abnormal Created Running" {
			t.Errorf("events with reasons %v, want one each of Abnormal, Created, Running", reasons)
		}
	}
	check(got)

	if l := list(quiet); len(l) != 0 {
		t.Errorf("with NoEvents, %d events: %v", len(l), describe(l))
	}
	// Nothing more came meanwhile.
	check(list(ns))
	if l := logged.String(); l != "" {
		t.Errorf("the store logged:\n%s", l)
	}
}

func describe(l []corev1.Event) []string {
	var out []string
	for _, e := range l {
		out = append(out, fmt.Sprintf("%s %s %s: %s", e.InvolvedObject.Kind, e.Type, e.Reason, e.Message))
	}
	return out
}

// logs is a logger that keeps what is logged.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{})
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
