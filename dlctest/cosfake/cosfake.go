// Package cosfake runs a Tencent COS look-alike on loopback for tests: an
// in-memory S3 server (github.com/johannesboyne/gofakes3) behind a front
// that speaks the parts of COS that cos-go-sdk-v5 relies on.
//
// cos-go-sdk-v5 addresses buckets virtual-host style: it sends "/key" to
// the bucket's host, https://<bucket>.cos.<region>.myqcloud.com. The front
// takes the bucket from the Host header (a client with an endpoint
// override keeps the bucket's host name there) and rewrites the request to
// gofakes3's path style, /<bucket>/<key>. It also adds the
// x-cos-hash-crc64ecma header that COS returns and the SDK checks on every
// upload: the CRC-64 of the object or part as COS defines it (Go's
// hash/crc64 with the ECMA table: reflected, all-ones initial value and
// final XOR, also known as CRC-64/XZ), in decimal.
//
// It keeps a clock of its own (Now, Advance) and refuses a presigned URL,
// a request that carries COS's signature in its query string (q-sign-time,
// q-key-time, ... as cos-go-sdk-v5's GetPresignedURL builds it), once that
// clock is outside the signature's time window, as COS does: 403
// AccessDenied "Request has expired". A test plays "two hours later" with
// Advance(2*time.Hour) and finds an hour's URL expired. A URL presigned
// by a client with an endpoint override has the endpoint's host
// (127.0.0.1), not the bucket's, so it finds its bucket only on a server
// with one bucket (DefaultBucket, or a single WithBuckets).
//
// With WithTLS it serves HTTPS, as COS does and as Ray requires of a
// working_dir URL; Client returns an *http.Client that trusts it.
//
// What it does not model: authentication (a signature's HMAC is not
// checked, only a query signature's time window), ACLs, versioning as COS
// does it, CRC headers of copied objects, and COS's minimum part size
// (gofakes3 accepts small parts).
//
// A test of code that uploads job packages through the SDK points the
// SDK's COS client at it:
//
//	srv := cosfake.New(t, cosfake.WithBuckets("jobs-1250000000"), cosfake.WithTLS())
//	cc, err := storage.NewCOSClient(storage.COSOptions{Anonymous: true,
//		Region: cosfake.DefaultRegion, Endpoint: srv.URL, HTTPClient: srv.Client()})
//	c, err := dlc.New(dlc.WithCOS(cc))
//	// ... then read back what was uploaded: srv.Object("jobs-1250000000", key)
package cosfake

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"hash"
	"hash/crc64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	cos "github.com/tencentyun/cos-go-sdk-v5"
)

// The operations that Count reports, as COS's API names them.
const (
	OpPutObject       = "PutObject"
	OpGetObject       = "GetObject"
	OpHeadObject      = "HeadObject"
	OpDeleteObject    = "DeleteObject"
	OpInitiateUpload  = "InitiateMultipartUpload"
	OpUploadPart      = "UploadPart"
	OpCompleteUpload  = "CompleteMultipartUpload"
	OpAbortUpload     = "AbortMultipartUpload"
	OpListParts       = "ListParts"
	OpListUploads     = "ListMultipartUploads"
	OpListObjects     = "GetBucket"
	OpHeadBucket      = "HeadBucket"
	OpUnknownBucketOp = "Other"
	// OpExpired counts requests refused because their query signature
	// (a presigned URL) had expired by the server's clock. Such a request
	// is counted here only, not under its operation: it does not reach
	// the fake.
	OpExpired = "Expired"
)

// TB is the part of testing.TB that New needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

type config struct {
	buckets    []string
	middleware []func(http.Handler) http.Handler
	tls        bool
}

// Option configures a Server.
type Option func(*config)

// WithBuckets creates these buckets ("<name>-<appid>"). Without it the
// server has one bucket, DefaultBucket.
func WithBuckets(names ...string) Option {
	return func(c *config) { c.buckets = append(c.buckets, names...) }
}

// WithMiddleware wraps the front with h, outermost last: a test can fail
// requests, delay them or watch them before they reach the fake.
func WithMiddleware(h func(http.Handler) http.Handler) Option {
	return func(c *config) { c.middleware = append(c.middleware, h) }
}

// WithTLS makes the server serve HTTPS (with httptest's self-signed
// certificate for 127.0.0.1): Server.URL is then https://127.0.0.1:<port>.
// Clients must trust the certificate: use Server.Client, or
// Server.CertPool in a transport of your own.
func WithTLS() Option {
	return func(c *config) { c.tls = true }
}

