package storage

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cos "github.com/tencentyun/cos-go-sdk-v5"

	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/errs"
)

// childEnv makes the test binary serve a cosfake server instead of running
// tests: the upload benchmark runs the server in its own process, so that
// the heap it measures is the client's alone.
const childEnv = "DLC_STORAGE_COSFAKE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		s, err := cosfake.Start()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(s.URL)
		io.Copy(io.Discard, os.Stdin) // until the parent closes it
		s.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startChildServer runs a cosfake server in a child process and returns
// its URL.
func startChildServer(b *testing.B) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	// The fake keeps every object in its heap; fewer collections there
	// make the timings steadier.
	cmd.Env = append(os.Environ(), childEnv+"=1", "GOGC=400")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("child server: %v", err)
	}
	return strings.TrimSpace(line)
}

// writeBigZIP writes a ZIP of n stored entries of size bytes each (random
// content) into dir and returns its path.
func writeBigZIP(b *testing.B, dir string, n, size int) string {
	b.Helper()
	p := filepath.Join(dir, fmt.Sprintf("pkg-%d-%d.zip", n, size))
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w := zip.NewWriter(bw)
	rng := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, size)
	main, _ := w.Create("main.py")
	io.WriteString(main, "print('hello')\n")
	for i := range n {
		fw, err := w.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("data/%05d.bin.part", i), Method: zip.Store})
		if err != nil {
			b.Fatal(err)
		}
		rng.Read(buf)
		fw.Write(buf)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return p
}

