package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc/errs"
)

// linkChain returns n symlinks l000, l001, … each of whose targets is
// about targetLen bytes: it climbs down d/d/d/… and back up, then names
// the next link; the last names main.py (or l000 when loop is set). The
// old resolver copied the path at every segment of the way down and up.
func linkChain(n, targetLen int, loop bool) []entry {
	k := max((targetLen-8)/5, 0)
	pad := strings.Repeat("d/", k) + strings.Repeat("../", k)
	es := []entry{{name: "main.py", body: "print(1)\n"}}
	for i := range n {
		next := fmt.Sprintf("l%03d", i+1)
		if i == n-1 {
			next = "main.py"
			if loop {
				next = "l000"
			}
		}
		es = append(es, entry{name: fmt.Sprintf("l%03d", i), body: pad + next, link: true})
	}
	return es
}

// linkTower returns n symlinks l000, l001, … each of whose targets
// names the next link and then goes about targetLen bytes deeper
// (l001/x/x/…), the last one starting at main.py (or at l000 when loop
// is set): every link resolves to a path 2 KiB of segments longer than
// the next. This is the 2,261-byte archive of 16 links that cost the old
// resolver 16 s and 6.4 GB, and that it accepted.
func linkTower(n, targetLen int, loop bool) []entry {
	es := []entry{{name: "main.py", body: "print(1)\n"}}
	for i := range n {
		next := fmt.Sprintf("l%03d", i+1)
		if i == n-1 {
			next = "main.py"
			if loop {
				next = "l000"
			}
		}
		es = append(es, entry{name: fmt.Sprintf("l%03d", i), body: next + strings.Repeat("/x", max(targetLen-len(next), 0)/2), link: true})
	}
	return es
}

// linkFan returns n symlinks f000, f001, … whose targets go through the
// next link again and again (f001/../f001/../…), about targetLen bytes:
// resolved naively, the links followed multiply at every level.
func linkFan(n, targetLen int) []entry {
	es := []entry{{name: "main.py", body: "print(1)\n"}}
	for i := range n {
		next := fmt.Sprintf("f%03d", i+1)
		if i == n-1 {
			es = append(es, entry{name: fmt.Sprintf("f%03d", i), body: "main.py", link: true})
			break
		}
		reps := max(targetLen/(len(next)+4), 1)
		es = append(es, entry{name: fmt.Sprintf("f%03d", i), body: strings.Repeat(next+"/../", reps-1) + next, link: true})
	}
	return es
}

// deepLinks returns n symlinks deep down a directory tree nameLen bytes
// deep (a/a/a/…/lNNN), each climbing back to the root and into the next
// one's directory, plus a regular file as deep.
func deepLinks(n, nameLen int) []entry {
	depth := max(nameLen/2, 1)
	dir := strings.Repeat("a/", depth)
	up := strings.Repeat("../", depth)
	es := []entry{{name: "main.py", body: "print(1)\n"}, {name: dir + "x.py", body: "x"}}
	for i := range n {
		next := dir + fmt.Sprintf("l%03d", i+1)
		if i == n-1 {
			next = dir + "x.py"
		}
		es = append(es, entry{name: dir + fmt.Sprintf("l%03d", i), body: up + next, link: true})
	}
	return es
}

// zipRecords splits an archive without a comment or ZIP64 records into
// what comes before its central directory and the directory's records.
func zipRecords(t testing.TB, b []byte) ([]byte, [][]byte) {
	t.Helper()
	eocd := b[len(b)-eocdLen:]
	if binary.LittleEndian.Uint32(eocd) != 0x06054b50 {
		t.Fatal("fixture has a comment or no EOCD")
	}
	n := int(binary.LittleEndian.Uint16(eocd[10:]))
	off := int(binary.LittleEndian.Uint32(eocd[16:]))
	dir := b[off : len(b)-eocdLen]
	var recs [][]byte
	for range n {
		l := 46 + int(binary.LittleEndian.Uint16(dir[28:])) + int(binary.LittleEndian.Uint16(dir[30:])) + int(binary.LittleEndian.Uint16(dir[32:]))
		recs = append(recs, append([]byte(nil), dir[:l]...))
		dir = dir[l:]
	}
	return append([]byte(nil), b[:off]...), recs
}