// DefaultBucket is the bucket a server has when WithBuckets is not given.
const DefaultBucket = "jobs-1250000000"

// DefaultRegion is the region the server's host names use.
const DefaultRegion = "ap-guangzhou"

// Server is a running fake. Close it when done (New does that for you).
type Server struct {
	// URL is the server's loopback address, http://127.0.0.1:<port>
	// (https:// with WithTLS): the endpoint to send requests to.
	URL string
	// Backend is the in-memory store behind the fake.
	Backend *s3mem.Backend

	srv     *httptest.Server
	buckets []string

	mu     sync.Mutex
	counts map[string]int
	crcs   map[string]uint64 // "<bucket>/<key>" → CRC-64 of the object
	offset time.Duration     // of the server's clock from time.Now
}

// Start starts a server on 127.0.0.1.
func Start(opts ...Option) (*Server, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if len(c.buckets) == 0 {
		c.buckets = []string{DefaultBucket}
	}
	s := &Server{
		buckets: c.buckets,
		counts:  map[string]int{},
		crcs:    map[string]uint64{},
	}
	clock := serverClock{s}
	s.Backend = s3mem.New(s3mem.WithTimeSource(clock))
	for _, b := range c.buckets {
		if err := s.Backend.CreateBucket(b); err != nil {
			return nil, fmt.Errorf("cosfake: create bucket %s: %w", b, err)
		}
	}
	// The skew check only looks at AWS's x-amz-date, which COS clients
	// do not send; with the clock advanced it would refuse AWS clients.
	fake := gofakes3.New(s.Backend, gofakes3.WithoutVersioning(),
		gofakes3.WithTimeSource(clock), gofakes3.WithTimeSkewLimit(0))
	var h http.Handler = &front{s: s, next: fake.Server()}
	for _, m := range c.middleware {
		h = m(h)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cosfake: %w", err)
	}
	s.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: h}}
	if c.tls {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	s.URL = s.srv.URL
	return s, nil
}

// New starts a server and closes it when the test ends.
func New(tb TB, opts ...Option) *Server {
	tb.Helper()
	s, err := Start(opts...)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Client returns an HTTP client for the server: with WithTLS it trusts the
// server's certificate (and no other), otherwise it is a plain client.
// Each call returns a new *http.Client, which the caller may change; they
// share one transport, whose connections Close closes.
func (s *Server) Client() *http.Client {
	c := *s.srv.Client()
	return &c
}

// CertPool returns a pool holding the server's certificate, for a
// transport of one's own (tls.Config.RootCAs), or nil when the server
// does not serve TLS.
func (s *Server) CertPool() *x509.CertPool {
	cert := s.srv.Certificate()
	if cert == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// Now returns the time on the server's clock: time.Now() moved by every
// Advance so far. Presigned URLs expire, and objects get their
// Last-Modified time, by this clock.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(s.offset)
}

// Advance moves the server's clock forward by d (back, if d is negative),
// as if that much time had passed for the server only: a test plays "two
// hours later" with Advance(2*time.Hour), after which a URL presigned for
// an hour is refused as expired. Clients' clocks do not move: requests
// that the SDK signs in their Authorization header are not checked.
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	s.offset += d
	s.mu.Unlock()
}

// serverClock is the server's clock as gofakes3's TimeSource.
type serverClock struct{ s *Server }

func (c serverClock) Now() time.Time                  { return c.s.Now() }
func (c serverClock) Since(t time.Time) time.Duration { return c.s.Now().Sub(t) }

// Host returns the virtual host name of a bucket in DefaultRegion, which
// is what requests for it carry in their Host header.
func Host(bucket string) string { return bucket + ".cos." + DefaultRegion + ".myqcloud.com" }

// SDKClient returns an unauthenticated cos-go-sdk-v5 client for one
// bucket of the server, for checking what a test left behind (list
// multipart uploads, read an object) or for comparing with the SDK's own
// upload. A nil hc means Client(). CRC checking stays on.
func (s *Server) SDKClient(bucket string, hc *http.Client) *cos.Client {
	u, _ := url.Parse(s.URL)
	if hc == nil {
		hc = s.Client()
	}
	c := cos.NewClient(&cos.BaseURL{BucketURL: u}, hc)
	c.Host = Host(bucket)
	return c
}

// Count returns how many requests of an operation (OpPutObject, ...)
// reached the fake since the start or the last ResetCounts.
func (s *Server) Count(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[op]
}

