package storage

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aidlc/dlc/errs"
)

// entry is one file of a test archive.
type entry struct {
	name  string
	body  string
	link  bool // a symlink whose target is body
	store bool // stored, not deflated (entries with size are always stored)
	size  int  // when > 0, body is this many random bytes instead
}

func buildZIP(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.store || e.size > 0 {
			h.Method = zip.Store
		}
		if e.link {
			h.SetMode(fs.ModeSymlink | 0o777)
		} else if strings.HasSuffix(e.name, "/") {
			h.SetMode(fs.ModeDir | 0o755)
		} else {
			h.SetMode(0o644)
		}
		f, err := w.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if e.size > 0 {
			r := rand.New(rand.NewPCG(uint64(e.size), 7))
			if _, err := io.CopyN(f, readerFunc(func(p []byte) (int, error) {
				for i := range p {
					p[i] = byte(r.Uint32())
				}
				return len(p), nil
			}), int64(e.size)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := f.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// toZIP64 rewrites a plain archive's end so that it uses a ZIP64 end
// record and locator, as archives over 4 GiB or 65,535 entries do.
func toZIP64(t testing.TB, b []byte) []byte {
	t.Helper()
	eocd := b[len(b)-eocdLen:]
	if binary.LittleEndian.Uint32(eocd) != 0x06054b50 {
		t.Fatal("fixture has a comment or no EOCD")
	}
	entries := uint64(binary.LittleEndian.Uint16(eocd[10:]))
	dirSize := uint64(binary.LittleEndian.Uint32(eocd[12:]))
	dirOff := uint64(binary.LittleEndian.Uint32(eocd[16:]))
	out := append([]byte(nil), b[:len(b)-eocdLen]...)
	z := uint64(len(out))
	rec := make([]byte, 56)
	binary.LittleEndian.PutUint32(rec, 0x06064b50)
	binary.LittleEndian.PutUint64(rec[4:], 44)
	binary.LittleEndian.PutUint16(rec[12:], 45)
	binary.LittleEndian.PutUint16(rec[14:], 45)
	binary.LittleEndian.PutUint64(rec[24:], entries)
	binary.LittleEndian.PutUint64(rec[32:], entries)
	binary.LittleEndian.PutUint64(rec[40:], dirSize)
	binary.LittleEndian.PutUint64(rec[48:], dirOff)
	loc := make([]byte, 20)
	binary.LittleEndian.PutUint32(loc, 0x07064b50)
	binary.LittleEndian.PutUint64(loc[8:], z)
	binary.LittleEndian.PutUint32(loc[16:], 1)
	end := make([]byte, eocdLen)
	binary.LittleEndian.PutUint32(end, 0x06054b50)
	binary.LittleEndian.PutUint16(end[8:], 0xFFFF)
	binary.LittleEndian.PutUint16(end[10:], 0xFFFF)
	binary.LittleEndian.PutUint32(end[12:], 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(end[16:], 0xFFFFFFFF)
	out = append(out, rec...)
	out = append(out, loc...)
	return append(out, end...)
}

// withEOCD returns a copy of b with the EOCD's directory offset set to off.
func withDirOffset(b []byte, off uint32) []byte {
	c := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(c[len(c)-6:], off)
	return c
}

func writeTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var simple = []entry{
	{name: "main.py", body: "print('hi')\n"},
	{name: "config.yaml", body: "lr: 0.1\n"},
	{name: "pkg/"},
	{name: "pkg/__init__.py"},
	{name: "pkg/mod.py", body: "x = 1\n"},
	{name: "run.sh", body: "#!/bin/sh\npython main.py\n"},
}

// fieldAt returns the first field error at path p, or nil.
func fieldAt(err error, p string) *errs.FieldError {
	for _, fe := range errs.Fields(err) {
		if string(fe.Path) == p {
			return fe
		}
	}
	return nil
}

func TestInspectZIP(t *testing.T) {
	t.Parallel()
	ok := buildZIP(t, simple...)
	wrapped := buildZIP(t, entry{name: "proj/"}, entry{name: "proj/main.py", body: "x"}, entry{name: "__MACOSX/._main.py", body: "x"})
	cases := []struct {
		name      string
		data      []byte
		opt       InspectOptions
		errPath   string // "" means no error
		errHas    string
		warnHas   string
		entryFile string
	}{
		{name: "valid", data: ok, opt: InspectOptions{Entrypoint: "python main.py --config config.yaml"}, entryFile: "main.py"},
		{name: "python3 with flags", data: ok, opt: InspectOptions{Entrypoint: "PYTHONUNBUFFERED=1 python3 -u -W ignore ./main.py"}, entryFile: "main.py"},
		{name: "python -m module", data: ok, opt: InspectOptions{Entrypoint: "python -m pkg.mod --x 1"}, entryFile: "pkg/mod.py"},
		{name: "python -m package main", data: buildZIP(t, entry{name: "app/__main__.py", body: "x"}, entry{name: "README.md"}), opt: InspectOptions{Entrypoint: "python -m app"}, entryFile: "app/__main__.py"},
		{name: "python -m installed module", data: ok, opt: InspectOptions{Entrypoint: "python -m torch.distributed.run main.py"}, warnHas: "not in the package"},
		{name: "bash script", data: ok, opt: InspectOptions{Entrypoint: "bash -x run.sh arg"}, entryFile: "run.sh"},
		{name: "relative program", data: ok, opt: InspectOptions{Entrypoint: "./run.sh"}, entryFile: "run.sh"},
		{name: "quoted script", data: ok, opt: InspectOptions{Entrypoint: `python "main.py" 'a b'`}, entryFile: "main.py"},
		{name: "installed program", data: ok, opt: InspectOptions{Entrypoint: "ray job list"}},
		{name: "shell -c", data: ok, opt: InspectOptions{Entrypoint: `sh -c "python nothere.py"`}},
		{name: "substitution not followed", data: ok, opt: InspectOptions{Entrypoint: "python $SCRIPT"}, warnHas: "not checked"},
		{name: "first command of a list", data: ok, opt: InspectOptions{Entrypoint: "python main.py && echo done"}, entryFile: "main.py"},
		{name: "top-level directory is the root", data: wrapped, opt: InspectOptions{Entrypoint: "python main.py"}, entryFile: "proj/main.py"},
		{name: "missing script", data: ok, opt: InspectOptions{Entrypoint: "python train.py"}, errPath: "entrypoint", errHas: "train.py"},
		{name: "missing module", data: ok, opt: InspectOptions{Entrypoint: "python -m pkg.other"}, errPath: "entrypoint", errHas: "pkg/other.py"},
		{name: "missing script, opted out", data: ok, opt: InspectOptions{Entrypoint: "python train.py", SkipEntrypointCheck: true}},
		{name: "custom field paths", data: ok, opt: InspectOptions{Entrypoint: "python x.py", EntrypointPath: "spec.entrypoint"}, errPath: "spec.entrypoint"},
		{name: "dot-dot entry", data: buildZIP(t, entry{name: "main.py"}, entry{name: "../evil.py", body: "x"}), errPath: "package", errHas: "'..'"},
		{name: "nested dot-dot entry", data: buildZIP(t, entry{name: "a/../../evil.py", body: "x"}), errPath: "package", errHas: "'..'"},
		{name: "backslash dot-dot entry", data: buildZIP(t, entry{name: `..\evil.py`, body: "x"}), errPath: "package", errHas: "'..'"},
		{name: "absolute entry", data: buildZIP(t, entry{name: "/etc/cron.d/x", body: "x"}), errPath: "package", errHas: "absolute"},
		{name: "drive letter entry", data: buildZIP(t, entry{name: "C:/x.py", body: "x"}), errPath: "package", errHas: "drive letter"},
		{name: "symlink out, absolute", data: buildZIP(t, entry{name: "main.py"}, entry{name: "l", body: "/etc/passwd", link: true}), errPath: "package", errHas: "points out"},
		{name: "symlink out, relative", data: buildZIP(t, entry{name: "a/main.py"}, entry{name: "a/l", body: "../../x", link: true}), errPath: "package", errHas: "points out"},
		{name: "symlink out through a link to .", data: buildZIP(t, entry{name: "main.py"}, entry{name: "here", body: ".", link: true}, entry{name: "up", body: "here/..", link: true}), errPath: "package", errHas: "points out"},
		{name: "symlink loop", data: buildZIP(t, entry{name: "main.py"}, entry{name: "a", body: "b/x", link: true}, entry{name: "b", body: "a/y", link: true}), errPath: "package", errHas: "leads back to itself"},
		{name: "symlink inside", data: buildZIP(t, entry{name: "bin/"}, entry{name: "lib/tool.py", body: "x"}, entry{name: "bin/tool", body: "../lib/tool.py", link: true}), warnHas: "symlink"},
		{name: "stored symlink", data: buildZIP(t, entry{name: "lib/x", body: "x"}, entry{name: "l", body: "lib/x", link: true, store: true}), warnHas: "symlink"},
		{name: "not a zip", data: []byte("just some text, long enough to be a file"), errPath: "package", errHas: "not a ZIP"},
		{name: "gzip", data: append([]byte{0x1f, 0x8b, 8, 0}, make([]byte, 40)...), errPath: "package", errHas: "gzip"},
		{name: "empty file", data: nil, errPath: "package", errHas: "empty"},
		{name: "tiny file", data: []byte("PK\x03\x04"), errPath: "package", errHas: "too short"},
		{name: "truncated", data: ok[:len(ok)/2], errPath: "package", errHas: "end-of-central-directory"},
		{name: "truncated tail", data: ok[:len(ok)-5], errPath: "package", errHas: "end-of-central-directory"},
		{name: "bad EOCD offset", data: withDirOffset(ok, 0x7FFFFFF0), errPath: "package", errHas: "central directory"},
		{name: "empty archive", data: buildZIP(t), errPath: "package", errHas: "empty"},
		{name: "only directories", data: buildZIP(t, entry{name: "a/"}), errPath: "package", errHas: "no files"},
		{name: "zip64", data: toZIP64(t, ok), opt: InspectOptions{Entrypoint: "python main.py"}, entryFile: "main.py"},
		{name: "large entry", data: buildZIP(t, entry{name: "main.py"}, entry{name: "data.csv", size: 2048}), opt: InspectOptions{LargeEntry: 1024}, warnHas: "COS or CFS mount"},
		{name: "weights by extension", data: buildZIP(t, entry{name: "main.py"}, entry{name: "model.safetensors", body: "w"}), warnHas: ".safetensors"},
		{name: "duplicate entries", data: buildZIP(t, entry{name: "main.py"}, entry{name: "main.py"}), warnHas: "more than once"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := InspectZIPReader(bytes.NewReader(tc.data), int64(len(tc.data)), tc.opt)
			if tc.errPath == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
			} else {
				if !errors.Is(err, errs.ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
				fe := fieldAt(err, tc.errPath)
				if fe == nil || fe.Rule != "J5" {
					t.Fatalf("no J5 error at %q in %v", tc.errPath, err)
				}
				if !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("error %q does not mention %q", err, tc.errHas)
				}
			}
			if tc.warnHas != "" {
				if rep == nil {
					t.Fatal("no report")
				}
				found := false
				for _, w := range rep.Warnings {
					found = found || strings.Contains(w.String(), tc.warnHas)
				}
				if !found {
					t.Fatalf("no warning mentions %q: %v", tc.warnHas, rep.Warnings)
				}
			}
			if tc.entryFile != "" && (rep == nil || rep.EntrypointFile != tc.entryFile) {
				t.Fatalf("EntrypointFile = %q, want %q", rep.EntrypointFile, tc.entryFile)
			}
		})
	}
}

func TestInspectZIPReport(t *testing.T) {
	t.Parallel()
	data := toZIP64(t, buildZIP(t, simple...))
	rep, err := InspectZIPReader(bytes.NewReader(data), int64(len(data)), InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.ZIP64 || len(rep.Entries) != len(simple) || rep.Files != 5 || rep.Size != int64(len(data)) || rep.Root != "" {
		t.Fatalf("report = %+v", rep)
	}
	var total uint64
	for _, e := range simple {
		total += uint64(len(e.body))
	}
	if rep.UncompressedSize != total {
		t.Fatalf("UncompressedSize = %d, want %d", rep.UncompressedSize, total)
	}
}

func TestInspectZIPManyProblemsAreCapped(t *testing.T) {
	t.Parallel()
	var es []entry
	for i := range 100 {
		es = append(es, entry{name: "../x" + string(rune('a'+i%26)) + strings.Repeat("y", i), body: "x"})
	}
	data := buildZIP(t, es...)
	_, err := InspectZIPReader(bytes.NewReader(data), int64(len(data)), InspectOptions{})
	fields := errs.Fields(err)
	if len(fields) != maxProblems+1 || !strings.Contains(fields[maxProblems].Detail, "80 more") {
		t.Fatalf("got %d problems, last %v", len(fields), fields[len(fields)-1])
	}
}

func TestInspectZIPLocalFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := writeTemp(t, "job.zip", buildZIP(t, simple...))
	big := filepath.Join(dir, "big.zip")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file just over the limit: no 100 MB are written.
	if err := f.Truncate(MaxLocalPackageSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cases := []struct {
		name, path, has string
	}{
		{"missing file", filepath.Join(dir, "nope.zip"), "no such file"},
		{"directory", dir, "is a directory"},
		{"over 100 MB", big, "upload it to COS"},
		{"no path", "", "Required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := InspectZIP(tc.path, InspectOptions{})
			if !errors.Is(err, errs.ErrInvalid) || fieldAt(err, "package.local") == nil || !strings.Contains(err.Error(), tc.has) {
				t.Fatalf("err = %v, want ErrInvalid at package.local mentioning %q", err, tc.has)
			}
			if tc.path != "" && !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("err %v does not name the path", err)
			}
		})
	}
	t.Run("good", func(t *testing.T) {
		rep, err := InspectZIP(good, InspectOptions{Entrypoint: "python main.py"})
		if err != nil || rep.EntrypointFile != "main.py" {
			t.Fatalf("rep=%+v err=%v", rep, err)
		}
	})
}

// countingReaderAt records every read and fails the test on one outside
// the data.
type countingReaderAt struct {
	t    testing.TB
	data []byte
	mu   sync.Mutex
	n    int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(c.data)) {
		c.t.Errorf("read of %d bytes at %d is outside the %d-byte file", len(p), off, len(c.data))
		return 0, io.EOF
	}
	c.mu.Lock()
	c.n += int64(len(p))
	c.mu.Unlock()
	return copy(p, c.data[off:]), nil
}

