package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cos "github.com/tencentyun/cos-go-sdk-v5"

	"github.com/aidlc/dlc/errs"
)

// Defaults and limits of UploadPackage.
const (
	DefaultPackagePrefix      = "dlc/packages/"
	DefaultPartSize           = 8 << 20
	DefaultMultipartThreshold = 16 << 20
	DefaultUploadConcurrency  = 4
	// MinPartSize is COS's smallest part (all but the last).
	MinPartSize = 1 << 20
	// MaxParts is COS's most parts in one multipart upload.
	MaxParts = 10000
)

// UploadPhase says what an upload is doing.
type UploadPhase string

// The phases an upload reports.
const (
	PhaseHashing   UploadPhase = "hashing"   // reading the file for its SHA-256
	PhaseUploading UploadPhase = "uploading" // sending bytes
	PhaseExists    UploadPhase = "exists"    // the same content is already in COS: nothing sent
	PhaseDone      UploadPhase = "done"
)

// UploadProgress is one progress report. Done counts bytes of the phase;
// it can go back when a part is retried.
type UploadProgress struct {
	Phase UploadPhase
	Done  int64
	Total int64
}

// UploadOptions configure UploadPackage.
type UploadOptions struct {
	// Bucket is where the package goes, "<name>-<appid>"; required.
	Bucket string
	// Region of the bucket; "" means the client's.
	Region string
	// Prefix of the object key; "" means DefaultPackagePrefix. The key is
	// Prefix + the file's SHA-256 in hex + ".zip", so the same content is
	// stored once.
	Prefix string
	// MultipartThreshold: files of at least this many bytes are sent as a
	// multipart upload; 0 means DefaultMultipartThreshold.
	MultipartThreshold int64
	// PartSize of a multipart upload, at least MinPartSize; 0 means
	// DefaultPartSize. It grows when the file would need over MaxParts.
	PartSize int64
	// Concurrency is how many parts are sent at once; 0 means
	// DefaultUploadConcurrency. Memory use does not grow with the file:
	// parts are streamed from it.
	Concurrency int
	// Progress, when set, is called as the upload proceeds, never
	// concurrently.
	Progress func(UploadProgress)
	// Inspect configures the ZIP inspection that runs before anything is
	// sent (entrypoint, J6 warnings). The local 100 MB limit does not
	// apply: this is how a larger package gets to COS.
	Inspect InspectOptions
}

// UploadResult says where a package went.
type UploadResult struct {
	Object  COSObject  // the uploaded (or already present) object
	Size    int64      // bytes
	SHA256  string     // hex, also in the key
	CRC64   uint64     // COS's CRC-64 of the content
	Skipped bool       // the object was already there; nothing was sent
	Parts   int        // parts of a multipart upload; 0 for a single PUT or a skip
	Report  *ZIPReport // the inspection's result, with its warnings
}

// URI returns the object's cos:// URI, for Package.COS.
func (r *UploadResult) URI() string { return r.Object.URI() }

// UploadPackage uploads a local ZIP package to COS under a
// content-addressed key (Prefix + SHA-256 + ".zip") and returns where it
// is, for a Package{COS: result.URI()}. It first inspects the file (a
// non-ZIP or unsafe archive is refused before anything is sent), hashes
// it, and asks COS with a HEAD whether that content is already there: then
// nothing is sent. Files above the multipart threshold go in parts,
// streamed from the file, several at a time; a part that COS throttles or
// fails is retried with backoff. When ctx is cancelled or an upload fails,
// the multipart upload is aborted, so no parts are left behind (and
// billed). cos-go-sdk-v5 checks the CRC-64 of every part and PUT; the
// whole object's CRC-64 is checked against what COS reports.
func (c *COSClient) UploadPackage(ctx context.Context, file string, opt UploadOptions) (*UploadResult, error) {
	if opt.Inspect.Path == "" {
		opt.Inspect.Path = errs.NewPath("package").Child("local")
	}
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	obj, err := c.object(COSObject{Bucket: opt.Bucket, Region: opt.Region, AppID: bucketAppID(opt.Bucket)})
	if err != nil {
		return nil, err
	}
	f, size, err := openLocalPackage(file, opt.Inspect.Path, -1)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep, err := InspectZIPReaderContext(ctx, f, size, opt.Inspect)
	if err != nil {
		return nil, err
	}
	prog := newProgress(opt.Progress)
	sum, crc, err := hashFile(ctx, f, size, prog)
	if err != nil {
		return nil, err
	}
	obj.Key = opt.Prefix + sum + ".zip"
	res := &UploadResult{Object: obj, Size: size, SHA256: sum, CRC64: crc, Report: rep}

	switch info, err := c.Stat(ctx, obj); {
	case err == nil && info.Size == size && (info.CRC64 == "" || info.CRC64 == strconv.FormatUint(crc, 10)):
		res.Skipped = true
		prog.report(PhaseExists, size, size, true)
		return res, nil
	case err != nil && !errors.Is(err, errs.ErrNotFound):
		return nil, err
	}

	if size < opt.MultipartThreshold {
		err = c.putObject(ctx, obj, f, size, prog)
	} else {
		res.Parts, err = c.multipart(ctx, obj, f, size, crc, opt, prog)
	}
	if err != nil {
		return nil, err
	}
	prog.report(PhaseDone, size, size, true)
	return res, nil
}