// heapPeak samples HeapInuse until stop is called and returns the peak
// above the level at the start.
func heapPeak() (stop func() uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > peak.Load() {
				peak.Store(ms.HeapInuse - base)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// BenchmarkUploadPackage100MB uploads a 100 MB package to a cosfake server
// in another process, with UploadPackage's defaults, and in the same
// iteration the same file with cos-go-sdk-v5's own Object.Upload (its
// defaults: 16 MB parts, one at a time; and with our part size and
// concurrency). ns/op is UploadPackage's; the SDK's times and the ratios
// are metrics, and so is each one's peak heap above the start.
func BenchmarkUploadPackage100MB(b *testing.B) {
	file := writeBigZIP(b, b.TempDir(), 1, 100<<20)
	base := startChildServer(b)
	u, _ := url.Parse(base)
	newTransport := func() *http.Transport {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 16
		return t
	}
	c, err := NewCOSClient(COSOptions{Credentials: testCreds, Region: cosfake.DefaultRegion, Endpoint: base,
		HTTPClient: &http.Client{Transport: newTransport()}})
	if err != nil {
		b.Fatal(err)
	}
	sdk := cos.NewClient(&cos.BaseURL{BucketURL: u}, &http.Client{Transport: &cos.AuthorizationTransport{
		SecretID: testCreds.SecretID, SecretKey: testCreds.SecretKey, Transport: newTransport()}})
	sdk.Host = cosfake.Host(testBucket)
	ctx := context.Background()
	del := func(key string) {
		if _, err := sdk.Object.Delete(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
	// The three uploads of an iteration run in a rotating order, so that
	// none always follows the deletes (and the fake's collections) of
	// another.
	type run struct {
		name string
		up   func() (key string, err error)
		t    time.Duration
		heap uint64
	}
	runs := []*run{
		{name: "ours", up: func() (string, error) {
			res, err := c.UploadPackage(ctx, file, UploadOptions{Bucket: testBucket, Inspect: InspectOptions{Entrypoint: "python main.py"}})
			if err == nil && (res.Skipped || res.Parts == 0) {
				err = fmt.Errorf("upload: %+v", res)
			}
			if err != nil {
				return "", err
			}
			return res.Object.Key, nil
		}},
		{name: "sdk", up: func() (string, error) {
			_, _, err := sdk.Object.Upload(ctx, "sdk/default.zip", file, nil)
			return "sdk/default.zip", err
		}},
		{name: "sdk4", up: func() (string, error) {
			_, _, err := sdk.Object.Upload(ctx, "sdk/tuned.zip", file, &cos.MultiUploadOptions{PartSize: DefaultPartSize >> 20, ThreadPoolSize: DefaultUploadConcurrency})
			return "sdk/tuned.zip", err
		}},
	}
	n := 0
	for b.Loop() {
		for k := range runs {
			r := runs[(n+k)%len(runs)]
			if r.name != "ours" {
				b.StopTimer()
			}
			stop := heapPeak()
			start := time.Now()
			key, err := r.up()
			r.t += time.Since(start)
			r.heap = max(r.heap, stop())
			if err != nil {
				b.Fatalf("%s: %v", r.name, err)
			}
			b.StopTimer()
			del(key)
			b.StartTimer()
		}
		n++
	}
	oursT, sdkT, sdk4T := runs[0].t, runs[1].t, runs[2].t
	oursHeap, sdkHeap, sdk4Heap := runs[0].heap, runs[1].heap, runs[2].heap
	b.SetBytes(100 << 20)
	b.ReportMetric(float64(oursT)/float64(sdkT), "ratio-vs-sdk-Upload")
	b.ReportMetric(float64(oursT)/float64(sdk4T), "ratio-vs-sdk-Upload-8MiBx4")
	b.ReportMetric(float64(sdkT.Nanoseconds())/float64(n), "sdk-Upload-ns/op")
	b.ReportMetric(float64(sdk4T.Nanoseconds())/float64(n), "sdk-Upload-8MiBx4-ns/op")
	b.ReportMetric(float64(oursHeap)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(sdkHeap)/(1<<20), "sdk-Upload-peak-heap-MiB")
	b.ReportMetric(float64(sdk4Heap)/(1<<20), "sdk-Upload-8MiBx4-peak-heap-MiB")
}

// BenchmarkInspectZIP10000 inspects a 100 MB package of 10,000 entries; the
// bytes it reads (end records and central directory) are a metric.
func BenchmarkInspectZIP10000(b *testing.B) {
	file := writeBigZIP(b, b.TempDir(), 10000, 10000)
	fi, err := os.Stat(file)
	if err != nil {
		b.Fatal(err)
	}
	var read int64
	for b.Loop() {
		rep, err := InspectZIP(file, InspectOptions{Entrypoint: "python main.py"})
		if err != nil || len(rep.Entries) != 10001 {
			b.Fatalf("%v", err)
		}
		read = rep.BytesRead
	}
	b.ReportMetric(float64(read), "bytes-read/op")
	b.ReportMetric(float64(fi.Size()), "file-bytes")
	b.ReportMetric(100*float64(read)/float64(fi.Size()), "%-of-file-read")
}

// zipShape builds a hostile archive of about size bytes.
type zipShape struct {
	name  string
	build func(tb testing.TB, size int) []byte
}

// fitZIP builds mk(n) for the largest n whose archive is at most size
// bytes (at least mk(1)). Entries of mk(n) are taken to be about the same
// size, so a few builds find n.
func fitZIP(tb testing.TB, size int, mk func(n int) []entry) []byte {
	tb.Helper()
	one, two := len(buildZIP(tb, mk(1)...)), len(buildZIP(tb, mk(2)...))
	per := max(two-one, 1)
	n := max(1, 1+(size-one)/per)
	b := buildZIP(tb, mk(n)...)
	for len(b) < size && n < 1<<20 { // grow while under
		next := buildZIP(tb, mk(n+max(1, (size-len(b))/per))...)
		if len(next) > size {
			break
		}
		n, b = n+max(1, (size-len(b))/per), next
	}
	for len(b) > size && n > 1 { // shrink while over
		n -= max(1, (len(b)-size+per-1)/per)
		n = max(n, 1)
		b = buildZIP(tb, mk(n)...)
	}
	return b
}

// zipShapes are the worst cases found for the inspector: symlink towers
// (each link's target is the next link and 1.5 KiB more segments, so the
// resolved paths grow by that much per link), chains (targets that climb
// down and up a tree, deflated or stored, ending in a file or in a loop), fans (targets that go through the next link
// again and again), links deep in a tree, very deep file names (the
// entrypoint index), many tiny links, and directory records that all
// share one local file (the overlapping zip bomb).
var zipShapes = []zipShape{
	{"tower", func(tb testing.TB, size int) []byte {
		return fitZIP(tb, size, func(n int) []entry { return linkTower(n, 1536, false) })
	}},
	// 1.5 KiB targets: about as many bytes of them as MaxSymlinkBytes
	// allows in 64 KiB, so that all are resolved.
	{"chain", func(tb testing.TB, size int) []byte {
		return fitZIP(tb, size, func(n int) []entry { return linkChain(n, 1536, false) })
	}},
	// 4 KiB targets: 64 KiB of them come to more than MaxSymlinkBytes.
	{"chain-4KiB", func(tb testing.TB, size int) []byte {
		return fitZIP(tb, size, func(n int) []entry { return linkChain(n, MaxSymlinkTarget, false) })
	}},
	{"chain-stored", func(tb testing.TB, size int) []byte {
		return fitZIP(tb, size, func(n int) []entry {
			es := linkChain(n, MaxSymlinkTarget, false)
			for i := range es {
				es[i].store = true
			}
			return es
		})
	}},
	{"loop", func(tb testing.TB, size int) []byte {
		return fitZIP(tb, size, func(n int) []entry { return linkChain(n, 1536, true) })
	}},
	{"fan", func(tb testing.TB, size int) []byte {
		return fitZIP(tb, size, func(n int) []entry { return linkFan(n, 1536) })
	}},
	{"deep-links", func(tb testing.TB, size int) []byte {
		return fitZIP(tb, size, func(n int) []entry { return deepLinks(n, 1600) })
	}},
	{"deep-names", func(tb testing.TB, size int) []byte {
		return fitZIP(tb, size, func(n int) []entry {
			es := []entry{{name: "main.py"}}
			for i := range n {
				es = append(es, entry{name: strings.Repeat("a/", 4000) + fmt.Sprintf("%d.py", i), store: true})
			}
			return es
		})
	}},
	{"tiny-links", func(tb testing.TB, size int) []byte {
		return fitZIP(tb, size, func(n int) []entry {
			es := []entry{{name: "main.py"}}
			for i := range n {
				es = append(es, entry{name: fmt.Sprintf("%d", i), body: fmt.Sprintf("%d", i+1), link: true, store: true})
			}
			es[len(es)-1].body = "main.py"
			return es
		})
	}},
	{"overlap", func(tb testing.TB, size int) []byte {
		body, recs := zipRecords(tb, buildZIP(tb, entry{name: "main.py", body: strings.Repeat("x", 1000)}))
		for len(body)+len(recs)*len(recs[0])+eocdLen < size && len(recs) < 0xFFFF {
			recs = append(recs, renamed(recs[0], fmt.Sprintf("%07d", len(recs))))
		}
		return joinRecords(body, recs)
	}},
}

// BenchmarkInspectZIPHostile inspects each hostile shape at 16, 32 and
// 64 KiB: ns/op must grow no faster than the input. ns/byte is reported
// so that sizes compare at a glance.
func BenchmarkInspectZIPHostile(b *testing.B) {
	for _, sh := range zipShapes {
		for _, size := range []int{16 << 10, 32 << 10, 64 << 10} {
			data := sh.build(b, size)
			b.Run(fmt.Sprintf("%s/%dKiB", sh.name, size>>10), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					_, err := InspectZIPReader(bytes.NewReader(data), int64(len(data)), InspectOptions{Entrypoint: "python -m a.b"})
					if err != nil && !errors.Is(err, errs.ErrInvalid) {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(data)), "bytes-in")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(data)), "ns/byte")
			})
		}
	}
}