// joinRecords puts an archive back together from zipRecords' parts.
func joinRecords(body []byte, recs [][]byte) []byte {
	out := append([]byte(nil), body...)
	size := 0
	for _, r := range recs {
		out = append(out, r...)
		size += len(r)
	}
	end := make([]byte, eocdLen)
	binary.LittleEndian.PutUint32(end, 0x06054b50)
	binary.LittleEndian.PutUint16(end[8:], uint16(len(recs)))
	binary.LittleEndian.PutUint16(end[10:], uint16(len(recs)))
	binary.LittleEndian.PutUint32(end[12:], uint32(size))
	binary.LittleEndian.PutUint32(end[16:], uint32(len(body)))
	return append(out, end...)
}

// renamed returns a copy of a directory record with another name of the
// same length.
func renamed(rec []byte, name string) []byte {
	c := append([]byte(nil), rec...)
	if n := int(binary.LittleEndian.Uint16(c[28:])); n != len(name) {
		panic("renamed: name length differs")
	}
	copy(c[46:], name)
	return c
}

// allocated runs fn and returns the bytes it allocated (with the rest of
// the process, so only an upper bound: tests that use it do not call
// t.Parallel, and so run while parallel tests wait).
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// within fails the test when fn has not returned after d.
func within(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running after %v", d)
	}
}

// TestInspectZIPSymlinkChain: the 16 × 4 KiB tower that cost the old
// resolver 16 s and 6.4 GB, and a chain that climbs down and up again,
// resolve at once and are accepted (every link ends at main.py); as
// loops, every link is refused.
func TestInspectZIPSymlinkChain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(n, targetLen int, loop bool) []entry
		loop  bool
	}{{"tower", linkTower, false}, {"tower loop", linkTower, true}, {"chain", linkChain, false}, {"chain loop", linkChain, true}} {
		loop := tc.loop
		data := buildZIP(t, tc.build(16, MaxSymlinkTarget, loop)...)
		var rep *ZIPReport
		var err error
		within(t, 10*time.Second, func() {
			if a := allocated(func() {
				rep, err = InspectZIPReader(bytes.NewReader(data), int64(len(data)), InspectOptions{Entrypoint: "python main.py"})
			}); a > 64<<20 {
				t.Errorf("%s: a %d-byte archive allocated %d bytes", tc.name, len(data), a)
			}
		})
		if !loop {
			if err != nil || rep == nil || len(rep.Warnings) != 16 {
				t.Fatalf("%s: rep=%v err=%v", tc.name, rep, err)
			}
			continue
		}
		if !errors.Is(err, errs.ErrInvalid) || len(errs.Fields(err)) != 16 || !strings.Contains(err.Error(), "leads back to itself") {
			t.Fatalf("%s: err = %v", tc.name, err)
		}
		if strings.Contains(err.Error(), strings.Repeat("d/", 100)) || strings.Contains(err.Error(), strings.Repeat("/x", 100)) {
			t.Fatalf("%s: the error quotes whole 4 KiB targets", tc.name)
		}
	}
}

// TestInspectZIPSymlinkShapes: hostile shapes at about 64 KiB finish in
// time and memory linear in their size.
func TestInspectZIPSymlinkShapes(t *testing.T) {
	for _, sh := range zipShapes {
		t.Run(sh.name, func(t *testing.T) {
			data := sh.build(t, 64<<10)
			runtime.GC()
			within(t, 10*time.Second, func() {
				a := allocated(func() {
					_, err := InspectZIPReader(bytes.NewReader(data), int64(len(data)), InspectOptions{Entrypoint: "python -m a.b"})
					if err != nil && !errors.Is(err, errs.ErrInvalid) {
						t.Error(err)
					}
				})
				// The old code allocated gigabytes on some of these.
				if a > 200*uint64(len(data))+(16<<20) {
					t.Errorf("%d bytes allocated for %d bytes in", a, len(data))
				}
			})
		})
	}
}

