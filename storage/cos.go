package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	cos "github.com/tencentyun/cos-go-sdk-v5"

	"github.com/aidlc/dlc/errs"
)

// Defaults of a COSClient.
const (
	DefaultMaxAttempts = 5
	DefaultRetryBase   = 200 * time.Millisecond
	DefaultRetryMax    = 10 * time.Second
	// DefaultWorkingDirExpiry is how long a presigned working_dir URL is
	// valid when WorkingDirOptions.Expiry is zero: an hour. The URL is a
	// bearer credential for the package, readable by whoever can read the
	// RayJob (runtimeEnvYAML) or the Ray job's runtime env. Ray fetches a
	// working_dir lazily, on each node when it first starts a worker of the
	// job (an autoscaled node hours after the submit), so a run's URL must
	// live as long as the run may add nodes: the Kubernetes backend asks
	// for the run's deadline, or a week (kube.PackageUse.For), not this
	// default.
	DefaultWorkingDirExpiry = time.Hour
	// MaxCOSDirectory is the largest central directory that
	// COSClient.InspectZIP reads (with ranged GETs); a larger one is only
	// checked by its end records.
	MaxCOSDirectory = 64 << 20
	cosReadBlock    = 1 << 20
)

// DefaultCOSAttemptTimeout bounds one attempt of a COS request when
// COSOptions.AttemptTimeout is zero: enough for a part or a single PUT of
// the default sizes (16 MiB) at well under 1 Mbit/s.
const DefaultCOSAttemptTimeout = 5 * time.Minute

// COSOptions configure a COSClient.
type COSOptions struct {
	// Credentials sign the requests; zero means CredentialsFromEnv(), and
	// when that is zero too requests go unsigned (public-read buckets).
	Credentials Credentials
	// Anonymous sends unsigned requests (public-read buckets) and ignores
	// Credentials and the environment.
	Anonymous bool
	// Region is used for objects whose URI does not name one
	// (cos://bucket/key), e.g. "ap-guangzhou".
	Region string
	// Endpoint, when set, receives every request instead of
	// https://<bucket>.cos.<region>.myqcloud.com, as scheme://host[:port]
	// (a private endpoint, a proxy, or a test server). The Host header
	// still names the bucket.
	Endpoint string
	// HTTPClient carries the requests; nil means a client with sensible
	// transport timeouts. The client is copied, not changed.
	HTTPClient *http.Client
	// MaxAttempts is how often one request is tried when COS throttles
	// (429, 503 SlowDown) or fails (5xx, connection errors); 0 means
	// DefaultMaxAttempts.
	MaxAttempts int
	// RetryBase and RetryMax bound the exponential backoff between
	// attempts (with full jitter; a Retry-After header is honoured up to
	// RetryMax). Zero means the defaults.
	RetryBase, RetryMax time.Duration
	// AttemptTimeout bounds each attempt of a request, from connecting to
	// the last byte of the answer (a COS that accepts and never answers,
	// or stalls in the middle of a body); a timed-out attempt is retried
	// like a failed one, and the last is errors.Is errs.ErrUnavailable. 0
	// means DefaultCOSAttemptTimeout; raise it with PartSize on a slow
	// link.
	AttemptTimeout time.Duration
}

// COSClient talks to Tencent COS through cos-go-sdk-v5, with the SDK's
// CRC-64 checking of uploads on. It is safe for concurrent use. Printing
// it with any verb shows its region and endpoint, never its credentials.
type COSClient struct {
	// creds returns the credentials. A function keeps them out of reach
	// of fmt: a copy of the struct printed field by field (through
	// reflection, which Format cannot catch, with any verb) shows the
	// function's address, not the key.
	creds    func() Credentials
	region   string
	endpoint *url.URL
	hc       *http.Client
	attempts int
	base     time.Duration
	max      time.Duration
	timeout  time.Duration // of one attempt

	mu      sync.Mutex
	clients map[string]*cos.Client // by bucket and region
}

