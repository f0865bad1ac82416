package storage

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc/errs"
)

// A COS that accepts a request and never answers it, or stalls in the
// middle of a body, costs each attempt its timeout: the call fails with
// ErrUnavailable after the attempts, even with a caller's context that
// has no deadline and an HTTP client with no timeout of its own.
func TestCOSAttemptTimeout(t *testing.T) {
	const size = 1 << 20
	cases := []struct {
		name string
		// serve answers a request; it returns when the request is done.
		serve func(w http.ResponseWriter, r *http.Request)
		call  func(ctx context.Context, c *COSClient) error
	}{
		{"HEAD never answered", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			func(ctx context.Context, c *COSClient) error { _, err := c.Stat(ctx, obj("job.zip")); return err }},
		{"GET stalls mid-body", func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodHead {
				w.Header().Set("Content-Length", strconv.Itoa(size))
				w.WriteHeader(http.StatusOK)
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(1<<16))
			w.Header().Set("Content-Range", "bytes 0-65535/"+strconv.Itoa(size))
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write(make([]byte, 100))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, func(ctx context.Context, c *COSClient) error { _, err := c.CheckZIP(ctx, obj("job.zip")); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				tc.serve(w, r)
			}))
			defer srv.Close()
			c, err := NewCOSClient(COSOptions{Credentials: testCreds, Region: "ap-guangzhou", Endpoint: srv.URL,
				HTTPClient: &http.Client{}, MaxAttempts: 2, RetryBase: time.Millisecond, RetryMax: time.Millisecond,
				AttemptTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- tc.call(context.Background(), c) }()
			select {
			case err := <-done:
				if !errors.Is(err, errs.ErrUnavailable) {
					t.Errorf("%v, want ErrUnavailable", err)
				}
				t.Logf("after %v and %d requests: %v", time.Since(start).Round(time.Millisecond), calls.Load(), err)
			case <-time.After(30 * time.Second):
				t.Fatal("no answer after 30s")
			}
		})
	}
}