func bucketAppID(b string) string {
	if m := cosBucket.FindStringSubmatch(b); m != nil {
		return m[3]
	}
	return ""
}

func (o *UploadOptions) defaults() error {
	p := errs.NewPath("upload")
	var l errs.List
	switch {
	case o.Bucket == "":
		l = append(l, errs.Required(p.Child("bucket"), "J5", "the bucket to upload the package to, <name>-<appid>"))
	case !cosBucket.MatchString(o.Bucket):
		l = append(l, errs.Invalid(p.Child("bucket"), "J5", o.Bucket, "must be <name>-<appid>, e.g. jobs-1250000000"))
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPackagePrefix
	}
	if strings.HasPrefix(o.Prefix, "/") || hasDotDot(o.Prefix) || strings.ContainsAny(o.Prefix, "\x00\r\n") {
		l = append(l, errs.Invalid(p.Child("prefix"), "J5", o.Prefix, "a key prefix is relative, without '..'"))
	}
	if o.MultipartThreshold <= 0 {
		o.MultipartThreshold = DefaultMultipartThreshold
	}
	switch {
	case o.PartSize == 0:
		o.PartSize = DefaultPartSize
	case o.PartSize < MinPartSize:
		l = append(l, errs.Invalid(p.Child("partSize"), "J5", o.PartSize, fmt.Sprintf("a part is at least %d bytes", MinPartSize)))
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultUploadConcurrency
	}
	return l.ToError()
}

// progress serialises and thins out progress reports.
type progress struct {
	fn   func(UploadProgress)
	mu   sync.Mutex
	done int64
	last int64
}

func newProgress(fn func(UploadProgress)) *progress { return &progress{fn: fn} }

const progressStep = 256 << 10

func (p *progress) report(phase UploadPhase, done, total int64, force bool) {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !force && done-p.last < progressStep && done-p.last > -progressStep && done != total {
		return
	}
	p.last = done
	p.fn(UploadProgress{Phase: phase, Done: done, Total: total})
}

// add counts uploaded bytes (negative when an attempt is undone).
func (p *progress) add(n, total int64) {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	p.done += n
	done := p.done
	p.mu.Unlock()
	p.report(PhaseUploading, done, total, false)
}

// hashFile returns the file's SHA-256 (hex) and CRC-64 in one pass.
func hashFile(ctx context.Context, f io.ReaderAt, size int64, prog *progress) (string, uint64, error) {
	h := sha256.New()
	crc := crc64.New(crcTable)
	buf := make([]byte, 256<<10)
	prog.report(PhaseHashing, 0, size, true)
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return "", 0, err
		}
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		h.Write(buf[:n])
		crc.Write(buf[:n])
		off += int64(n)
		if err != nil && !(errors.Is(err, io.EOF) && off == size) {
			return "", 0, fmt.Errorf("reading the package: %w", err)
		}
		prog.report(PhaseHashing, off, size, false)
	}
	return hex.EncodeToString(h.Sum(nil)), crc.Sum64(), nil
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// partReader streams one part from the file and counts progress. It keeps
// Size, so cos-go-sdk-v5 knows its length.
type partReader struct {
	*io.SectionReader
	prog  *progress
	total int64
	sent  int64
}

func (r *partReader) Read(p []byte) (int, error) {
	n, err := r.SectionReader.Read(p)
	if n > 0 {
		r.sent += int64(n)
		r.prog.add(int64(n), r.total)
	}
	return n, err
}

// undo takes a failed attempt's bytes back out of the progress.
func (r *partReader) undo() {
	if r.sent > 0 {
		r.prog.add(-r.sent, r.total)
		r.sent = 0
	}
}