// NewCOSClient returns a client. It does no I/O.
func NewCOSClient(opt COSOptions) (*COSClient, error) {
	c := &COSClient{
		region:   opt.Region,
		attempts: opt.MaxAttempts,
		base:     opt.RetryBase,
		max:      opt.RetryMax,
		clients:  map[string]*cos.Client{},
	}
	var creds Credentials
	switch {
	case opt.Anonymous:
	case opt.Credentials.IsZero():
		creds = CredentialsFromEnv()
	default:
		creds = opt.Credentials
	}
	c.creds = func() Credentials { return creds }
	if (creds.SecretID == "") != (creds.SecretKey == "") {
		return nil, errors.New("storage: COS credentials need both a secret id and a secret key")
	}
	if c.region != "" && !cosRegion.MatchString(c.region) {
		return nil, fmt.Errorf("storage: COS region %q is not like ap-guangzhou", c.region)
	}
	if opt.Endpoint != "" {
		u, err := url.Parse(opt.Endpoint)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/"):
			return nil, fmt.Errorf("storage: COS endpoint %q is not scheme://host[:port]", redactUserinfo(opt.Endpoint))
		case u.User != nil:
			// COS requests are signed with the credentials; a user and
			// password in the URL would only end up in error messages.
			return nil, fmt.Errorf("storage: COS endpoint %q holds a user and password; COS requests are signed with COSOptions.Credentials, and a proxy's password belongs in the HTTPClient's transport", redactUserinfo(opt.Endpoint))
		}
		u.Path = ""
		c.endpoint = u
	}
	if c.attempts <= 0 {
		c.attempts = DefaultMaxAttempts
	}
	if c.base <= 0 {
		c.base = DefaultRetryBase
	}
	if c.max <= 0 {
		c.max = DefaultRetryMax
	}
	c.timeout = opt.AttemptTimeout
	if c.timeout <= 0 {
		c.timeout = DefaultCOSAttemptTimeout
	}
	var hc http.Client
	if opt.HTTPClient != nil {
		hc = *opt.HTTPClient
	} else {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 16
		t.ResponseHeaderTimeout = 2 * time.Minute
		hc.Transport = t
	}
	if !creds.IsZero() {
		inner := hc.Transport
		if inner == nil {
			inner = http.DefaultTransport
		}
		hc.Transport = &cos.AuthorizationTransport{
			SecretID: creds.SecretID, SecretKey: creds.SecretKey, SessionToken: creds.SessionToken,
			Transport: inner,
		}
	}
	// COS answers some errors with redirects; never follow them blindly.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.hc = &hc
	return c, nil
}

// String describes the client without its credentials: its region, its
// endpoint and the redacted Credentials.String.
func (c *COSClient) String() string {
	if c == nil {
		return "COSClient(nil)"
	}
	endpoint := ""
	if c.endpoint != nil {
		endpoint = c.endpoint.Redacted()
	}
	return fmt.Sprintf("COSClient{region:%s endpoint:%s credentials:%s}", c.region, endpoint, c.creds().String())
}

// GoString returns the same redacted text as String, for %#v.
func (c *COSClient) GoString() string { return c.String() }

// Format prints the redacted text of String for every verb (%v, %+v, %#v,
// %s, %q, %d, %x, …), so that no verb walks the struct's fields.
func (c *COSClient) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprintf(f, "%q", c.String())
		return
	}
	io.WriteString(f, c.String())
}

// redactUserinfo replaces what comes before the last '@' of a URL's
// authority (a user and password) with "[redacted]"; it works on strings
// that url.Parse rejects, too.
func redactUserinfo(s string) string {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return s
	}
	start := 0
	if i := strings.Index(s, "://"); i >= 0 && i < at {
		start = i + len("://")
	}
	return s[:start] + "[redacted]" + s[at:]
}

// object fills in the client's region.
func (c *COSClient) object(o COSObject) (COSObject, error) {
	if o.Region == "" {
		o.Region = c.region
	}
	switch {
	case o.Region == "":
		return o, fmt.Errorf("storage: no region for %s: set COSOptions.Region or use an https://<bucket>.cos.<region>.myqcloud.com URL", o.URI())
	case !cosRegion.MatchString(o.Region):
		return o, fmt.Errorf("storage: COS region %q is not like ap-guangzhou", o.Region)
	case !cosBucket.MatchString(o.Bucket):
		return o, fmt.Errorf("storage: bucket %q is not <name>-<appid>", o.Bucket)
	}
	return o, nil
}

