package storage_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aidlc/dlc/storage"
)

// docs/packages-cos.md's job package snippet: inspect, upload to COS, reference,
// presign. It is compiled, not run (no output): it would call Tencent COS
// (TestReadmeSnippets, in the repository's root, checks the region
// against docs/packages-cos.md; dlctest/cosfake's example runs the same calls on
// loopback).
func Example_readme() {
	ctx := context.Background()
	// snippet storage
	c, err := storage.NewCOSClient(storage.COSOptions{Region: "ap-guangzhou"}) // TENCENTCLOUD_SECRET_ID/KEY from the env
	rep, err := storage.InspectZIP("job.zip", storage.InspectOptions{Entrypoint: "python main.py --config config.yaml"})
	res, err := c.UploadPackage(ctx, "big.zip", storage.UploadOptions{
		Bucket:   "jobs-1250000000",
		Inspect:  storage.InspectOptions{Entrypoint: "python -m train.run"},
		Progress: func(p storage.UploadProgress) { log.Printf("%s %d/%d", p.Phase, p.Done, p.Total) },
	})
	pkg := storage.COSPackage(res.URI()) // cos://jobs-1250000000/dlc/packages/<sha256>.zip
	wd, err := c.WorkingDir(ctx, res.Object, storage.WorkingDirOptions{Expiry: 24 * time.Hour})
	// end snippet storage
	fmt.Println(rep, pkg, wd, err)
}
