package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/errs"
)

// small multipart settings keep the tests fast.
func smallParts(o UploadOptions) UploadOptions {
	o.Bucket = testBucket
	o.MultipartThreshold = MinPartSize
	o.PartSize = MinPartSize
	o.Concurrency = 2
	return o
}

func TestUploadPackage(t *testing.T) {
	t.Parallel()
	srv := cosfake.New(t)
	c := newTestClient(t, srv)
	ctx := context.Background()
	file, data := writeZIPFile(t, 64<<10)
	sum := sha256.Sum256(data)

	var reports []UploadProgress
	res, err := c.UploadPackage(ctx, file, UploadOptions{
		Bucket:   testBucket,
		Inspect:  InspectOptions{Entrypoint: "python main.py"},
		Progress: func(p UploadProgress) { reports = append(reports, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	wantKey := DefaultPackagePrefix + hex.EncodeToString(sum[:]) + ".zip"
	if res.Object.Key != wantKey || res.Skipped || res.Parts != 0 || res.Size != int64(len(data)) || res.URI() != "cos://"+testBucket+"/"+wantKey {
		t.Fatalf("result = %+v", res)
	}
	if res.Report == nil || res.Report.EntrypointFile != "main.py" {
		t.Fatalf("report = %+v", res.Report)
	}
	got, err := srv.Object(testBucket, wantKey)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stored object differs (%v)", err)
	}
	if srv.Count(cosfake.OpPutObject) != 1 || srv.Count(cosfake.OpHeadObject) != 1 {
		t.Fatalf("requests: %v", srv.Counts())
	}
	if last := reports[len(reports)-1]; last.Phase != PhaseDone || last.Done != last.Total {
		t.Fatalf("last progress %+v", last)
	}
	// The uploaded reference checks out as a COS package.
	if _, err := CheckPackage(ctx, c, COSPackage(res.URI()), InspectOptions{Entrypoint: "python main.py"}); err != nil {
		t.Fatal(err)
	}

	// The same content again: one HEAD, no PUT.
	srv.ResetCounts()
	again, err := c.UploadPackage(ctx, file, UploadOptions{Bucket: testBucket})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Skipped || again.Object != res.Object {
		t.Fatalf("second upload = %+v", again)
	}
	if n := srv.Counts(); n[cosfake.OpPutObject] != 0 || n[cosfake.OpUploadPart] != 0 || n[cosfake.OpHeadObject] != 1 {
		t.Fatalf("second upload made requests %v", n)
	}
}

func TestUploadPackageMultipart(t *testing.T) {
	t.Parallel()
	srv := cosfake.New(t)
	c := newTestClient(t, srv)
	file, data := writeZIPFile(t, 3*MinPartSize+MinPartSize/2)
	var mu sync.Mutex
	var last UploadProgress
	uploading := 0
	res, err := c.UploadPackage(context.Background(), file, smallParts(UploadOptions{
		Prefix: "team/a/",
		Progress: func(p UploadProgress) {
			mu.Lock()
			defer mu.Unlock()
			if p.Phase == PhaseUploading {
				uploading++
			}
			last = p
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Parts != 4 || srv.Count(cosfake.OpUploadPart) != 4 || srv.Count(cosfake.OpCompleteUpload) != 1 || srv.Count(cosfake.OpPutObject) != 0 {
		t.Fatalf("parts %d, requests %v", res.Parts, srv.Counts())
	}
	if !strings.HasPrefix(res.Object.Key, "team/a/") {
		t.Fatalf("key %s", res.Object.Key)
	}
	got, err := srv.Object(testBucket, res.Object.Key)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stored object differs (%v)", err)
	}
	if uploading == 0 || last.Phase != PhaseDone || last.Done != int64(len(data)) {
		t.Fatalf("progress: %d uploading reports, last %+v", uploading, last)
	}
	if ups := listUploads(t, srv); len(ups) != 0 {
		t.Fatalf("uploads left: %v", ups)
	}
}

func TestUploadPackageRetries(t *testing.T) {
	t.Parallel()
	isPart := func(r *http.Request) bool { return r.Method == http.MethodPut && r.URL.Query().Get("uploadId") != "" }
	isPut := func(r *http.Request) bool { return r.Method == http.MethodPut && r.URL.Query().Get("uploadId") == "" }
	isInit := func(r *http.Request) bool {
		_, ok := r.URL.Query()["uploads"]
		return ok && r.Method == http.MethodPost
	}
	isComplete := func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Query().Get("uploadId") != "" }
	cases := []struct {
		name      string
		match     func(*http.Request) bool
		fail      int
		status    int
		code      string
		multipart bool
		ok        bool
	}{
		{"PUT 503 SlowDown twice", isPut, 2, http.StatusServiceUnavailable, "SlowDown", false, true},
		{"PUT 500 once", isPut, 1, http.StatusInternalServerError, "InternalError", false, true},
		{"part 503 then OK", isPart, 2, http.StatusServiceUnavailable, "SlowDown", true, true},
		{"part 429 then OK", isPart, 1, http.StatusTooManyRequests, "SlowDown", true, true},
		{"initiate 500 then OK", isInit, 1, http.StatusInternalServerError, "InternalError", true, true},
		{"complete 503 then OK", isComplete, 1, http.StatusServiceUnavailable, "SlowDown", true, true},
		{"parts keep failing", isPart, 1000, http.StatusInternalServerError, "InternalError", true, false},
		{"PUT keeps failing", isPut, 1000, http.StatusServiceUnavailable, "SlowDown", false, false},
		{"part refused", isPart, 1, http.StatusBadRequest, "InvalidArgument", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := cosfake.New(t, cosfake.WithMiddleware(cosfake.FailFirst(tc.fail, tc.status, tc.code, tc.match)))
			c := newTestClient(t, srv)
			size := 32 << 10
			if tc.multipart {
				size = 2*MinPartSize + 1000
			}
			file, data := writeZIPFile(t, size)
			res, err := c.UploadPackage(context.Background(), file, smallParts(UploadOptions{}))
			if !tc.ok {
				if err == nil {
					t.Fatal("upload succeeded")
				}
				if ups := listUploads(t, srv); len(ups) != 0 {
					t.Fatalf("uploads left after a failure: %v", ups)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := srv.Object(testBucket, res.Object.Key)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("stored object differs (%v)", err)
			}
		})
	}
}

func TestUploadPackageCancelAborts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	var mu sync.Mutex
	parts := 0
	hold := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && r.URL.Query().Get("uploadId") != "" {
				mu.Lock()
				parts++
				n := parts
				mu.Unlock()
				if n >= 2 {
					// The second part hangs until the client gives up.
					// The server notices the client going away only once it
					// has read the body.
					once.Do(cancel)
					io.Copy(io.Discard, r.Body)
					select {
					case <-r.Context().Done():
					case <-time.After(10 * time.Second):
						t.Error("the client did not go away")
					}
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
	srv := cosfake.New(t, cosfake.WithMiddleware(hold))
	c := newTestClient(t, srv)
	file, _ := writeZIPFile(t, 4*MinPartSize)
	opt := smallParts(UploadOptions{})
	opt.Concurrency = 1
	_, err := c.UploadPackage(ctx, file, opt)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if srv.Count(cosfake.OpAbortUpload) != 1 {
		t.Fatalf("requests: %v", srv.Counts())
	}
	if ups := listUploads(t, srv); len(ups) != 0 {
		t.Fatalf("uploads left after cancel: %v", ups)
	}
	if srv.Count(cosfake.OpCompleteUpload) != 0 {
		t.Fatal("completed after cancel")
	}
}

func TestUploadPackageRefusesBadInput(t *testing.T) {
	t.Parallel()
	srv := cosfake.New(t)
	c := newTestClient(t, srv)
	notZIP := writeTemp(t, "x.zip", []byte(strings.Repeat("hello ", 100)))
	evil := writeTemp(t, "evil.zip", buildZIP(t, entry{name: "main.py"}, entry{name: "../x", body: "x"}))
	good, _ := writeZIPFile(t, 1000)
	cases := []struct {
		name, file string
		opt        UploadOptions
		path       string
	}{
		{"not a zip", notZIP, UploadOptions{Bucket: testBucket}, "package.local"},
		{"unsafe entry", evil, UploadOptions{Bucket: testBucket}, "package.local"},
		{"missing entrypoint", good, UploadOptions{Bucket: testBucket, Inspect: InspectOptions{Entrypoint: "python train.py"}}, "entrypoint"},
		{"missing file", good + ".nope", UploadOptions{Bucket: testBucket}, "package.local"},
		{"no bucket", good, UploadOptions{}, "upload.bucket"},
		{"bad bucket", good, UploadOptions{Bucket: "Jobs"}, "upload.bucket"},
		{"bad prefix", good, UploadOptions{Bucket: testBucket, Prefix: "../x/"}, "upload.prefix"},
		{"tiny parts", good, UploadOptions{Bucket: testBucket, PartSize: 1024}, "upload.partSize"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.UploadPackage(context.Background(), tc.file, tc.opt)
			if !errors.Is(err, errs.ErrInvalid) || fieldAt(err, tc.path) == nil {
				t.Fatalf("err = %v, want ErrInvalid at %s", err, tc.path)
			}
		})
	}
	if n := srv.Counts(); len(n) != 0 {
		t.Fatalf("bad input reached COS: %v", n)
	}
}