// sdk returns the SDK client for an object's bucket.
func (c *COSClient) sdk(o COSObject) *cos.Client {
	id := o.Bucket + "@" + o.Region
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[id]; ok {
		return cl
	}
	u, _ := url.Parse(o.BucketURL())
	host := ""
	if c.endpoint != nil {
		host = u.Host
		u = c.endpoint
	}
	cl := cos.NewClient(&cos.BaseURL{BucketURL: u}, c.hc)
	cl.Host = host
	cl.Conf.EnableCRC = true
	cl.Conf.RetryOpt.Count = 1 // we retry, with backoff
	c.clients[id] = cl
	return cl
}

// do runs one COS request with retries on throttling and server errors,
// each attempt within the attempt timeout.
func (c *COSClient) do(ctx context.Context, fn func(ctx context.Context) (*cos.Response, error)) (*cos.Response, error) {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, c.timeout)
		resp, err := fn(actx)
		timedOut := actx.Err() != nil
		cancel()
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return resp, ctx.Err()
		}
		wait, retry := c.retryable(resp, err, attempt)
		if timedOut {
			retry = true
			err = errs.Unavailable("COS request", fmt.Errorf("no answer within %s (attempt %d of %d): %w", c.timeout, attempt, c.attempts, err))
		}
		if !retry || attempt >= c.attempts {
			return resp, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return resp, ctx.Err()
		case <-t.C:
		}
	}
}

// retryable says whether a failed request is worth another attempt, and
// after how long.
func (c *COSClient) retryable(resp *cos.Response, err error, attempt int) (time.Duration, bool) {
	backoff := c.base << min(attempt-1, 20)
	backoff = min(backoff, c.max)
	backoff = time.Duration(rand.Int64N(int64(backoff)) + 1) // full jitter
	status := 0
	var hr *http.Response
	if resp != nil && resp.Response != nil {
		hr = resp.Response
	}
	var er *cos.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		hr = er.Response
	}
	if hr != nil {
		status = hr.StatusCode
		if s := hr.Header.Get("Retry-After"); s != "" {
			if secs, perr := strconv.Atoi(s); perr == nil && secs >= 0 {
				backoff = min(time.Duration(secs)*time.Second, c.max)
			}
		}
	}
	switch {
	case status == http.StatusTooManyRequests || status >= 500:
		return backoff, true
	case er != nil && (er.Code == "SlowDown" || er.Code == "RequestTimeout"):
		return backoff, true
	case status >= 200 && status < 300:
		return backoff, true // e.g. a CRC mismatch or a cut-off body
	case status != 0:
		return 0, false // other 4xx: the request itself is wrong
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe") {
		return backoff, true
	}
	return 0, false
}

// cosError turns an SDK error into the package's typed errors: a missing
// object or bucket is a *errs.NotFoundError.
func cosError(op string, o COSObject, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("COS %s %s: %w", op, o.URI(), err)
	}
	var er *cos.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusNotFound:
			if er.Code == "NoSuchBucket" {
				return errs.NotFound("COS bucket", o.Bucket)
			}
			return errs.NotFound("COS object", o.URI())
		case http.StatusForbidden, http.StatusUnauthorized:
			return fmt.Errorf("COS %s %s: access denied (%s): check the credentials and the bucket's permissions: %w", op, o.URI(), er.Code, err)
		}
		return fmt.Errorf("COS %s %s: %d %s: %w", op, o.URI(), er.Response.StatusCode, er.Code, err)
	}
	return fmt.Errorf("COS %s %s: %w", op, o.URI(), err)
}

// ObjectInfo is what a HEAD request says about an object.
type ObjectInfo struct {
	Object       COSObject
	Size         int64
	ETag         string
	CRC64        string // COS's x-cos-hash-crc64ecma, decimal; "" when COS did not send it
	LastModified time.Time
}

