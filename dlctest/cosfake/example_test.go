package cosfake_test

import (
	"archive/zip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/storage"
)

// A consumer's test of a job package upload: the SDK's COS client sends
// to the server on loopback, and the test reads back what arrived.
func Example() {
	srv, err := cosfake.Start(cosfake.WithBuckets("jobs-1250000000"), cosfake.WithTLS())
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	cc, err := storage.NewCOSClient(storage.COSOptions{Anonymous: true, Region: cosfake.DefaultRegion,
		Endpoint: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		panic(err)
	}

	dir, _ := os.MkdirTemp("", "pkg")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "job.zip")
	f, _ := os.Create(file)
	zw := zip.NewWriter(f)
	w, _ := zw.Create("main.py")
	_, _ = w.Write([]byte("print('hello')\n"))
	_ = zw.Close()
	_ = f.Close()

	res, err := cc.UploadPackage(context.Background(), file, storage.UploadOptions{Bucket: "jobs-1250000000"})
	if err != nil {
		panic(err)
	}
	got, err := srv.Object("jobs-1250000000", res.Object.Key)
	st, _ := os.Stat(file)
	fmt.Println(err, int64(len(got)) == st.Size(), srv.Count(cosfake.OpPutObject))
	// Output: <nil> true 1
}

// A presigned working_dir URL expires by the server's clock: Advance plays
// "two hours later".
func ExampleServer_Advance() {
	srv, err := cosfake.Start(cosfake.WithTLS())
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	_ = srv.PutObject(cosfake.DefaultBucket, "pkgs/job.zip", []byte("PK..."))
	cc, err := storage.NewCOSClient(storage.COSOptions{Region: cosfake.DefaultRegion,
		Endpoint: srv.URL, HTTPClient: srv.Client(),
		Credentials: storage.Credentials{SecretID: "AKIDexample", SecretKey: "example-key"}})
	if err != nil {
		panic(err)
	}
	obj := storage.COSObject{Bucket: cosfake.DefaultBucket, Key: "pkgs/job.zip"}
	u, err := cc.WorkingDir(context.Background(), obj, storage.WorkingDirOptions{Expiry: time.Hour})
	if err != nil {
		panic(err)
	}
	status := func() int {
		resp, err := srv.Client().Get(u)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	fmt.Println(status())
	srv.Advance(2 * time.Hour)
	fmt.Println(status(), srv.Count(cosfake.OpExpired))
	// Output:
	// 200
	// 403 1
}