func TestInspectZIPReadsOnlyTheDirectory(t *testing.T) {
	t.Parallel()
	data := buildZIP(t,
		entry{name: "main.py", body: "print(1)"},
		entry{name: "blob.dat", size: 4 << 20},
		entry{name: "lib/x.py", body: "x"},
		entry{name: "link", body: "lib/x.py", link: true},
		entry{name: "more.dat", size: 1 << 20},
	)
	r := &countingReaderAt{t: t, data: data}
	rep, err := InspectZIPReader(r, int64(len(data)), InspectOptions{Entrypoint: "python main.py"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.BytesRead != r.n {
		t.Fatalf("report says %d bytes read, the reader saw %d", rep.BytesRead, r.n)
	}
	// The tail (≤ 64 KiB + 22), the directory and one symlink's header and
	// target: far less than the 5 MiB of data.
	if r.n > 80<<10 {
		t.Fatalf("read %d of %d bytes", r.n, len(data))
	}
}

func TestParseEntrypoint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cmd   string
		files []string
		note  bool
	}{
		{"python main.py --config config.yaml", []string{"main.py"}, false},
		{"python3.11 -B -X dev train/run.py", []string{"train/run.py"}, false},
		{"/usr/bin/python ./a/../b.py", []string{"b.py"}, false},
		{"python -m pkg.mod", []string{"pkg/mod.py", "pkg/mod/__main__.py"}, false},
		{"python -mpkg", []string{"pkg.py", "pkg/__main__.py"}, false},
		{"python -c 'print(1)'", nil, false},
		{"python", nil, false},
		{"python /opt/app/main.py", nil, false},
		{"python ../outside.py", nil, true},
		{"python *.py", nil, true},
		{"bash run.sh", []string{"run.sh"}, false},
		{"sh -e -o pipefail scripts/run.sh", []string{"scripts/run.sh"}, false},
		{"bash -lc 'x'", nil, false},
		{"./run.sh --fast", []string{"run.sh"}, false},
		{"scripts/run.sh", []string{"scripts/run.sh"}, false},
		{"env A=1 B=2 python main.py", []string{"main.py"}, false},
		{"torchrun --nproc_per_node 8 train.py", nil, false},
		{`python "my script.py"`, []string{"my script.py"}, false},
		{`python my\ script.py`, []string{"my script.py"}, false},
		{"python 'unterminated", nil, true},
		{"python main.py > out.log", nil, true},
		{"", nil, false},
	}
	for _, tc := range cases {
		got := parseEntrypoint(tc.cmd)
		if strings.Join(got.files, ",") != strings.Join(tc.files, ",") || (got.note != "") != tc.note {
			t.Errorf("parseEntrypoint(%q) = %+v, want files %v note %v", tc.cmd, got, tc.files, tc.note)
		}
	}
}