// Stat returns an object's size and checksums with a HEAD request. A
// missing object (or bucket) is errors.Is(err, errs.ErrNotFound).
func (c *COSClient) Stat(ctx context.Context, obj COSObject) (ObjectInfo, error) {
	obj, err := c.object(obj)
	if err != nil {
		return ObjectInfo{}, err
	}
	cl := c.sdk(obj)
	resp, err := c.do(ctx, func(ctx context.Context) (*cos.Response, error) {
		return cl.Object.Head(ctx, obj.Key, nil)
	})
	if err != nil {
		return ObjectInfo{}, cosError("HEAD", obj, err)
	}
	h := resp.Header
	size, perr := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	if perr != nil {
		size = resp.ContentLength
	}
	info := ObjectInfo{Object: obj, Size: size, ETag: strings.Trim(h.Get("ETag"), `"`), CRC64: h.Get("x-cos-hash-crc64ecma")}
	if t, err := http.ParseTime(h.Get("Last-Modified")); err == nil {
		info.LastModified = t
	}
	return info, nil
}

// COSZIPInfo is what CheckZIP found out about a package in COS from its
// end records alone.
type COSZIPInfo struct {
	ObjectInfo
	Entries       uint64 // entries the central directory holds
	DirectorySize uint64 // bytes of the central directory
	ZIP64         bool
	BytesRead     int64 // bytes fetched with ranged GETs
}

// CheckZIP checks that an object in COS is a ZIP archive (J5) without
// downloading it: a HEAD for its size, then a ranged GET of its last
// ≤ 64 KiB + 22 bytes, which hold the end-of-central-directory record (a
// second small GET reaches a ZIP64 end record outside it). A package in
// COS has no 100 MB limit. A missing object is
// errors.Is(err, errs.ErrNotFound); a non-ZIP is errors.Is(err,
// errs.ErrInvalid), reported at field path "package.cos" with rule J5.
func (c *COSClient) CheckZIP(ctx context.Context, obj COSObject) (*COSZIPInfo, error) {
	info, _, _, err := c.checkZIP(ctx, obj, errs.NewPath("package").Child("cos"))
	if err != nil {
		return nil, err
	}
	return info, nil
}

func (c *COSClient) checkZIP(ctx context.Context, obj COSObject, p errs.Path) (*COSZIPInfo, zipEnd, *cosReaderAt, error) {
	info, err := c.Stat(ctx, obj)
	if err != nil {
		return nil, zipEnd{}, nil, err
	}
	obj = info.Object
	invalid := func(detail string) error {
		return errs.List{errs.Invalid(p, "J5", obj.URI(), detail)}.ToError()
	}
	if info.Size < eocdLen {
		return nil, zipEnd{}, nil, invalid(fmt.Sprintf("not a ZIP archive: %d bytes is too short for one", info.Size))
	}
	ra := &cosReaderAt{ctx: ctx, c: c, obj: obj, size: info.Size}
	n := min(info.Size, maxEOCDSearch)
	tail, err := ra.fetch(info.Size-n, int(n))
	if err != nil {
		return nil, zipEnd{}, nil, err
	}
	ra.keep(info.Size-n, tail)
	end, err := parseZIPTail(tail, info.Size-n, func(off int64, n int) ([]byte, error) {
		return ra.fetch(off, n)
	})
	if err != nil {
		return nil, zipEnd{}, nil, invalid(err.Error())
	}
	ra.dirStart = end.endOffset - int64(end.dirSize)
	out := &COSZIPInfo{ObjectInfo: info, Entries: end.entries, DirectorySize: end.dirSize, ZIP64: end.zip64, BytesRead: ra.read()}
	return out, end, ra, nil
}