// Counts returns a copy of every operation's count.
func (s *Server) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// ResetCounts sets every count back to zero.
func (s *Server) ResetCounts() {
	s.mu.Lock()
	s.counts = map[string]int{}
	s.mu.Unlock()
}

// Object returns an object's content.
func (s *Server) Object(bucket, key string) ([]byte, error) {
	o, err := s.Backend.GetObject(bucket, key, nil)
	if err != nil {
		return nil, err
	}
	defer o.Contents.Close()
	return io.ReadAll(o.Contents)
}

// PutObject stores an object directly, as if it had been uploaded (at
// Now, its Last-Modified time).
func (s *Server) PutObject(bucket, key string, data []byte) error {
	meta := map[string]string{"Last-Modified": s.Now().UTC().Format(http.TimeFormat)}
	if _, err := s.Backend.PutObject(bucket, key, meta, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		return err
	}
	s.setCRC(bucket, key, crc64.Checksum(data, crcTable))
	return nil
}

var crcTable = crc64.MakeTable(crc64.ECMA)

func (s *Server) setCRC(bucket, key string, crc uint64) {
	s.mu.Lock()
	s.crcs[bucket+"/"+key] = crc
	s.mu.Unlock()
}

func (s *Server) crc(bucket, key string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.crcs[bucket+"/"+key]
	return c, ok
}

func (s *Server) count(op string) {
	s.mu.Lock()
	s.counts[op]++
	s.mu.Unlock()
}

var cosHost = regexp.MustCompile(`^([a-z0-9][a-z0-9-]*-[0-9]+)\.cos\.[a-z0-9-]+\.(myqcloud\.com|tencentcos\.cn)$`)

// front maps COS requests onto gofakes3 and adds COS's CRC header.
type front struct {
	s    *Server
	next http.Handler
}

func (f *front) bucket(r *http.Request) (string, bool) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if m := cosHost.FindStringSubmatch(host); m != nil {
		return m[1], true
	}
	if len(f.s.buckets) == 1 {
		return f.s.buckets[0], true
	}
	return "", false
}

func operation(r *http.Request, key string) string {
	q := r.URL.Query()
	_, uploads := q["uploads"]
	uploadID := q.Get("uploadId")
	switch {
	case r.Method == http.MethodPut && uploadID != "":
		return OpUploadPart
	case r.Method == http.MethodPost && uploads:
		return OpInitiateUpload
	case r.Method == http.MethodPost && uploadID != "":
		return OpCompleteUpload
	case r.Method == http.MethodDelete && uploadID != "":
		return OpAbortUpload
	case r.Method == http.MethodGet && uploadID != "":
		return OpListParts
	case r.Method == http.MethodGet && uploads:
		return OpListUploads
	case key == "" && r.Method == http.MethodGet:
		return OpListObjects
	case key == "" && r.Method == http.MethodHead:
		return OpHeadBucket
	case key == "":
		return OpUnknownBucketOp
	case r.Method == http.MethodPut:
		return OpPutObject
	case r.Method == http.MethodGet:
		return OpGetObject
	case r.Method == http.MethodHead:
		return OpHeadObject
	case r.Method == http.MethodDelete:
		return OpDeleteObject
	}
	return OpUnknownBucketOp
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bucket, ok := f.bucket(r)
	if !ok {
		writeError(w, http.StatusBadRequest, "InvalidBucketName", "cannot tell the bucket from Host "+r.Host)
		return
	}
	key := strings.TrimPrefix(r.URL.Path, "/")
	if msg, ok := f.s.checkQuerySignature(r); !ok {
		io.Copy(io.Discard, r.Body)
		if msg == msgExpired {
			f.s.count(OpExpired)
		}
		writeError(w, http.StatusForbidden, "AccessDenied", msg)
		return
	}
	op := operation(r, key)
	f.s.count(op)

	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + bucket
	if key != "" {
		r2.URL.Path += "/" + key
	}
	r2.URL.RawPath = ""
	r2.RequestURI = r2.URL.RequestURI()

	hw := &hookWriter{ResponseWriter: w}
	var body *crcReader
	switch op {
	case OpPutObject, OpUploadPart:
		body = &crcReader{r: r.Body, h: crc64.New(crcTable)}
		r2.Body = body
	}
	hw.hook = func(status int) {
		if status < 200 || status > 299 {
			return
		}
		switch op {
		case OpPutObject, OpUploadPart:
			sum := body.h.Sum64()
			w.Header().Set("x-cos-hash-crc64ecma", strconv.FormatUint(sum, 10))
			if op == OpPutObject {
				f.s.setCRC(bucket, key, sum)
			}
		case OpCompleteUpload:
			data, err := f.s.Object(bucket, key)
			if err != nil {
				return
			}
			sum := crc64.Checksum(data, crcTable)
			f.s.setCRC(bucket, key, sum)
			w.Header().Set("x-cos-hash-crc64ecma", strconv.FormatUint(sum, 10))
		case OpHeadObject, OpGetObject:
			if sum, ok := f.s.crc(bucket, key); ok {
				w.Header().Set("x-cos-hash-crc64ecma", strconv.FormatUint(sum, 10))
			}
		}
		w.Header().Set("x-cos-request-id", w.Header().Get("x-amz-request-id"))
	}
	f.next.ServeHTTP(hw, r2)
	if !hw.wrote {
		hw.WriteHeader(http.StatusOK)
	}
}