// resolveLinks resolves links with the default depth and returns each
// one's verdict.
func resolveLinks(t testing.TB, links map[string]string) map[string]linkVerdict {
	t.Helper()
	names := errs.SortedKeys(links)
	targets := make([]string, len(names))
	for i, n := range names {
		targets[i] = links[n]
	}
	r := newLinkResolver(context.Background(), names, targets, MaxSymlinkDepth)
	if err := r.resolveAll(); err != nil {
		t.Fatal(err)
	}
	out := map[string]linkVerdict{}
	for _, l := range r.links {
		out[l.name] = l.verdict
	}
	return out
}

func TestLinkResolver(t *testing.T) {
	t.Parallel()
	cases := []struct {
		links map[string]string
		name  string
		want  linkVerdict
	}{
		{map[string]string{"a": "b"}, "a", linkInside},
		{map[string]string{"d/a": "../b"}, "d/a", linkInside},
		{map[string]string{"d/a": "../../b"}, "d/a", linkOut},
		{map[string]string{"a": "/etc"}, "a", linkOut},
		{map[string]string{"a": `C:\x`}, "a", linkOut},
		{map[string]string{"a": `x\..\..\y`}, "a", linkOut},
		{map[string]string{"s": "x/y", "t": "s/../.."}, "t", linkInside}, // x/y/../.. is the root
		{map[string]string{"s": ".", "t": "s/.."}, "t", linkOut},
		{map[string]string{"s": "t", "t": "s"}, "s", linkLoop}, // a loop never resolves
		{map[string]string{"s": "t", "t": "s"}, "t", linkLoop},
		{map[string]string{"a": "b/x", "b": "a/y"}, "a", linkLoop},
		{map[string]string{"l": "l/x"}, "l", linkLoop},
		{map[string]string{"d/l": "../d/l/x"}, "d/l", linkLoop},
		{map[string]string{"a": "d", "d/e": "../../x"}, "a", linkInside}, // a is not d/e
		{map[string]string{"a": "d/e", "d/e": "../../x"}, "a", linkOut},  // through d/e, which points out
		{map[string]string{"a": "d", "d/e": "../../x"}, "d/e", linkOut},
		{map[string]string{"a": "b/../..", "b": "c/d"}, "a", linkInside}, // c/d/../.. is the root
		{map[string]string{"up": "a/../..", "a": "."}, "up", linkOut},
	}
	for _, tc := range cases {
		if got := resolveLinks(t, tc.links)[tc.name]; got != tc.want {
			t.Errorf("%v: %s = %v, want %v", tc.links, tc.name, got, tc.want)
		}
	}
}

