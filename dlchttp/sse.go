package dlchttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
)

// clusterEvent is the data of a cluster watch's event.
type clusterEvent struct {
	Type string `json:"type"` // ADDED, MODIFIED or DELETED
	ID   string `json:"id"`
	// ETag is the cluster's version as If-Match takes it.
	ETag    string           `json:"etag,omitempty"`
	Cluster *cluster.Cluster `json:"cluster,omitempty"` // none for DELETED
}

// runEvent is the data of a run watch's event.
type runEvent struct {
	Type string   `json:"type"`
	ID   string   `json:"id"`
	Run  *job.Run `json:"run,omitempty"`
}

// endEvent is the data of the "end" event that closes a stream the server
// ends.
type endEvent struct {
	// Reason: "ended" (the run ended, or the client closed its watch),
	// "max-stream" (Options.MaxStream passed: reconnect).
	Reason string       `json:"reason"`
	State  job.RunState `json:"state,omitempty"` // a followed run's state, when it has ended
}

// sse is one server-sent event stream.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	h  *Handler
}

// startSSE writes the stream's headers.
func (h *Handler) startSSE(w http.ResponseWriter) (*sse, error) {
	s := &sse{w: w, rc: http.NewResponseController(w), h: h}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	return s, s.flush()
}

// send writes one event, its data as JSON, and flushes it, within
// SendTimeout.
func (s *sse) send(name string, data any) error { return s.sendID("", name, data) }

// sendID is send with the event's id ("": none), which a client that
// reconnects sends back as Last-Event-ID.
func (s *sse) sendID(id, name string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if id != "" {
		return s.write(fmt.Appendf(nil, "id: %s\nevent: %s\ndata: %s\n\n", id, name, b))
	}
	return s.write(fmt.Appendf(nil, "event: %s\ndata: %s\n\n", name, b))
}

// outEvent is what pump sends of one value: skip sends nothing.
type outEvent struct {
	id, name string
	data     any
	skip     bool
}

func (s *sse) write(b []byte) error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.h.o.SendTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.flush()
}

func (s *sse) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// pump sends what ch brings as events until ch closes (then end says the
// last event's data), the client goes away, MaxStream passes or a write
// fails; a comment goes out every Heartbeat of silence. The caller's
// cancel of ctx, which it derived ch from, stops ch's producer.
func pump[T any](ctx context.Context, s *sse, ch <-chan T, event func(T) outEvent, end func() any) {
	heartbeat := time.NewTicker(s.h.o.Heartbeat)
	defer heartbeat.Stop()
	limit := time.NewTimer(s.h.o.MaxStream)
	defer limit.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-limit.C:
			_ = s.send("end", endEvent{Reason: "max-stream"})
			return
		case <-heartbeat.C:
			if s.write([]byte(": heartbeat\n\n")) != nil {
				return
			}
		case v, open := <-ch:
			if !open {
				if ctx.Err() == nil {
					_ = s.send("end", end())
				}
				return
			}
			ev := event(v)
			if ev.skip {
				continue
			}
			if s.sendID(ev.id, ev.name, ev.data) != nil {
				return
			}
			heartbeat.Reset(s.h.o.Heartbeat)
		}
	}
}

// watchClusters streams a cluster watch.
func (h *Handler) watchClusters(w http.ResponseWriter, r *http.Request) error {
	return serveWatch(h, w, r, func(ctx context.Context, q query, initial bool) (<-chan dlc.ClusterEvent, error) {
		return h.c.Clusters().Watch(ctx, dlc.ClusterWatchOptions{IDs: q.Values["id"], Initial: initial})
	}, func(e dlc.ClusterEvent) outEvent {
		d := clusterEvent{Type: string(e.Type), ID: e.ID, Cluster: e.Cluster}
		if e.Cluster != nil {
			d.ETag = etag(e.Cluster.Version)
		}
		return outEvent{name: string(e.Type), data: d}
	})
}

// watchRuns streams a run watch.
func (h *Handler) watchRuns(w http.ResponseWriter, r *http.Request) error {
	return serveWatch(h, w, r, func(ctx context.Context, q query, initial bool) (<-chan dlc.RunEvent, error) {
		return h.c.Runs().Watch(ctx, dlc.RunWatchOptions{IDs: q.Values["id"], JobID: q.Get("job"), Initial: initial})
	}, func(e dlc.RunEvent) outEvent {
		return outEvent{name: string(e.Type), data: runEvent{Type: string(e.Type), ID: e.ID, Run: e.Run}}
	})
}

// serveWatch streams the watch open makes (with the request's query and
// its initial parameter), each change as event says, until it ends.
func serveWatch[E any](h *Handler, w http.ResponseWriter, r *http.Request,
	open func(ctx context.Context, q query, initial bool) (<-chan E, error), event func(E) outEvent) error {
	q := query{r.URL.Query()}
	initial, err := q.bool("initial")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ch, err := open(ctx, q, initial)
	if err != nil {
		return err
	}
	s, err := h.startSSE(w)
	if err != nil {
		return nil
	}
	pump(ctx, s, ch, event, func() any { return endEvent{Reason: "ended"} })
	return nil
}

// followLogs streams a run's log lines, each a "line" event whose data is
// the line as a JSON string and whose id is its number in the stream (0
// first), then an "end" event with the run's state. A client that
// reconnects with Last-Event-ID n gets the lines after line n.
func (h *Handler) followLogs(w http.ResponseWriter, r *http.Request) error {
	id := pathID(r)
	after := -1
	if s := r.Header.Get("Last-Event-ID"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return httpError(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("Last-Event-ID %q is not a line number", s))
		}
		after = n
	}
	line := -1
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ch, err := h.c.Runs().Follow(ctx, id)
	if err != nil {
		return err
	}
	s, err := h.startSSE(w)
	if err != nil {
		return nil
	}
	pump(ctx, s, ch, func(l string) outEvent {
		line++
		return outEvent{id: strconv.Itoa(line), name: "line", data: l, skip: line <= after}
	}, func() any {
		e := endEvent{Reason: "ended"}
		if run, err := h.c.Runs().Get(ctx, id); err == nil && run.State.Terminal() {
			e.State = run.State
		}
		return e
	})
	return nil
}
