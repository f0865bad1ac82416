package dlchttp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/dlctest"
)

// env is a handler over a memory fixture, served on loopback.
type env struct {
	t   *testing.T
	m   *dlctest.Memory
	h   *Handler
	srv *httptest.Server

	mu   sync.Mutex
	hits map[string]int // route pattern -> successful answers
}

// newEnv serves a fixture's client; mo and o may be zero.
func newEnv(t *testing.T, mo dlctest.MemoryOptions, o Options) *env {
	t.Helper()
	mo.T = t
	m := dlctest.NewMemory(mo)
	return newEnvOn(t, m, m.Client, o)
}

func newEnvOn(t *testing.T, m *dlctest.Memory, c *dlc.Client, o Options) *env {
	t.Helper()
	if o.Authenticator == nil {
		o.Authenticator = InsecureHeaderAuthenticator{}
	}
	h, err := New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, m: m, h: h, hits: map[string]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := h.mux.Handler(r)
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status >= 200 && rec.status < 300 && pattern != "" {
			e.mu.Lock()
			e.hits[pattern]++
			e.mu.Unlock()
		}
	}))
	t.Cleanup(e.srv.Close)
	return e
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// resp is an answer, its body read.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d %s: %v", r.status, r.body, err)
	}
}

func (r resp) err(t *testing.T) Error {
	t.Helper()
	var e Error
	r.decode(t, &e)
	return e
}

// req is a request: a body (a string is sent as it is, anything else as
// JSON) and headers ("" for the user header sends none).
type req struct {
	method, path string
	body         any
	header       map[string]string
	user         string // default alice; "-" for none
}

func (e *env) do(r req) resp {
	e.t.Helper()
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		body = bytes.NewReader(j)
	}
	hr, err := http.NewRequest(r.method, e.srv.URL+r.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	switch r.user {
	case "":
		hr.Header.Set(DefaultUserHeader, "alice")
	case "-":
	default:
		hr.Header.Set(DefaultUserHeader, r.user)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(hr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// must does r and fails the test unless the answer has status want; it
// decodes the body into out when out is not nil.
func (e *env) must(r req, want int, out any) resp {
	e.t.Helper()
	a := e.do(r)
	if a.status != want {
		e.t.Fatalf("%s %s: %d %s, want %d", r.method, r.path, a.status, a.body, want)
	}
	if out != nil {
		a.decode(e.t, out)
	}
	return a
}

// settle runs the fixture until nothing is due.
func (e *env) settle() { e.m.Settle(100*time.Millisecond, 1000) }

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data string
}

// stream opens an event stream; events are sent on the channel until the
// stream ends or ctx is done. It fails the test unless the answer is a
// 200 text/event-stream.
func (e *env) stream(ctx context.Context, path string, header ...string) <-chan sseEvent {
	e.t.Helper()
	hr, err := http.NewRequestWithContext(ctx, "GET", e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	hr.Header.Set(DefaultUserHeader, "alice")
	for i := 0; i+1 < len(header); i += 2 {
		hr.Header.Set(header[i], header[i+1])
	}
	res, err := e.srv.Client().Do(hr)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		e.t.Fatalf("GET %s: %d %s %s", path, res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	out := make(chan sseEvent)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" || ev.data != "" {
					select {
					case out <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out
}
