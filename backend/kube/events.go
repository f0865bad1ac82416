package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/job"
)

// EventComponent is the source component and reporting controller of the
// Kubernetes Events the store writes.
const EventComponent = "dlc"

// eventRecorder writes the system entries of the documents' event logs
// as Kubernetes Events on their objects, through client-go's event
// broadcaster: asynchronously (a write only queues them; the queue drops
// what overflows), rate-limited per object by its spam filter, similar
// events aggregated, and a failed write retried a few times and then
// logged. A nil *eventRecorder records nothing.
type eventRecorder struct {
	b    record.EventBroadcaster
	rec  record.EventRecorderLogger
	log  logr.Logger
	once sync.Once
}

// newEventRecorder starts a broadcaster writing Events to namespace; it
// stops when ctx is done or on close.
func newEventRecorder(ctx context.Context, cfg *rest.Config, namespace string, scheme *runtime.Scheme, log logr.Logger) (*eventRecorder, error) {
	cs, err := kubernetes.NewForConfig(callConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("kube store: events client: %w", err)
	}
	b := record.NewBroadcaster(record.WithContext(logr.NewContext(ctx, log)))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events(namespace)})
	host, _ := os.Hostname() // tells replicas apart; best effort
	rec := b.NewRecorder(scheme, corev1.EventSource{Component: EventComponent, Host: host}).WithLogger(log)
	return &eventRecorder{b: b, rec: rec, log: log}, nil
}

// close stops the broadcaster; Events still queued may be lost.
func (r *eventRecorder) close() {
	if r != nil {
		r.once.Do(r.b.Shutdown)
	}
}

// record queues an Event on obj, as the API server returned it from a
// write of kind k, for each system entry of the event log in the data
// written (after) that is not in the log of the version before (nil for a
// create).
func (r *eventRecorder) record(k *kindInfo, before, after []byte, obj client.Object) {
	if r == nil || !k.statusKeys["events"] {
		return
	}
	added, err := newSystemEvents(before, after)
	if err != nil {
		r.log.Error(err, "kube store: no Events for a write", "kind", k.kind, "name", obj.GetName())
		return
	}
	for _, e := range added {
		r.rec.Event(obj, eventType(e.Action), eventReason(e.Action), e.Message)
	}
}

// newSystemEvents returns the system entries of after's event log that
// are not in before's, oldest first. The log is bounded and drops its
// oldest entries, so entries are matched by what they hold, not counted.
// An entry that another occurrence was folded into (its Count and Time
// moved on) is new: each occurrence is an Event, as before entries
// folded (client-go's aggregation counts the repeats).
func newSystemEvents(before, after []byte) ([]event.Event, error) {
	type eventLog struct {
		Events []event.Event `json:"events"`
	}
	type key struct {
		time, first                   time.Time
		source, actor, action, detail string
		count                         int
	}
	keyOf := func(e event.Event) key {
		return key{e.Time.UTC(), e.First.UTC(), e.Source, e.Actor, e.Action, e.Message, e.Times()}
	}
	var a eventLog
	if err := json.Unmarshal(after, &a); err != nil {
		return nil, err
	}
	seen := map[key]int{}
	if len(before) > 0 {
		var b eventLog
		if err := json.Unmarshal(before, &b); err != nil {
			return nil, err
		}
		for _, e := range b.Events {
			seen[keyOf(e)]++
		}
	}
	var out []event.Event
	for _, e := range a.Events {
		if k := keyOf(e); seen[k] > 0 {
			seen[k]--
			continue
		}
		if e.Source == "system" {
			out = append(out, e)
		}
	}
	return out, nil
}

// eventType is Warning for an entry saying something went wrong (the
// object became abnormal or failed, a step was refused or is retried),
// else Normal.
func eventType(action string) string {
	switch {
	case action == string(cluster.Abnormal), action == string(job.Failed),
		strings.HasSuffix(action, "-failed"), strings.HasSuffix(action, "-refused"), strings.HasSuffix(action, "-retrying"):
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// eventReason is an entry's action in UpperCamelCase, as Kubernetes
// reasons are: "delete-retrying" is "DeleteRetrying". Characters other
// than ASCII letters and digits separate words and are dropped.
func eventReason(action string) string {
	var b strings.Builder
	up := true
	for _, c := range action {
		switch {
		case 'a' <= c && c <= 'z':
			if up {
				c -= 'a' - 'A'
			}
		case 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		default:
			up = true
			continue
		}
		up = false
		b.WriteRune(c)
	}
	if b.Len() == 0 {
		return "SystemEvent"
	}
	const maxReason = 128 // the API server's limit
	return b.String()[:min(b.Len(), maxReason)]
}
