package cosfake_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	cos "github.com/tencentyun/cos-go-sdk-v5"

	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/storage"
)

var testCreds = storage.Credentials{SecretID: "AKIDcosfaketest", SecretKey: "cosfake-test-secret"}

const (
	testKey  = "pkgs/job.zip"
	testData = "the package's bytes"
)

// newClient returns a storage client for srv that signs its requests.
func newClient(t *testing.T, srv *cosfake.Server, creds storage.Credentials) *storage.COSClient {
	t.Helper()
	c, err := storage.NewCOSClient(storage.COSOptions{Endpoint: srv.URL, HTTPClient: srv.Client(),
		Credentials: creds, Region: cosfake.DefaultRegion, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testObject() storage.COSObject {
	return storage.COSObject{Bucket: cosfake.DefaultBucket, AppID: "1250000000", Key: testKey}
}

// get fetches u with srv's client and returns the status, the body, and
// the error code and message of an XML error body.
func get(t *testing.T, srv *cosfake.Server, u string) (int, string, string, string) {
	t.Helper()
	resp, err := srv.Client().Get(u)
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET: reading the body: %v", err)
	}
	var e struct{ Code, Message string }
	if resp.StatusCode != http.StatusOK {
		if err := xml.Unmarshal(body, &e); err != nil {
			t.Fatalf("GET: %d with a body that is not COS's XML error: %v: %q", resp.StatusCode, err, body)
		}
	}
	return resp.StatusCode, string(body), e.Code, e.Message
}

func TestPresignedURLExpiry(t *testing.T) {
	t.Parallel()
	withToken := testCreds
	withToken.SessionToken = "temporary-session-token"
	// sdkMerged presigns with the SDK's SignMerged option: the whole
	// signature in one "sign" parameter.
	sdkMerged := func(t *testing.T, srv *cosfake.Server, expiry time.Duration) string {
		u, err := srv.SDKClient(cosfake.DefaultBucket, nil).Object.GetPresignedURL(context.Background(), http.MethodGet,
			testKey, testCreds.SecretID, testCreds.SecretKey, expiry, &cos.PresignedURLOptions{SignMerged: true})
		if err != nil {
			t.Fatal(err)
		}
		return u.String()
	}
	for _, tc := range []struct {
		name    string
		tls     bool
		creds   storage.Credentials
		presign func(*testing.T, *cosfake.Server, time.Duration) string // nil: storage's WorkingDir
		expiry  time.Duration
		advance time.Duration
		expired bool
	}{
		{name: "1h URL at once", tls: true, creds: testCreds, expiry: time.Hour},
		{name: "1h URL after 2h", tls: true, creds: testCreds, expiry: time.Hour, advance: 2 * time.Hour, expired: true},
		{name: "3h URL after 2h", tls: true, creds: testCreds, expiry: 3 * time.Hour, advance: 2 * time.Hour},
		{name: "1h URL after 59m", tls: true, creds: testCreds, expiry: time.Hour, advance: 59 * time.Minute},
		{name: "1h URL after 1h1m", tls: true, creds: testCreds, expiry: time.Hour, advance: time.Hour + time.Minute, expired: true},
		{name: "URL signed in the server's future", tls: true, creds: testCreds, expiry: time.Hour, advance: -time.Hour, expired: true},
		{name: "session token 1h URL at once", tls: true, creds: withToken, expiry: time.Hour},
		{name: "session token 1h URL after 2h", tls: true, creds: withToken, expiry: time.Hour, advance: 2 * time.Hour, expired: true},
		{name: "plain HTTP 1h URL after 2h", creds: testCreds, expiry: time.Hour, advance: 2 * time.Hour, expired: true},
		{name: "SignMerged 1h URL at once", tls: true, presign: sdkMerged, expiry: time.Hour},
		{name: "SignMerged 1h URL after 2h", tls: true, presign: sdkMerged, expiry: time.Hour, advance: 2 * time.Hour, expired: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts []cosfake.Option
			if tc.tls {
				opts = append(opts, cosfake.WithTLS())
			}
			srv := cosfake.New(t, opts...)
			if err := srv.PutObject(cosfake.DefaultBucket, testKey, []byte(testData)); err != nil {
				t.Fatal(err)
			}
			var u string
			if tc.presign != nil {
				u = tc.presign(t, srv, tc.expiry)
			} else {
				var err error
				u, err = newClient(t, srv, tc.creds).WorkingDir(context.Background(), testObject(),
					storage.WorkingDirOptions{Expiry: tc.expiry})
				if err != nil {
					t.Fatal(err)
				}
			}
			wantScheme := "http://"
			if tc.tls {
				wantScheme = "https://"
			}
			if !strings.HasPrefix(u, wantScheme) || !strings.Contains(u, "q-sign-time") {
				t.Fatalf("presigned URL %s: want an %s URL with a query signature", u, wantScheme)
			}

			srv.Advance(tc.advance)
			status, body, code, msg := get(t, srv, u)
			if tc.expired {
				if status != http.StatusForbidden || code != "AccessDenied" || msg != "Request has expired" {
					t.Errorf("GET after %v: %d %s %q, want 403 AccessDenied %q", tc.advance, status, code, msg, "Request has expired")
				}
			} else if status != http.StatusOK || body != testData {
				t.Errorf("GET after %v: %d %s %q, body %q; want 200 with the object", tc.advance, status, code, msg, body)
			}
			wantExpired, wantGets := 0, 1
			if tc.expired {
				wantExpired, wantGets = 1, 0
			}
			if n, g := srv.Count(cosfake.OpExpired), srv.Count(cosfake.OpGetObject); n != wantExpired || g != wantGets {
				t.Errorf("Count(OpExpired) = %d, Count(OpGetObject) = %d; want %d, %d", n, g, wantExpired, wantGets)
			}
		})
	}
}

// TestQuerySignatureWindow sends hand-made query signatures: only their
// time windows count, not their HMAC.
func TestQuerySignatureWindow(t *testing.T) {
	t.Parallel()
	srv := cosfake.New(t, cosfake.WithTLS())
	if err := srv.PutObject(cosfake.DefaultBucket, testKey, []byte(testData)); err != nil {
		t.Fatal(err)
	}
	now := srv.Now().Unix()
	window := func(from, to int64) string { return fmt.Sprintf("%d;%d", now+from, now+to) }
	query := func(sign, key string) string {
		return "q-sign-algorithm=sha1&q-ak=AKIDx&q-sign-time=" + url.QueryEscape(sign) +
			"&q-key-time=" + url.QueryEscape(key) + "&q-header-list=&q-url-param-list=&q-signature=not-checked"
	}
	valid, past := window(-60, 3600), window(-7200, -3600)
	for _, tc := range []struct {
		name    string
		query   string
		wantMsg string // "" means 200
	}{
		{name: "no signature", query: ""},
		{name: "other parameters only", query: "response-content-type=application%2Fzip"},
		{name: "valid window", query: query(valid, valid)},
		{name: "wrong signature is not checked", query: strings.Replace(query(valid, valid), "not-checked", "0000", 1)},
		{name: "sign time expired", query: query(past, valid), wantMsg: "Request has expired"},
		{name: "key time expired", query: query(valid, past), wantMsg: "Request has expired"},
		{name: "sign time not started", query: query(window(600, 3600), valid), wantMsg: "Request has expired"},
		{name: "raw semicolons", query: strings.ReplaceAll(query(valid, valid), "%3B", ";")},
		{name: "raw semicolons expired", query: strings.ReplaceAll(query(past, past), "%3B", ";"), wantMsg: "Request has expired"},
		{name: "merged sign valid", query: "sign=" + url.QueryEscape(query(valid, valid))},
		{name: "merged sign expired", query: "sign=" + url.QueryEscape(query(past, past)), wantMsg: "Request has expired"},
		{name: "malformed sign time", query: query("yesterday", valid), wantMsg: "Invalid Authorization"},
		{name: "end before start", query: query(window(60, -60), valid), wantMsg: "Invalid Authorization"},
		{name: "algorithm without times", query: "q-sign-algorithm=sha1&q-signature=x", wantMsg: "Invalid Authorization"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := srv.URL + "/" + testKey
			if tc.query != "" {
				u += "?" + tc.query
			}
			status, body, code, msg := get(t, srv, u)
			switch {
			case tc.wantMsg == "" && (status != http.StatusOK || body != testData):
				t.Errorf("%d %s %q, body %q; want 200 with the object", status, code, msg, body)
			case tc.wantMsg != "" && (status != http.StatusForbidden || code != "AccessDenied" || msg != tc.wantMsg):
				t.Errorf("%d %s %q; want 403 AccessDenied %q", status, code, msg, tc.wantMsg)
			}
		})
	}
}

