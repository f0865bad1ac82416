package dlchttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/cluster"
	"github.com/go-logr/logr"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes    = cluster.MaxDocumentSize // 1 MiB: the SDK's own bound of a spec document
	DefaultPageSize        = 100
	DefaultMaxPageSize     = 1000
	DefaultHeartbeat       = 15 * time.Second
	DefaultMaxStream       = time.Hour
	DefaultRetryAfter      = 5 * time.Second
	DefaultSendTimeout     = 30 * time.Second
	maxQueryValues         = 100 // values of one repeated query parameter
	maxNextTicks           = 100 // job.MaxNextTimes
	defaultNextTicks       = 5
	maxIdempotencyKeyBytes = 256
)

// Options configure a Handler. Only Authenticator is required; every
// other field left zero takes its default.
type Options struct {
	// Authenticator says who sent each request (required). See
	// InsecureHeaderAuthenticator for tests and development.
	Authenticator Authenticator
	// MaxBodyBytes bounds a request's body (default
	// DefaultMaxBodyBytes, 1 MiB); a larger one is refused with 413.
	MaxBodyBytes int64
	// DefaultPageSize is a list's page size when the request gives no
	// limit (default 100); MaxPageSize the largest limit a request may
	// give (default 1000; above it is 400).
	DefaultPageSize int
	MaxPageSize     int
	// Heartbeat is how often a server-sent event stream with nothing to
	// say sends a comment, so that proxies keep it open (default 15 s).
	Heartbeat time.Duration
	// MaxStream bounds how long one event stream lasts (default an hour);
	// it then ends with an "end" event saying so, and the client
	// reconnects.
	MaxStream time.Duration
	// SendTimeout bounds the write of one event to a client that does not
	// read (default 30 s); the stream then ends.
	SendTimeout time.Duration
	// RetryAfter is the Retry-After of a 503 (default 5 s).
	RetryAfter time.Duration
	// AllowLocalPackages lets job configs name a package on the server's
	// own file system (storage.Package.Local). Off by default: over HTTP
	// the path names a file of the server, not of the caller, and the
	// platform would read it (J5).
	AllowLocalPackages bool
	// Logger receives what is not sent to the caller: the cause of a 500
	// or 503, an authenticator's reason for a 401. The zero Logger
	// discards.
	Logger logr.Logger
}

// Handler serves a dlc.Client over HTTP: REST and JSON under /v1/,
// server-sent events for watches and log follow, and its own OpenAPI
// document at /v1/openapi.json. Make one with New; it is safe for
// concurrent use.
type Handler struct {
	c        *dlc.Client
	o        Options
	mux      *http.ServeMux
	routes   []*route
	patterns []string // what was registered with the mux, in order
	openapi  []byte
}

// New returns the handler of c. It fails when c or opts.Authenticator is
// nil, or an option is negative.
func New(c *dlc.Client, opts Options) (*Handler, error) {
	switch {
	case c == nil:
		return nil, fmt.Errorf("dlchttp: nil client: %w", dlc.ErrInvalid)
	case opts.Authenticator == nil:
		return nil, fmt.Errorf("dlchttp: no Authenticator (InsecureHeaderAuthenticator is one for tests): %w", dlc.ErrInvalid)
	case opts.MaxBodyBytes < 0, opts.DefaultPageSize < 0, opts.MaxPageSize < 0, opts.Heartbeat < 0,
		opts.MaxStream < 0, opts.SendTimeout < 0, opts.RetryAfter < 0:
		return nil, fmt.Errorf("dlchttp: a negative option: %w", dlc.ErrInvalid)
	}
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&opts.MaxBodyBytes, DefaultMaxBodyBytes)
	for _, p := range []struct {
		v *time.Duration
		d time.Duration
	}{{&opts.Heartbeat, DefaultHeartbeat}, {&opts.MaxStream, DefaultMaxStream}, {&opts.SendTimeout, DefaultSendTimeout}, {&opts.RetryAfter, DefaultRetryAfter}} {
		if *p.v == 0 {
			*p.v = p.d
		}
	}
	if opts.MaxPageSize == 0 {
		opts.MaxPageSize = DefaultMaxPageSize
	}
	if opts.DefaultPageSize == 0 {
		opts.DefaultPageSize = min(DefaultPageSize, opts.MaxPageSize)
	}
	if opts.DefaultPageSize > opts.MaxPageSize {
		return nil, fmt.Errorf("dlchttp: DefaultPageSize %d above MaxPageSize %d: %w", opts.DefaultPageSize, opts.MaxPageSize, dlc.ErrInvalid)
	}
	h := &Handler{c: c, o: opts, mux: http.NewServeMux(), routes: routes()}
	for _, rt := range h.routes {
		p := rt.method + " " + rt.path
		h.mux.HandleFunc(p, h.serve(rt))
		h.patterns = append(h.patterns, p)
	}
	doc, err := openAPI(h.routes, opts)
	if err != nil {
		return nil, fmt.Errorf("dlchttp: the OpenAPI document: %w", err)
	}
	h.openapi = doc
	return h, nil
}