// TestLinkResolverWorkIsLinear: the resolver walks each segment of the
// names and targets at most once, whatever the shape.
func TestLinkResolverWorkIsLinear(t *testing.T) {
	t.Parallel()
	shapes := map[string][]entry{
		"tower": linkTower(200, MaxSymlinkTarget, false),
		"chain": linkChain(200, MaxSymlinkTarget, false),
		"loop":  linkChain(200, MaxSymlinkTarget, true),
		"fan":   linkFan(200, MaxSymlinkTarget),
		"deep":  deepLinks(50, 8000),
	}
	for name, es := range shapes {
		var names, targets []string
		work := 0
		for _, e := range es {
			if e.link {
				names = append(names, e.name)
				targets = append(targets, e.body)
				work += len(e.name) + len(e.body) + 2
			}
		}
		r := newLinkResolver(context.Background(), names, targets, MaxSymlinkDepth)
		if err := r.resolveAll(); err != nil {
			t.Fatal(err)
		}
		if r.steps > work {
			t.Errorf("%s: %d steps for %d bytes of names and targets", name, r.steps, work)
		}
	}
}

// TestInspectZIPSymlinkDepth: a chain of MaxSymlinkDepth links is
// accepted, one link longer is refused at its first link only.
func TestInspectZIPSymlinkDepth(t *testing.T) {
	t.Parallel()
	ok := buildZIP(t, linkChain(MaxSymlinkDepth, 10, false)...)
	if _, err := InspectZIPReader(bytes.NewReader(ok), int64(len(ok)), InspectOptions{}); err != nil {
		t.Fatalf("chain of %d: %v", MaxSymlinkDepth, err)
	}
	long := buildZIP(t, linkChain(MaxSymlinkDepth+1, 10, false)...)
	_, err := InspectZIPReader(bytes.NewReader(long), int64(len(long)), InspectOptions{})
	fields := errs.Fields(err)
	if len(fields) != 1 || fields[0].BadValue != "l000" || !strings.Contains(err.Error(), "more than 40 symlinks (MaxSymlinkDepth)") {
		t.Fatalf("chain of %d: %v", MaxSymlinkDepth+1, err)
	}
}

// TestInspectZIPSymlinkBudget: archives over MaxSymlinks or
// MaxSymlinkBytes are refused with one archive-level problem.
func TestInspectZIPSymlinkBudget(t *testing.T) {
	t.Parallel()
	var many []entry
	for i := range MaxSymlinks + 1 {
		many = append(many, entry{name: fmt.Sprintf("l%05d", i), body: "main.py", link: true, store: true})
	}
	many = append(many, entry{name: "main.py"})
	// 300 targets of 4 KiB deflate to a small archive but are over 1 MiB.
	big := linkChain(300, MaxSymlinkTarget, false)
	for name, tc := range map[string]struct {
		es  []entry
		has string
	}{
		"count": {many, "more than 10000 symlinks"},
		"bytes": {big, "more than 1048576 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data := buildZIP(t, tc.es...)
			_, err := InspectZIPReader(bytes.NewReader(data), int64(len(data)), InspectOptions{})
			if fe := fieldAt(err, "package"); fe == nil || !strings.Contains(err.Error(), tc.has) || len(errs.Fields(err)) != 1 {
				t.Fatalf("%d bytes: err = %v", len(data), err)
			}
		})
	}
	// Just under the limits is fine: 200 links of 4 KiB to main.py.
	under := linkChain(200, MaxSymlinkTarget, false)
	for i := range under {
		if under[i].link {
			under[i].body = under[i].body[:len(under[i].body)-4] + "main.py"
		}
	}
	data := buildZIP(t, under...)
	if _, err := InspectZIPReader(bytes.NewReader(data), int64(len(data)), InspectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cancelingReaderAt cancels a context on its first read past after
// bytes.
type cancelingReaderAt struct {
	r      io.ReaderAt
	after  int64
	cancel context.CancelFunc
	reads  atomic.Int64
}

func (c *cancelingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if c.reads.Add(int64(len(p))) > c.after {
		c.cancel()
	}
	return c.r.ReadAt(p, off)
}

// TestInspectZIPContext: a done context stops the inspection, with an
// error that wraps ctx.Err(), before or while it reads; CheckPackage and
// InspectZIPContext honour it for a local file too.
func TestInspectZIPContext(t *testing.T) {
	t.Parallel()
	data := buildZIP(t, linkChain(16, MaxSymlinkTarget, false)...)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if rep, err := InspectZIPReaderContext(done, bytes.NewReader(data), int64(len(data)), InspectOptions{}); !errors.Is(err, context.Canceled) || rep != nil {
		t.Fatalf("done context: rep=%v err=%v", rep, err)
	}
	// Cancelled once the tail is read: the directory and the symlinks
	// are not.
	ctx, cancel := context.WithCancel(context.Background())
	r := &cancelingReaderAt{r: bytes.NewReader(data), after: 4, cancel: cancel}
	if _, err := InspectZIPReaderContext(ctx, r, int64(len(data)), InspectOptions{}); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "inspecting the package") {
		t.Fatalf("cancelled while reading: %v", err)
	}
	file := writeTemp(t, "chain.zip", data)
	if _, err := InspectZIPContext(done, file, InspectOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("InspectZIPContext: %v", err)
	}
	if _, err := CheckPackage(done, nil, LocalPackage(file), InspectOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("CheckPackage: %v", err)
	}
	// A deadline far shorter than the old resolver took is met, with the
	// right answer.
	dl, stop := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer stop()
	start := time.Now()
	if _, err := CheckPackage(dl, nil, LocalPackage(file), InspectOptions{Entrypoint: "python main.py"}); err != nil || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("CheckPackage took %v: %v", time.Since(start), err)
	}
}