// InspectZIP inspects a package in COS as InspectZIP does a local one
// (entries, safety, the entrypoint's script, J6 warnings), reading only
// its end records and central directory with ranged GETs (plus symlink
// targets). A central directory over MaxCOSDirectory is not read: the
// report then holds what the end records say and a warning.
func (c *COSClient) InspectZIP(ctx context.Context, obj COSObject, opt InspectOptions) (*ZIPReport, error) {
	if opt.Path == "" {
		opt.Path = errs.NewPath("package").Child("cos")
	}
	info, end, ra, err := c.checkZIP(ctx, obj, opt.Path)
	if err != nil {
		return nil, err
	}
	if end.dirSize > MaxCOSDirectory {
		return &ZIPReport{Size: info.Size, ZIP64: end.zip64, BytesRead: ra.read(), Warnings: []ZIPWarning{{
			Rule: "J5", Message: fmt.Sprintf("the central directory is %s; entries and entrypoint were not checked", humanBytes(int64(end.dirSize)))}}}, nil
	}
	rep, err := InspectZIPReaderContext(ctx, ra, info.Size, opt)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("inspecting %s: %w", obj.URI(), ctx.Err())
	}
	if rep != nil {
		rep.BytesRead = ra.read()
	}
	return rep, err
}

// cosReaderAt reads an object with ranged GETs, a block at a time, keeping
// the last block and the archive's tail. It lives for one call.
type cosReaderAt struct {
	ctx  context.Context
	c    *COSClient
	obj  COSObject
	size int64
	// dirStart is where the central directory starts: reads from there on
	// fetch a whole block ahead, since archive/zip reads it in small pieces.
	dirStart int64

	mu      sync.Mutex
	n       int64
	tail    []byte
	tailOff int64
	blk     []byte
	blkOff  int64
}

func (r *cosReaderAt) keep(off int64, b []byte) {
	r.mu.Lock()
	r.tail, r.tailOff = b, off
	r.mu.Unlock()
}

func (r *cosReaderAt) read() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (r *cosReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := p
	if rest := r.size - off; int64(len(want)) > rest {
		want = want[:rest]
	}
	r.mu.Lock()
	for _, c := range []struct {
		b   []byte
		off int64
	}{{r.tail, r.tailOff}, {r.blk, r.blkOff}} {
		if c.b != nil && off >= c.off && off+int64(len(want)) <= c.off+int64(len(c.b)) {
			n := copy(want, c.b[off-c.off:])
			r.mu.Unlock()
			return r.eof(n, len(p))
		}
	}
	r.mu.Unlock()
	n := int64(len(want))
	if off >= r.dirStart {
		n = min(max(n, cosReadBlock), r.size-off)
	}
	b, err := r.fetch(off, int(n))
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.blk, r.blkOff = b, off
	r.mu.Unlock()
	return r.eof(copy(want, b), len(p))
}

func (r *cosReaderAt) eof(n, asked int) (int, error) {
	if n < asked {
		return n, io.EOF
	}
	return n, nil
}

// fetch reads n bytes at off with one ranged GET (retried).
func (r *cosReaderAt) fetch(off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 || off+int64(n) > r.size {
		return nil, fmt.Errorf("storage: read of %d bytes at %d is outside %s (%d bytes)", n, off, r.obj.URI(), r.size)
	}
	if n == 0 {
		return nil, nil
	}
	cl := r.c.sdk(r.obj)
	buf := make([]byte, n)
	_, err := r.c.do(r.ctx, func(ctx context.Context) (*cos.Response, error) {
		resp, err := cl.Object.Get(ctx, r.obj.Key, &cos.ObjectGetOptions{
			Range: fmt.Sprintf("bytes=%d-%d", off, off+int64(n)-1),
		})
		if err != nil {
			return resp, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusPartialContent && !(resp.StatusCode == http.StatusOK && off == 0 && int64(n) == r.size) {
			return resp, fmt.Errorf("COS answered a ranged GET with %d, not 206 Partial Content", resp.StatusCode)
		}
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			return resp, err
		}
		return resp, nil
	})
	if err != nil {
		return nil, cosError("GET", r.obj, err)
	}
	r.mu.Lock()
	r.n += int64(n)
	r.mu.Unlock()
	return buf, nil
}

