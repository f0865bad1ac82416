package cosfake_test

import (
	"archive/zip"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/storage"
)

// A consumer's test of a job package upload: the SDK's COS client sends
// to the server on loopback, and the test reads back what arrived.
func Example() {
	srv, err := cosfake.Start(cosfake.WithBuckets("jobs-1250000000"))
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	cc, err := storage.NewCOSClient(storage.COSOptions{Anonymous: true, Region: cosfake.DefaultRegion, Endpoint: srv.URL})
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