// TestInspectZIPOverlaps: entries that share bytes (the overlapping zip
// bomb) or run into the central directory are refused; an archive with
// data before it (a self-extractor) is not.
func TestInspectZIPOverlaps(t *testing.T) {
	t.Parallel()
	ok := buildZIP(t, entry{name: "main.py", body: strings.Repeat("print(1)\n", 50), store: true}, entry{name: "b.py", body: "x", store: true})
	body, recs := zipRecords(t, ok)
	le := binary.LittleEndian
	// Two records for one local file.
	shared := joinRecords(body, [][]byte{recs[0], recs[1], renamed(recs[0], "copy.py")})
	// main.py's data swallows b.py's local header: what David Fifield's
	// overlapping zip bomb does, where every entry's data holds the next.
	swallow := append([]byte(nil), recs[0]...)
	bOff := le.Uint32(recs[1][42:])
	le.PutUint32(swallow[20:], bOff+10) // compressed size
	le.PutUint32(swallow[24:], bOff+10)
	bomb := joinRecords(body, [][]byte{swallow, recs[1]})
	// b.py's data runs into the central directory.
	long := append([]byte(nil), recs[1]...)
	le.PutUint32(long[20:], 1000)
	le.PutUint32(long[24:], 1000)
	past := joinRecords(body, [][]byte{recs[0], long})
	// main.py's own local header declares a longer extra field than the
	// directory record: its data, which starts after that header, then
	// runs into b.py's local header.
	longExtra := append([]byte(nil), body...)
	le.PutUint16(longExtra[28:], le.Uint16(longExtra[28:])+20)
	localExtra := joinRecords(longExtra, recs)
	longName := append([]byte(nil), body...)
	le.PutUint16(longName[26:], le.Uint16(longName[26:])+20)
	localName := joinRecords(longName, recs)
	// b.py's directory record points into main.py's data.
	astray := append([]byte(nil), recs[1]...)
	le.PutUint32(astray[42:], 40)
	noHeader := joinRecords(body, [][]byte{recs[0], astray})
	for name, tc := range map[string]struct {
		data []byte
		has  string
	}{
		"shared local header": {shared, `overlaps entry "main.py"`},
		"data holds a header": {bomb, `overlaps entry "main.py"`},
		"into the directory":  {past, "run into the central directory"},
		"local extra length":  {localExtra, `overlaps entry "main.py"`},
		"local name length":   {localName, `overlaps entry "main.py"`},
		"no local header":     {noHeader, "has no local file header at offset 40"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := InspectZIPReader(bytes.NewReader(tc.data), int64(len(tc.data)), InspectOptions{})
			if !errors.Is(err, errs.ErrInvalid) || fieldAt(err, "package") == nil || !strings.Contains(err.Error(), tc.has) {
				t.Fatalf("err = %v, want %q", err, tc.has)
			}
		})
	}
	// Data before the archive, its offsets not adjusted for it (archive/zip
	// then reads the directory at a base offset).
	prefix := []byte("PK\x03\x04" + strings.Repeat("junk", 50))
	for name, data := range map[string][]byte{"prefixed": append(prefix, ok...), "zip64": toZIP64(t, ok)} {
		if _, err := InspectZIPReader(bytes.NewReader(data), int64(len(data)), InspectOptions{Entrypoint: "python main.py"}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestInspectZIPDeclaredSizes: sizes near 2^64 saturate the sum instead
// of wrapping, and the J6 warning gives the declared size in bytes.
func TestInspectZIPDeclaredSizes(t *testing.T) {
	t.Parallel()
	big := uint64(1)<<63 + 5
	data := buildZIP(t, entry{name: "main.py", body: "123456789", store: true}, entry{name: "a.csv", store: true}, entry{name: "b.csv", store: true})
	body, recs := zipRecords(t, data)
	for _, i := range []int{1, 2} {
		recs[i] = withZIP64Size(recs[i], big)
	}
	data = joinRecords(body, recs)
	rep, err := InspectZIPReader(bytes.NewReader(data), int64(len(data)), InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.UncompressedSize != math.MaxUint64 {
		t.Fatalf("UncompressedSize = %d, want %d", rep.UncompressedSize, uint64(math.MaxUint64))
	}
	var j6 []string
	for _, w := range rep.Warnings {
		if w.Rule == "J6" {
			j6 = append(j6, w.String())
		}
	}
	if len(j6) != 2 || !strings.Contains(j6[0], fmt.Sprintf("declares %d bytes uncompressed (8.0 EiB)", big)) {
		t.Fatalf("J6 warnings: %q", j6)
	}
	small := buildZIP(t, entry{name: "main.py"}, entry{name: "data.csv", size: 2048})
	rep, err = InspectZIPReader(bytes.NewReader(small), int64(len(small)), InspectOptions{LargeEntry: 1024})
	if err != nil || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0].Message, "declares 2048 bytes uncompressed (2.0 KiB)") {
		t.Fatalf("rep=%v err=%v", rep, err)
	}
}

// withZIP64Size returns a directory record that declares size bytes
// uncompressed in a ZIP64 extra field.
func withZIP64Size(rec []byte, size uint64) []byte {
	le := binary.LittleEndian
	n, x := int(le.Uint16(rec[28:])), int(le.Uint16(rec[30:]))
	out := append([]byte(nil), rec[:46+n]...)
	le.PutUint32(out[24:], math.MaxUint32)
	le.PutUint16(out[30:], uint16(x+12))
	out = le.AppendUint16(out, 0x0001)
	out = le.AppendUint16(out, 8)
	out = le.AppendUint64(out, size)
	return append(out, rec[46+n:]...)
}

// TestInspectZIPDeepNames: the entrypoint check indexes names in time
// linear in them; it used to record every parent directory of every
// name, which for four 60 KiB names is some 4 GB of hashing.
func TestInspectZIPDeepNames(t *testing.T) {
	t.Parallel()
	es := []entry{{name: "main.py"}}
	for i := range 4 {
		es = append(es, entry{name: strings.Repeat("a/", 30000) + fmt.Sprintf("%d.py", i), store: true})
	}
	data := buildZIP(t, es...)
	within(t, 5*time.Second, func() {
		rep, err := InspectZIPReader(bytes.NewReader(data), int64(len(data)), InspectOptions{Entrypoint: "python -m a.b"})
		if fe := fieldAt(err, "entrypoint"); fe == nil || rep == nil {
			t.Errorf("err = %v, want the missing a/b.py", err)
		}
	})
	// A module whose top-level package is not there is taken to be
	// installed: a warning, not an error.
	rep, err := InspectZIPReader(bytes.NewReader(data), int64(len(data)), InspectOptions{Entrypoint: "python -m zz.b"})
	if err != nil || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0].Message, "not in the package") {
		t.Fatalf("python -m zz.b: %v %v", rep.Warnings, err)
	}
}