// ServeHTTP serves a request. A path or method that no route has is a 404
// or 405 with an Error body.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := h.mux.Handler(r); pattern == "" {
		h.mux.ServeHTTP(&muxError{ResponseWriter: w}, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// muxError turns the mux's plain-text 404 and 405 into Error bodies,
// keeping its Allow header.
type muxError struct {
	http.ResponseWriter
	done bool
}

func (m *muxError) WriteHeader(code int) {
	if m.done {
		return
	}
	m.done = true
	e := httpError(code, CodeNotFound, "no such route")
	if code == http.StatusMethodNotAllowed {
		e.Code, e.Message = CodeMethodNotAllowed, "the route does not take this method; see the Allow header"
	}
	m.Header().Del("X-Content-Type-Options")
	writeJSON(m.ResponseWriter, code, e)
}

func (m *muxError) Write(b []byte) (int, error) {
	if !m.done {
		m.WriteHeader(http.StatusNotFound)
	}
	return len(b), nil
}

// serve wraps a route: authentication, the query's check, the body's
// bound, and the error's answer.
func (h *Handler) serve(rt *route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !rt.public {
			u, err := h.o.Authenticator.Authenticate(r)
			if err == nil && u.Name == "" {
				err = errNoUser
			}
			if err != nil {
				h.o.Logger.V(1).Info("unauthenticated request", "method", r.Method, "path", r.URL.Path, "reason", err.Error())
				w.Header().Set("WWW-Authenticate", `Bearer realm="dlc"`)
				h.fail(w, r, httpError(http.StatusUnauthorized, CodeUnauthenticated, "authentication required"))
				return
			}
			r = r.WithContext(auth.NewContext(r.Context(), u))
		}
		// Parsed here, not by URL.Query, which drops a pair that does not
		// parse (and with it what the caller meant) without a word.
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			h.fail(w, r, httpError(http.StatusBadRequest, CodeBadRequest, "the query does not parse: "+err.Error()))
			return
		}
		if err := checkQuery(rt, q); err != nil {
			h.fail(w, r, err)
			return
		}
		if rt.body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, h.o.MaxBodyBytes)
		}
		if rt.guard != nil {
			if err := ifMatchAction(r, rt.guard(h, r)); err != nil {
				h.fail(w, r, err)
				return
			}
		}
		if err := rt.serve(h, w, r); err != nil {
			h.fail(w, r, err)
		}
	}
}

// fail answers err as an Error.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := toError(err)
	switch {
	case e.logged:
		h.o.Logger.Info("request refused as invalid by the platform", "method", r.Method, "path", r.URL.Path, "error", err.Error())
	}
	switch e.Status {
	case http.StatusInternalServerError:
		h.o.Logger.Error(err, "request failed", "method", r.Method, "path", r.URL.Path)
	case http.StatusServiceUnavailable:
		h.o.Logger.Info("request failed: unavailable", "method", r.Method, "path", r.URL.Path, "error", err.Error())
		w.Header().Set("Retry-After", strconv.Itoa(int((h.o.RetryAfter+time.Second-1)/time.Second)))
	}
	writeJSON(w, e.Status, e)
}