func (c *COSClient) putObject(ctx context.Context, obj COSObject, f io.ReaderAt, size int64, prog *progress) error {
	cl := c.sdk(obj)
	_, err := c.do(ctx, func(ctx context.Context) (*cos.Response, error) {
		body := &partReader{SectionReader: io.NewSectionReader(f, 0, size), prog: prog, total: size}
		resp, err := cl.Object.Put(ctx, obj.Key, body, &cos.ObjectPutOptions{
			ObjectPutHeaderOptions: &cos.ObjectPutHeaderOptions{ContentType: "application/zip", ContentLength: size},
		})
		if err != nil {
			body.undo()
		}
		return resp, err
	})
	return cosError("PUT", obj, err)
}

// multipart uploads f in parts and returns how many.
func (c *COSClient) multipart(ctx context.Context, obj COSObject, f io.ReaderAt, size int64, crc uint64, opt UploadOptions, prog *progress) (int, error) {
	partSize := opt.PartSize
	if need := (size + MaxParts - 1) / MaxParts; need > partSize {
		partSize = (need + MinPartSize - 1) / MinPartSize * MinPartSize
	}
	nparts := int((size + partSize - 1) / partSize)
	cl := c.sdk(obj)

	var uploadID string
	_, err := c.do(ctx, func(ctx context.Context) (*cos.Response, error) {
		res, resp, err := cl.Object.InitiateMultipartUpload(ctx, obj.Key, &cos.InitiateMultipartUploadOptions{
			ObjectPutHeaderOptions: &cos.ObjectPutHeaderOptions{ContentType: "application/zip"},
		})
		if err == nil {
			uploadID = res.UploadID
		}
		return resp, err
	})
	if err != nil {
		return 0, cosError("InitiateMultipartUpload", obj, err)
	}
	abort := func(cause error) error {
		// Abort even when ctx is done: the parts must not stay behind.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, aerr := c.do(actx, func(ctx context.Context) (*cos.Response, error) {
			return cl.Object.AbortMultipartUpload(ctx, obj.Key, uploadID)
		})
		if aerr != nil {
			var er *cos.ErrorResponse
			if !(errors.As(aerr, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound) {
				return fmt.Errorf("%w (and aborting multipart upload %s failed, so its parts may remain: %v)", cause, uploadID, aerr)
			}
		}
		return cause
	}

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	etags := make([]string, nparts)
	jobs := make(chan int)
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		cancel()
	}
	for range min(opt.Concurrency, nparts) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				off := int64(i) * partSize
				n := min(partSize, size-off)
				resp, err := c.do(pctx, func(ctx context.Context) (*cos.Response, error) {
					body := &partReader{SectionReader: io.NewSectionReader(f, off, n), prog: prog, total: size}
					resp, err := cl.Object.UploadPart(ctx, obj.Key, uploadID, i+1, body, &cos.ObjectUploadPartOptions{ContentLength: n})
					if err != nil {
						body.undo()
					}
					return resp, err
				})
				if err != nil {
					fail(cosError(fmt.Sprintf("UploadPart %d/%d", i+1, nparts), obj, err))
					return
				}
				etags[i] = resp.Header.Get("ETag")
			}
		}()
	}
feed:
	for i := range nparts {
		select {
		case jobs <- i:
		case <-pctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, abort(fmt.Errorf("uploading %s: %w", obj.URI(), err))
	}
	if firstErr != nil {
		return 0, abort(firstErr)
	}

	parts := make([]cos.Object, nparts)
	for i, e := range etags {
		parts[i] = cos.Object{PartNumber: i + 1, ETag: e}
	}
	sort.Slice(parts, func(a, b int) bool { return parts[a].PartNumber < parts[b].PartNumber })
	var done *cos.Response
	_, err = c.do(ctx, func(ctx context.Context) (*cos.Response, error) {
		_, resp, err := cl.Object.CompleteMultipartUpload(ctx, obj.Key, uploadID, &cos.CompleteMultipartUploadOptions{Parts: parts})
		if err == nil {
			done = resp
		}
		return resp, err
	})
	if err != nil {
		var er *cos.ErrorResponse
		if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound && er.Code == "NoSuchUpload" {
			// A retried Complete after one that succeeded but whose answer
			// was lost: the object is there if the upload completed.
			if info, serr := c.Stat(ctx, obj); serr == nil && info.Size == size {
				return nparts, nil
			}
		}
		return 0, abort(cosError("CompleteMultipartUpload", obj, err))
	}
	if got := done.Header.Get("x-cos-hash-crc64ecma"); got != "" && got != strconv.FormatUint(crc, 10) {
		return 0, fmt.Errorf("COS CompleteMultipartUpload %s: CRC-64 mismatch: the file has %d, COS has %s", obj.URI(), crc, got)
	}
	return nparts, nil
}