// WorkingDirOptions say how a run reaches its package.
type WorkingDirOptions struct {
	// Expiry is how long a presigned URL stays valid; 0 means
	// DefaultWorkingDirExpiry (an hour). It must cover every download Ray
	// makes: each node fetches the package when it first starts a worker
	// of the job, for as long as the job runs (an autoscaled node, hours
	// after the submit). The URL grants the package to whoever reads it.
	Expiry time.Duration
	// ClusterCredentials says the cluster reads COS with credentials of
	// its own; the working_dir is then the object's s3:// URI, not a URL
	// that carries a signature: Ray reads it through COS's S3-compatible
	// endpoint (its s3 protocol, boto3 and smart_open in the image) when
	// the cluster sets AWS_ENDPOINT_URL_S3 to
	// https://cos.<region>.myqcloud.com and AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY (from a Secret). Ray knows no cos:// protocol.
	ClusterCredentials bool
	// Scheme is the URI scheme used with ClusterCredentials: "s3" (the
	// default, s3://bucket/key). "cos" is refused: Ray would refuse it.
	Scheme string
}

// WorkingDir returns what a run puts in runtime_env.working_dir for a
// package in COS: a presigned GET URL valid for opt.Expiry, or with
// opt.ClusterCredentials the object's s3:// URI. The URL carries a
// signature (and, for temporary credentials, their session token, as COS
// requires), never the secret key.
func (c *COSClient) WorkingDir(ctx context.Context, obj COSObject, opt WorkingDirOptions) (string, error) {
	if opt.ClusterCredentials {
		switch opt.Scheme {
		case "", "s3":
			return "s3://" + obj.Bucket + "/" + obj.Key, nil
		case "cos":
			return "", errors.New("storage: Ray cannot fetch a cos:// working_dir (its protocols are https, s3, gs, gcs, file: protocol.py); use the s3 scheme")
		}
		return "", fmt.Errorf("storage: working_dir scheme %q is not s3", opt.Scheme)
	}
	if opt.Expiry < 0 {
		return "", fmt.Errorf("storage: a presigned URL's expiry must be positive, not %v", opt.Expiry)
	}
	if opt.Expiry == 0 {
		opt.Expiry = DefaultWorkingDirExpiry
	}
	creds := c.creds()
	if creds.IsZero() {
		return "", errors.New("storage: presigning a working_dir URL needs COS credentials (COSOptions.Credentials or TENCENTCLOUD_SECRET_ID/KEY)")
	}
	obj, err := c.object(obj)
	if err != nil {
		return "", err
	}
	// A nil *PresignedURLOptions in the interface would be dereferenced.
	var popt any
	if creds.SessionToken != "" {
		popt = &cos.PresignedURLOptions{Query: &url.Values{"x-cos-security-token": {creds.SessionToken}}}
	}
	u, err := c.sdk(obj).Object.GetPresignedURL(ctx, http.MethodGet, obj.Key, creds.SecretID, creds.SecretKey, opt.Expiry, popt)
	if err != nil {
		return "", fmt.Errorf("storage: presign %s: %w", obj.URI(), err)
	}
	return u.String(), nil
}

// CheckPackage checks a job package wherever it is (J5): a local file
// with InspectZIP, an object in COS with c.InspectZIP (c may be nil for a
// local package). Problems with the reference itself are reported first,
// as Package.Validate does.
func CheckPackage(ctx context.Context, c *COSClient, pkg Package, opt InspectOptions) (*ZIPReport, error) {
	fp := opt.Path
	if fp == "" {
		fp = errs.NewPath("package")
	}
	if l := pkg.Validate(fp); len(l) > 0 {
		return nil, l.ToError()
	}
	if pkg.Local != "" {
		opt.Path = fp.Child("local")
		return InspectZIPContext(ctx, pkg.Local, opt)
	}
	if c == nil {
		return nil, errors.New("storage: checking a package in COS needs a COSClient")
	}
	obj, _ := ParseCOSURL(pkg.COS) // valid: checked above
	opt.Path = fp.Child("cos")
	return c.InspectZIP(ctx, obj, opt)
}