// writeJSON writes v as the answer's JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(httpError(status, CodeInternal, "internal error"))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// The media types a body may have.
const (
	mediaJSON = "application/json"
	mediaYAML = "application/yaml"
)

var yamlTypes = map[string]bool{mediaYAML: true, "application/x-yaml": true, "text/yaml": true, "text/x-yaml": true}

// decode reads the request's body into v: JSON strictly (an unknown field
// is refused), or, when the route reads YAML and the Content-Type says
// YAML, with fromYAML (the SDK's strict decoder).
func decode(r *http.Request, v any, fromYAML func([]byte) error) error {
	media := mediaJSON
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil {
			return httpError(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "Content-Type does not parse: "+err.Error())
		}
		media = mt
	}
	isYAML := yamlTypes[media]
	if media != mediaJSON && (!isYAML || fromYAML == nil) {
		want := mediaJSON
		if fromYAML != nil {
			want += " or " + mediaYAML
		}
		return httpError(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, fmt.Sprintf("a body of type %s; this route reads %s", media, want))
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var tl *http.MaxBytesError
		if errors.As(err, &tl) {
			return httpError(http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("the body is over %d bytes", tl.Limit))
		}
		return httpError(http.StatusBadRequest, CodeBadRequest, "the body could not be read")
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return httpError(http.StatusBadRequest, CodeBadRequest, "the route needs a body")
	}
	if isYAML {
		return fromYAML(data)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return httpError(http.StatusBadRequest, CodeBadRequest, "the body is not the JSON this route reads: "+strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return httpError(http.StatusBadRequest, CodeBadRequest, "the body holds more than one JSON value")
	}
	return nil
}

// checkQuery refuses a query parameter the route does not take, and a
// parameter given more often than it may be.
func checkQuery(rt *route, q url.Values) error {
	for _, p := range rt.query {
		if p.required && q.Get(p.name) == "" {
			return httpError(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("query parameter %q is required", p.name))
		}
	}
	for k, vs := range q {
		p := rt.queryParam(k)
		if p == nil {
			return httpError(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("unknown query parameter %q", k))
		}
		if !p.repeated && len(vs) > 1 {
			return httpError(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("query parameter %q given %d times; once at most", k, len(vs)))
		}
		if len(vs) > maxQueryValues {
			return httpError(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("query parameter %q given %d times; at most %d", k, len(vs), maxQueryValues))
		}
	}
	return nil
}

// query reads a request's checked query parameters.
type query struct{ url.Values }

func badParam(name, why string) error {
	return httpError(http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("query parameter %q: %s", name, why))
}

func (q query) int(name string, def, lo, hi int) (int, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, badParam(name, fmt.Sprintf("want a whole number from %d to %d, got %q", lo, hi, s))
	}
	return n, nil
}

func (q query) bool(name string) (bool, error) {
	s := q.Get(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, badParam(name, fmt.Sprintf("want true or false, got %q", s))
	}
	return b, nil
}

func (q query) time(name string) (time.Time, error) {
	s := q.Get(name)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, badParam(name, fmt.Sprintf("want an RFC 3339 time, got %q", s))
	}
	return t, nil
}

// tags reads "key=value" values into a map.
func (q query) tags(name string) (map[string]string, error) {
	vs := q.Values[name]
	if len(vs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(vs))
	for _, v := range vs {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, badParam(name, fmt.Sprintf("want key=value, got %q", v))
		}
		if _, twice := m[k]; twice {
			return nil, badParam(name, fmt.Sprintf("key %q given twice", k))
		}
		m[k] = val
	}
	return m, nil
}

// page reads limit and continue.
func (h *Handler) page(q query) (limit int, cont string, err error) {
	limit, err = q.int("limit", h.o.DefaultPageSize, 1, h.o.MaxPageSize)
	return limit, q.Get("continue"), err
}