// The messages of COS's 403 AccessDenied for a query signature.
const (
	msgExpired = "Request has expired"
	msgInvalid = "Invalid Authorization"
)

// checkQuerySignature checks the time window of a query signature (a
// presigned URL), not its HMAC: the server's clock, in Unix seconds, must
// be within q-sign-time and q-key-time ("start;end"). A request without
// one passes. cos-go-sdk-v5 puts the signature's fields in the query, or
// with PresignedURLOptions.SignMerged all of them in one "sign" parameter.
// It returns the message to refuse the request with, and false, when the
// request must be refused.
func (s *Server) checkQuerySignature(r *http.Request) (string, bool) {
	// Split by hand: url.ParseQuery drops pairs with a raw ';', which
	// the times hold (the SDK escapes it, a hand-made URL may not).
	q := map[string]string{}
	for _, kv := range strings.Split(r.URL.RawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 == nil && err2 == nil {
			if _, seen := q[k]; !seen {
				q[k] = v
			}
		}
	}
	fields := map[string]string{}
	for _, k := range []string{"q-sign-algorithm", "q-sign-time", "q-key-time"} {
		if v, ok := q[k]; ok {
			fields[k] = v
		}
	}
	if sign := q["sign"]; len(fields) == 0 && strings.Contains(sign, "q-sign-time=") {
		// The whole Authorization string: k=v pairs joined with '&'.
		for _, kv := range strings.Split(sign, "&") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				if u, err := url.QueryUnescape(v); err == nil {
					v = u
				}
				fields[k] = v
			}
		}
	}
	if len(fields) == 0 {
		return "", true
	}
	now := s.Now().Unix()
	for _, k := range []string{"q-sign-time", "q-key-time"} {
		start, end, ok := parseWindow(fields[k])
		switch {
		case !ok:
			return msgInvalid, false
		case now < start || now > end:
			return msgExpired, false
		}
	}
	return "", true
}

// parseWindow parses "start;end" in Unix seconds.
func parseWindow(v string) (start, end int64, ok bool) {
	a, b, ok := strings.Cut(v, ";")
	if !ok {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	end, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || start > end {
		return 0, 0, false
	}
	return start, end, true
}

// crcReader computes the CRC-64 of what it reads.
type crcReader struct {
	r io.ReadCloser
	h hash.Hash64
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	return n, err
}

func (c *crcReader) Close() error { return c.r.Close() }

// hookWriter calls hook once, just before the status line goes out, so
// that headers computed from the request body can still be set.
type hookWriter struct {
	http.ResponseWriter
	hook  func(status int)
	wrote bool
}

func (w *hookWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if w.hook != nil {
			w.hook(code)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *hookWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes flushes through.
func (w *hookWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// writeError writes a COS-style XML error.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message><RequestId>cosfake</RequestId></Error>", code, msg)
}

// WriteError writes a COS-style XML error response, for middleware that
// fails requests (e.g. 503 "SlowDown").
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	writeError(w, status, code, msg)
}

// FailFirst returns middleware that answers the first n requests matching
// match (all requests when match is nil) with status and code, then lets
// requests through. It drains each failed request's body, as a server
// would.
func FailFirst(n int, status int, code string, match func(*http.Request) bool) func(http.Handler) http.Handler {
	var mu sync.Mutex
	left := n
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if match == nil || match(r) {
				mu.Lock()
				fail := left > 0
				if fail {
					left--
				}
				mu.Unlock()
				if fail {
					io.Copy(io.Discard, r.Body)
					writeError(w, status, code, "injected by cosfake.FailFirst")
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}