// TestLinkResolverDepth: a chain of MaxSymlinkDepth links resolves, one
// more link does not, and neither do links whose fan-out follows more
// than that; the links further down a too-long chain still resolve.
func TestLinkResolverDepth(t *testing.T) {
	t.Parallel()
	chain := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n - 1 {
			m[fmt.Sprintf("l%03d", i)] = fmt.Sprintf("l%03d", i+1)
		}
		m[fmt.Sprintf("l%03d", n-1)] = "main.py"
		return m
	}
	if v := resolveLinks(t, chain(MaxSymlinkDepth)); v["l000"] != linkInside {
		t.Fatalf("chain of %d: %v", MaxSymlinkDepth, v["l000"])
	}
	v := resolveLinks(t, chain(MaxSymlinkDepth+1))
	if v["l000"] != linkDeep || v["l001"] != linkInside {
		t.Fatalf("chain of %d: first %v, second %v", MaxSymlinkDepth+1, v["l000"], v["l001"])
	}
	v = resolveLinks(t, chain(1000))
	for name, got := range v {
		var i int
		fmt.Sscanf(name, "l%d", &i)
		if want := map[bool]linkVerdict{true: linkDeep, false: linkInside}[1000-i > MaxSymlinkDepth]; got != want {
			t.Fatalf("chain of 1000: %s = %v, want %v", name, got, want)
		}
	}
	// f goes through g 21 times: 1 + 21×2 links.
	fan := map[string]string{"g": "h", "h": "main.py", "f": strings.Repeat("g/../", 20) + "g"}
	if v := resolveLinks(t, fan); v["f"] != linkDeep || v["g"] != linkInside {
		t.Fatalf("fan: %v", v)
	}
	fan["f"] = strings.Repeat("g/../", 18) + "g" // 1 + 19×2 = 39
	if v := resolveLinks(t, fan); v["f"] != linkInside {
		t.Fatalf("fan of 39: %v", v)
	}
}
