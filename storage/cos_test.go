package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cos "github.com/tencentyun/cos-go-sdk-v5"

	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/errs"
)

const testBucket = cosfake.DefaultBucket

var testCreds = Credentials{SecretID: "AKIDtestsecretid0000", SecretKey: "test-secret-key-do-not-log"}

func newTestClient(t testing.TB, srv *cosfake.Server, mod ...func(*COSOptions)) *COSClient {
	t.Helper()
	opt := COSOptions{
		Credentials: testCreds,
		Region:      cosfake.DefaultRegion,
		Endpoint:    srv.URL,
		RetryBase:   time.Millisecond,
		RetryMax:    5 * time.Millisecond,
	}
	for _, m := range mod {
		m(&opt)
	}
	c, err := NewCOSClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func obj(key string) COSObject {
	return COSObject{Bucket: testBucket, AppID: "1250000000", Key: key}
}

func TestCOSCheckZIP(t *testing.T) {
	t.Parallel()
	srv := cosfake.New(t)
	c := newTestClient(t, srv)
	ctx := context.Background()
	small := buildZIP(t, simple...)
	big := buildZIP(t, entry{name: "main.py", body: "x"}, entry{name: "blob", size: 3 << 20})
	for key, data := range map[string][]byte{
		"small.zip":    small,
		"big.zip":      big,
		"zip64.zip":    toZIP64(t, big),
		"text.zip":     []byte(strings.Repeat("not a zip ", 100)),
		"tiny.zip":     []byte("PK"),
		"trunc.zip":    big[:len(big)-10],
		"badoff.zip":   withDirOffset(small, 0x7FFFFFF0),
		"nested/a.zip": small,
	} {
		if err := srv.PutObject(testBucket, key, data); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		key      string
		entries  uint64
		zip64    bool
		invalid  string // substring of the error when the object is no ZIP
		notFound bool
	}{
		{key: "small.zip", entries: uint64(len(simple))},
		{key: "nested/a.zip", entries: uint64(len(simple))},
		{key: "big.zip", entries: 2},
		{key: "zip64.zip", entries: 2, zip64: true},
		{key: "text.zip", invalid: "end-of-central-directory"},
		{key: "tiny.zip", invalid: "too short"},
		{key: "trunc.zip", invalid: "end-of-central-directory"},
		{key: "badoff.zip", invalid: "central directory"},
		{key: "missing.zip", notFound: true},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			info, err := c.CheckZIP(ctx, obj(tc.key))
			switch {
			case tc.notFound:
				var nf *errs.NotFoundError
				if !errors.Is(err, errs.ErrNotFound) || !errors.As(err, &nf) || !strings.Contains(nf.ID, tc.key) {
					t.Fatalf("err = %v, want ErrNotFound naming the object", err)
				}
				return
			case tc.invalid != "":
				if !errors.Is(err, errs.ErrInvalid) || fieldAt(err, "package.cos") == nil || !strings.Contains(err.Error(), tc.invalid) {
					t.Fatalf("err = %v, want ErrInvalid at package.cos mentioning %q", err, tc.invalid)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if info.Entries != tc.entries || info.ZIP64 != tc.zip64 || info.CRC64 == "" {
				t.Fatalf("info = %+v", info)
			}
			// Only the tail was fetched, never the 3 MiB object.
			if info.BytesRead > maxEOCDSearch || info.BytesRead == 0 {
				t.Fatalf("read %d bytes of %d", info.BytesRead, info.Size)
			}
		})
	}
}

func TestCOSCheckZIPRequests(t *testing.T) {
	t.Parallel()
	srv := cosfake.New(t)
	c := newTestClient(t, srv)
	data := buildZIP(t, entry{name: "main.py", body: "x"}, entry{name: "blob", size: 2 << 20})
	if err := srv.PutObject(testBucket, "p.zip", data); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CheckZIP(context.Background(), obj("p.zip")); err != nil {
		t.Fatal(err)
	}
	if h, g := srv.Count(cosfake.OpHeadObject), srv.Count(cosfake.OpGetObject); h != 1 || g != 1 {
		t.Fatalf("HEAD %d, GET %d; want one of each", h, g)
	}
}

func TestCOSInspectZIP(t *testing.T) {
	t.Parallel()
	srv := cosfake.New(t)
	c := newTestClient(t, srv)
	ctx := context.Background()
	// Many entries, so that the directory spans more than one read block.
	es := []entry{{name: "main.py", body: "x"}, {name: "big.dat", size: 2 << 20}, {name: "l", body: "main.py", link: true}}
	for i := range 15000 {
		es = append(es, entry{name: "src/m" + strings.Repeat("x", i%40) + "/" + strconv.Itoa(i) + ".py", store: true})
	}
	good := buildZIP(t, es...)
	evil := buildZIP(t, entry{name: "main.py"}, entry{name: "out", body: "../../../etc/passwd", link: true})
	for k, d := range map[string][]byte{"good.zip": good, "evil.zip": evil} {
		if err := srv.PutObject(testBucket, k, d); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := c.InspectZIP(ctx, obj("good.zip"), InspectOptions{Entrypoint: "python main.py"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Entries) != len(es) || rep.EntrypointFile != "main.py" {
		t.Fatalf("entries %d, entrypoint %q", len(rep.Entries), rep.EntrypointFile)
	}
	// The local headers are read (in a few coalesced GETs), the large
	// entry's data is not.
	if rep.BytesRead > int64(len(good))-2<<20 || srv.Count(cosfake.OpGetObject) > 12 {
		t.Fatalf("read %d of %d bytes in %d GETs", rep.BytesRead, len(good), srv.Count(cosfake.OpGetObject))
	}
	t.Logf("read %d of %d bytes in %d GETs", rep.BytesRead, len(good), srv.Count(cosfake.OpGetObject))
	if _, err := c.InspectZIP(ctx, obj("good.zip"), InspectOptions{Entrypoint: "python train.py"}); fieldAt(err, "entrypoint") == nil {
		t.Fatalf("err = %v, want an entrypoint error", err)
	}
	if _, err := c.InspectZIP(ctx, obj("evil.zip"), InspectOptions{}); !errors.Is(err, errs.ErrInvalid) || fieldAt(err, "package.cos") == nil {
		t.Fatalf("err = %v, want ErrInvalid at package.cos", err)
	}
}

func TestCheckPackage(t *testing.T) {
	t.Parallel()
	srv := cosfake.New(t)
	c := newTestClient(t, srv)
	data := buildZIP(t, simple...)
	if err := srv.PutObject(testBucket, "pkgs/job.zip", data); err != nil {
		t.Fatal(err)
	}
	local := writeTemp(t, "job.zip", data)
	ctx := context.Background()
	opt := InspectOptions{Entrypoint: "python main.py"}
	for _, p := range []Package{LocalPackage(local), COSPackage("cos://" + testBucket + "/pkgs/job.zip")} {
		if rep, err := CheckPackage(ctx, c, p, opt); err != nil || rep.EntrypointFile != "main.py" {
			t.Fatalf("%v: rep=%v err=%v", p, rep, err)
		}
	}
	_, err := CheckPackage(ctx, c, COSPackage("cos://"+testBucket+"/pkgs/none.zip"), opt)
	if !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	_, err = CheckPackage(ctx, c, Package{}, opt)
	if fieldAt(err, "package") == nil {
		t.Fatalf("err = %v, want a required package", err)
	}
}

func TestCOSRetries(t *testing.T) {
	t.Parallel()
	heads := func(r *http.Request) bool { return r.Method == http.MethodHead }
	cases := []struct {
		name   string
		fail   int
		status int
		code   string
		ok     bool
	}{
		{"503 SlowDown then OK", 2, http.StatusServiceUnavailable, "SlowDown", true},
		{"500 then OK", 1, http.StatusInternalServerError, "InternalError", true},
		{"429 then OK", 3, http.StatusTooManyRequests, "SlowDown", true},
		{"always 503", 100, http.StatusServiceUnavailable, "SlowDown", false},
		{"403 is not retried", 1, http.StatusForbidden, "AccessDenied", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			attempts := &counter{match: heads}
			srv := cosfake.New(t,
				cosfake.WithMiddleware(cosfake.FailFirst(tc.fail, tc.status, tc.code, heads)),
				cosfake.WithMiddleware(attempts.wrap))
			c := newTestClient(t, srv, func(o *COSOptions) { o.MaxAttempts = 5 })
			if err := srv.PutObject(testBucket, "a.zip", buildZIP(t, simple...)); err != nil {
				t.Fatal(err)
			}
			_, err := c.Stat(context.Background(), obj("a.zip"))
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v", err)
			}
			want := min(tc.fail+1, 5)
			if tc.status == http.StatusForbidden {
				want = 1
				if !strings.Contains(err.Error(), "access denied") {
					t.Fatalf("err = %v", err)
				}
			}
			if got := attempts.count(); got != want {
				t.Fatalf("%d attempts, want %d", got, want)
			}
			if reached := srv.Count(cosfake.OpHeadObject); (reached == 1) != tc.ok {
				t.Fatalf("%d HEADs reached the fake", reached)
			}
		})
	}
}

func TestWorkingDir(t *testing.T) {
	t.Parallel()
	srv := cosfake.New(t)
	data := buildZIP(t, simple...)
	if err := srv.PutObject(testBucket, "pkgs/job.zip", data); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := obj("pkgs/job.zip")

	c := newTestClient(t, srv)
	u, err := c.WorkingDir(ctx, o, WorkingDirOptions{Expiry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := pu.Query()
	if pu.Path != "/pkgs/job.zip" || q.Get("q-sign-algorithm") != "sha1" || q.Get("q-signature") == "" || strings.Contains(u, testCreds.SecretKey) {
		t.Fatalf("presigned URL %s", u)
	}
	// The validity window is the one asked for.
	var start, end int64
	if _, err := fmt.Sscanf(q.Get("q-sign-time"), "%d;%d", &start, &end); err != nil || end-start != 3600 {
		t.Fatalf("q-sign-time %q", q.Get("q-sign-time"))
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	got.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("GET presigned: %d, %d bytes", resp.StatusCode, got.Len())
	}

	tmp := newTestClient(t, srv, func(o *COSOptions) { o.Credentials.SessionToken = "tok123" })
	u, err = tmp.WorkingDir(ctx, o, WorkingDirOptions{})
	if err != nil || !strings.Contains(u, "x-cos-security-token=tok123") {
		t.Fatalf("temporary credentials: %s, %v", u, err)
	}
	// The default validity is an hour, not a day: the URL sits in the
	// RayJob for anyone who reads it.
	if pu, err = url.Parse(u); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscanf(pu.Query().Get("q-sign-time"), "%d;%d", &start, &end); err != nil || end-start != 3600 {
		t.Fatalf("default q-sign-time %q, want an hour", pu.Query().Get("q-sign-time"))
	}

	// With the cluster's own credentials: Ray's s3 protocol, never cos://,
	// which Ray refuses (protocol.py knows no cos).
	for scheme, want := range map[string]string{"": "s3://" + testBucket + "/pkgs/job.zip", "s3": "s3://" + testBucket + "/pkgs/job.zip", "cos": "", "gs": ""} {
		u, err := c.WorkingDir(ctx, o, WorkingDirOptions{ClusterCredentials: true, Scheme: scheme})
		if (want == "") != (err != nil) || u != want {
			t.Errorf("scheme %q: %q, %v", scheme, u, err)
		}
	}
	if _, err := c.WorkingDir(ctx, o, WorkingDirOptions{Expiry: -time.Second}); err == nil {
		t.Error("negative expiry accepted")
	}
	anon := newTestClient(t, srv, func(o *COSOptions) { o.Anonymous = true })
	if _, err := anon.WorkingDir(ctx, o, WorkingDirOptions{}); err == nil {
		t.Error("presigned without credentials")
	}
}

func TestNewCOSClientOptions(t *testing.T) {
	for _, opt := range []COSOptions{
		{Credentials: Credentials{SecretID: "only-id"}},
		{Region: "Guangzhou"},
		{Endpoint: "ftp://x"},
		{Endpoint: "http://host/path"},
	} {
		if _, err := NewCOSClient(opt); err == nil {
			t.Errorf("%+v accepted", opt)
		}
	}
	c, err := NewCOSClient(COSOptions{Credentials: testCreds, Region: "ap-shanghai"})
	if err != nil {
		t.Fatal(err)
	}
	if s := c.String(); strings.Contains(s, testCreds.SecretKey) {
		t.Fatalf("String leaks the key: %s", s)
	}
	if _, err := c.Stat(context.Background(), COSObject{Bucket: "x-1250000000", Key: "k"}); err == nil {
		t.Fatal("a bucket in the client's region")
	}
}

// listUploads returns the multipart uploads in progress in the bucket.
func listUploads(t testing.TB, srv *cosfake.Server) []string {
	t.Helper()
	res, _, err := srv.SDKClient(testBucket, nil).Bucket.ListMultipartUploads(context.Background(), &cos.ListMultipartUploadsOptions{})
	// gofakes3 answers NoSuchUpload for a bucket that never had one.
	if er, ok := cos.IsCOSError(err); ok && er.Code == "NoSuchUpload" {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, u := range res.Uploads {
		ids = append(ids, u.Key+"#"+u.UploadID)
	}
	return ids
}

func writeZIPFile(t testing.TB, size int) (string, []byte) {
	t.Helper()
	data := buildZIP(t, entry{name: "main.py", body: "print(1)"}, entry{name: "payload.dat", size: size})
	return writeTemp(t, "pkg.zip", data), data
}

// counter is middleware that counts the requests matching match.
type counter struct {
	mu    sync.Mutex
	n     int
	match func(*http.Request) bool
}

func (c *counter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.match == nil || c.match(r) {
			c.mu.Lock()
			c.n++
			c.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
