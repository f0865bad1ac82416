package platform

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/storage"
)

// Whole logs in COS. With the logs' location in COS (WithLogsLocation
// "cos://<bucket>/<prefix>") and a COS client (WithLogsCOS, which
// dlc.WithCOS sets), a run's whole log is written to its Logs object,
// <prefix>/<run id>, when its tail is kept: when it ends, or before its
// on-demand cluster goes. The run records what was written
// (job.Run.LogsArchived) in the same write that keeps the tail, so the
// object is written before any client may read it from there; a write
// that is lost is written again by the next try (the same lines: Ray's
// record of an ended run does not change). Logs and Follow read the whole
// log from there once Ray no longer has it, and the kept tail when the
// object cannot be read or is not what the run recorded (another
// writer's: it must hold the lines recorded). Without either option the
// tail alone is kept, as before.

// WithLogsCOS sets the COS client that writes and reads runs' whole logs
// when the logs' location is in COS (dlc.WithCOS).
func WithLogsCOS(c *storage.COSClient) Option { return func(o *options) { o.logsCOS = c } }

// Join returns an option that applies opts in turn.
func Join(opts ...Option) Option {
	return func(o *options) {
		for _, f := range opts {
			f(o)
		}
	}
}

// archiveTimeout bounds the write of a run's whole log, its retries
// included: past it, the tail alone is kept and the run ends.
const archiveTimeout = time.Minute

// archiveBackoff is how long, after a write to COS failed, the next
// runs' whole logs are not tried (their tails alone are kept, saying
// so): a COS that does not answer costs one bounded wait, not one per
// ending run.
const archiveBackoff = time.Minute

// logArchive writes and reads runs' whole logs in COS.
type logArchive struct {
	cos    *storage.COSClient
	prefix string // the logs' location, "cos://<bucket>/<prefix>"
	// downUntil is when writes are tried again after a failure (real
	// time, UnixNano; 0: now).
	downUntil atomic.Int64
}

// newLogArchive returns the archive of options o (checked: a location in
// COS parses), nil when the logs are not kept in COS.
func newLogArchive(o *options) *logArchive {
	if o.logsCOS == nil || !strings.HasPrefix(o.logPrefix, "cos://") {
		return nil
	}
	return &logArchive{cos: o.logsCOS, prefix: o.logPrefix}
}

// object returns where run r's whole log is kept, and false when r's
// Logs is not in this client's location (a run made by a client with
// another): its log is then neither written nor read here.
func (a *logArchive) object(r *job.Run) (storage.COSObject, bool) {
	if a == nil || r.Logs != a.prefix+"/"+r.ID {
		return storage.COSObject{}, false
	}
	obj, err := storage.ParseCOSURL(r.Logs)
	return obj, err == nil
}

// put writes lines, run r's whole log, to its object (archiveText). It
// returns what it wrote, and the zero LogArchive when it writes nothing
// (no lines, or r's logs are not kept here).
func (a *logArchive) put(ctx context.Context, r *job.Run, lines []string) (job.LogArchive, error) {
	obj, ok := a.object(r)
	if !ok {
		return job.LogArchive{}, nil
	}
	text, what := archiveText(lines, job.MaxArchivedLogBytes)
	if what.IsZero() {
		return what, nil
	}
	if until := a.downUntil.Load(); time.Now().UnixNano() < until {
		return job.LogArchive{}, fmt.Errorf("a write to COS failed less than %s ago: not tried until %s", archiveBackoff, time.Unix(0, until).UTC().Format(time.RFC3339))
	}
	if err := a.cos.PutObject(ctx, obj, text, "text/plain; charset=utf-8"); err != nil {
		a.downUntil.Store(time.Now().Add(archiveBackoff).UnixNano())
		return job.LogArchive{}, err
	}
	a.downUntil.Store(0)
	return what, nil
}

// archiveText returns lines, cleaned as the kept tail's are
// (job.CleanLogLine), as the text kept in COS, at most max bytes:
// the last lines within it, one per line, after a line saying how many
// earlier ones were not kept, if any were not; and what it holds. No
// lines, or a last line alone over max, is nothing (the zero LogArchive).
func archiveText(lines []string, max int) ([]byte, job.LogArchive) {
	const room = 64 // for the line saying how many were not kept
	lines = slices.Clone(lines)
	for i, l := range lines {
		lines[i] = job.CleanLogLine(l) // as the tail: a reader's terminal acts on none, no secret kept
	}
	start, size := len(lines), 0
	for start > 0 && size+len(lines[start-1])+1 <= max-room {
		start--
		size += len(lines[start]) + 1
	}
	if start == len(lines) {
		return nil, job.LogArchive{}
	}
	var b bytes.Buffer
	b.Grow(size + room)
	if start > 0 {
		fmt.Fprintf(&b, "[%d earlier lines not kept]\n", start)
	}
	for _, l := range lines[start:] {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	sum := sha256.Sum256(b.Bytes())
	return b.Bytes(), job.LogArchive{Lines: len(lines) - start, Dropped: start, SHA256: hex.EncodeToString(sum[:])}
}

// get reads run r's whole log back, as put wrote it: the line saying how
// many were not kept (if any) and the lines kept, and the number of the
// first of them in the whole log. An object that does not hold the
// lines the run recorded is an error.
func (a *logArchive) get(ctx context.Context, r *job.Run) ([]string, int, error) {
	obj, ok := a.object(r)
	if !ok || r.LogsArchived.IsZero() {
		return nil, 0, fmt.Errorf("run %s: its whole log is not kept in %s", r.ID, a.prefixOrNone())
	}
	data, err := a.cos.GetObject(ctx, obj, job.MaxArchivedLogBytes)
	if err != nil {
		return nil, 0, err
	}
	if sum := sha256.Sum256(data); r.LogsArchived.SHA256 != hex.EncodeToString(sum[:]) {
		// Written by someone else since (the bucket is not the platform's
		// alone): not the run's log.
		return nil, 0, fmt.Errorf("run %s: %s does not hold what was written (its SHA-256 differs)", r.ID, obj.URI())
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	want := r.LogsArchived.Lines
	if r.LogsArchived.Dropped > 0 {
		want++
	}
	if len(lines) != want {
		return nil, 0, fmt.Errorf("run %s: %s holds %d lines, not the %d written", r.ID, obj.URI(), len(lines), want)
	}
	for i, l := range lines {
		lines[i] = job.CleanLogLine(l) // as written; cleaned again all the same
	}
	if r.LogsArchived.Dropped > 0 {
		return lines, r.LogsArchived.Dropped - 1, nil
	}
	return lines, 0, nil
}

func (a *logArchive) prefixOrNone() string {
	if a == nil {
		return "COS (no location in COS with a COS client)"
	}
	return a.prefix
}