// TestHeaderSignedRequestsAfterAdvance: the SDK signs each request in its
// Authorization header at the client's time, which Advance does not move;
// such requests are not refused.
func TestHeaderSignedRequestsAfterAdvance(t *testing.T) {
	t.Parallel()
	srv := cosfake.New(t, cosfake.WithTLS())
	if err := srv.PutObject(cosfake.DefaultBucket, testKey, []byte(testData)); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, srv, testCreds)
	srv.Advance(48 * time.Hour)
	info, err := c.Stat(context.Background(), testObject())
	if err != nil {
		t.Fatalf("Stat after Advance: %v", err)
	}
	if info.Size != int64(len(testData)) {
		t.Errorf("Stat: size %d, want %d", info.Size, len(testData))
	}
	if n := srv.Count(cosfake.OpExpired); n != 0 {
		t.Errorf("Count(OpExpired) = %d, want 0", n)
	}
}

func TestClock(t *testing.T) {
	t.Parallel()
	srv := cosfake.New(t)
	if d := time.Until(srv.Now()); d < -time.Second || d > time.Second {
		t.Fatalf("a new server's clock is %v off time.Now", d)
	}
	srv.Advance(2 * time.Hour)
	srv.Advance(30 * time.Minute)
	if d := time.Until(srv.Now()); d < 150*time.Minute-time.Second || d > 150*time.Minute+time.Second {
		t.Fatalf("after Advance(2h) and Advance(30m) the clock is %v ahead, want 2h30m", d)
	}
	// Objects are stamped by the server's clock, whether put directly or
	// uploaded.
	ctx := context.Background()
	if err := srv.PutObject(cosfake.DefaultBucket, testKey, []byte(testData)); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.SDKClient(cosfake.DefaultBucket, nil).Object.Put(ctx, "uploaded", strings.NewReader(testData), nil); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, srv, testCreds)
	for _, key := range []string{testKey, "uploaded"} {
		obj := testObject()
		obj.Key = key
		info, err := c.Stat(ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		if d := srv.Now().Sub(info.LastModified); d < -time.Second || d > 2*time.Second {
			t.Errorf("%s: Last-Modified %v is %v before the server's clock %v", key, info.LastModified, d, srv.Now())
		}
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		opts   []cosfake.Option
		scheme string
	}{
		{name: "TLS", opts: []cosfake.Option{cosfake.WithTLS()}, scheme: "https"},
		{name: "plain", scheme: "http"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := cosfake.New(t, tc.opts...)
			u, err := url.Parse(srv.URL)
			if err != nil || u.Scheme != tc.scheme || u.Hostname() != "127.0.0.1" {
				t.Fatalf("URL %q: want %s://127.0.0.1:<port>", srv.URL, tc.scheme)
			}
			if pool := srv.CertPool(); (pool != nil) != (tc.scheme == "https") {
				t.Errorf("CertPool() = %v for an %s server", pool, tc.scheme)
			}
			if a, b := srv.Client(), srv.Client(); a == b {
				t.Error("Client returns the same *http.Client twice; callers could change each other's")
			}

			// The storage client, header-signed, through srv.Client().
			ctx := context.Background()
			c := newClient(t, srv, testCreds)
			if err := srv.PutObject(cosfake.DefaultBucket, testKey, []byte(testData)); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Stat(ctx, testObject()); err != nil {
				t.Errorf("Stat through Client(): %v", err)
			}
			// SDKClient with a nil client uses Client().
			resp, err := srv.SDKClient(cosfake.DefaultBucket, nil).Object.Get(ctx, testKey, nil)
			if err != nil {
				t.Errorf("SDKClient(nil) GET: %v", err)
			} else {
				resp.Body.Close()
			}

			if tc.scheme != "https" {
				return
			}
			// A client that does not trust the certificate is refused.
			plain := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
			defer plain.CloseIdleConnections()
			_, err = plain.Get(srv.URL + "/" + testKey)
			if err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Errorf("GET with a client that does not trust the server: %v, want a certificate error", err)
			}
			// Plain HTTP to the TLS port is not served.
			if resp, err := srv.Client().Get(strings.Replace(srv.URL, "https://", "http://", 1) + "/" + testKey); err == nil {
				if resp.StatusCode == http.StatusOK {
					t.Error("plain HTTP to a TLS server answered 200")
				}
				resp.Body.Close()
			}
		})
	}
}
