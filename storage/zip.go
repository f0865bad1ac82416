package storage

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
)

// Limits and thresholds of package inspection.
const (
	// DefaultLargeEntry is the uncompressed size above which an entry
	// draws a J6 warning: it belongs in a COS or CFS mount.
	DefaultLargeEntry int64 = 10 << 20
	// MaxSymlinkTarget is the largest symlink target read from an
	// archive; a bigger "symlink" entry is refused.
	MaxSymlinkTarget = 4096
	// maxProblems caps the problems one inspection reports.
	maxProblems = 20
	// maxWarnings caps the warnings one inspection reports.
	maxWarnings = 50
	// eocdLen is the size of the end-of-central-directory record without
	// its comment, and maxEOCDSearch the last bytes that can hold it.
	eocdLen       = 22
	maxEOCDSearch = 0xFFFF + eocdLen
	// maxDirCache is the largest central directory read into memory in
	// one piece, so that archive/zip and the layout check share one read.
	maxDirCache = 64 << 20
)

// zipLimits are the limits of one inspection: the exported constants,
// smaller in tests.
type zipLimits struct {
	links, linkBytes, linkDepth int
}

var defaultZIPLimits = zipLimits{links: MaxSymlinks, linkBytes: MaxSymlinkBytes, linkDepth: MaxSymlinkDepth}

// DataExtensions are file extensions of model weights and data sets. An
// entry with one of them draws a J6 warning whatever its size.
var DataExtensions = []string{
	".bin", ".safetensors", ".pt", ".pth", ".ckpt", ".h5", ".hdf5", ".onnx",
	".gguf", ".ggml", ".tflite", ".parquet", ".arrow", ".feather", ".npy",
	".npz", ".tfrecord", ".lmdb",
}

// InspectOptions says what InspectZIP checks besides the archive itself.
type InspectOptions struct {
	// Entrypoint is the job's start command (J5), e.g.
	// "python main.py --config config.yaml". When it runs a file of the
	// package (python script.py, python -m pkg.mod, bash run.sh, ./run.sh),
	// that file must be in the archive. Empty means nothing to check.
	Entrypoint string
	// SkipEntrypointCheck turns the entrypoint check off.
	SkipEntrypointCheck bool
	// LargeEntry is the uncompressed size above which an entry draws a J6
	// warning; 0 means DefaultLargeEntry, a negative value turns the size
	// warning off.
	LargeEntry int64
	// Path is the field path that problems with the archive are reported
	// under; "" means "package.local" for a local file and "package.cos"
	// for an object in COS.
	Path errs.Path
	// EntrypointPath is the field path of the entrypoint; "" means
	// "entrypoint".
	EntrypointPath errs.Path
}

// ZIPEntry is one entry of an inspected archive.
type ZIPEntry struct {
	Name           string      // as stored, '/'-separated
	Size           uint64      // uncompressed size in bytes
	CompressedSize uint64      // size inside the archive
	Mode           fs.FileMode // type and permission bits
	Symlink        string      // the link target, for a symlink entry
}

// IsDir reports whether the entry is a directory.
func (e ZIPEntry) IsDir() bool { return e.Mode.IsDir() || strings.HasSuffix(e.Name, "/") }

// ZIPWarning is something about a package that works but should change,
// such as a model file that belongs in a COS mount (J6).
type ZIPWarning struct {
	Entry   string // the entry it is about; "" for the whole archive
	Rule    string // the rule ID, e.g. "J6"
	Message string
}

// String returns the warning as text.
func (w ZIPWarning) String() string {
	s := w.Message
	if w.Entry != "" {
		s = w.Entry + ": " + s
	}
	if w.Rule != "" {
		s += " [" + w.Rule + "]"
	}
	return s
}

// ZIPReport is what an inspection found.
type ZIPReport struct {
	Size    int64      // size of the archive in bytes
	Entries []ZIPEntry // every entry, in directory order
	Files   int        // entries that are not directories
	// UncompressedSize is the sum of the sizes the files declare
	// uncompressed; a sum over math.MaxUint64 is math.MaxUint64.
	UncompressedSize uint64
	ZIP64            bool // the archive uses ZIP64 end records
	// Root is the single top-level directory that Ray strips when it
	// unpacks the package as working_dir ("" when there is none); the
	// entrypoint is looked up below it.
	Root string
	// EntrypointFile is the package file that the entrypoint runs, as
	// found in the archive ("" when there is none or it was not checked).
	EntrypointFile string
	Warnings       []ZIPWarning
	// BytesRead is how many bytes of the archive the inspection read:
	// the end records and the central directory, plus symlink targets.
	BytesRead int64
}

// InspectZIP checks a local job package (J5): the file exists, is a
// regular file of at most MaxLocalPackageSize bytes and is a ZIP archive
// whose entries are safe to unpack (no absolute paths, no '..', no
// symlinks pointing out of the tree, no entries that overlap), and the
// entrypoint's script is in it. It reads the end records and the central
// directory, not the entries' data (except symlink targets, a few bytes
// each). Its work is linear in the archive: symlinks are checked within
// MaxSymlinks, MaxSymlinkBytes and MaxSymlinkDepth.
//
// Every problem is reported at once in an error for which
// errors.Is(err, errs.ErrInvalid) holds, each a *errs.FieldError with a
// field path and rule J5. Warnings (J6: large entries that belong in a
// mount) do not fail the inspection.
func InspectZIP(file string, opt InspectOptions) (*ZIPReport, error) {
	return InspectZIPContext(context.Background(), file, opt)
}

// InspectZIPContext is InspectZIP with a context: when ctx is done the
// inspection stops and returns an error wrapping ctx.Err().
func InspectZIPContext(ctx context.Context, file string, opt InspectOptions) (*ZIPReport, error) {
	if opt.Path == "" {
		opt.Path = errs.NewPath("package").Child("local")
	}
	if err := ctx.Err(); err != nil {
		return nil, inspectCanceled(err)
	}
	f, size, err := openLocalPackage(file, opt.Path, MaxLocalPackageSize)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return InspectZIPReaderContext(ctx, f, size, opt)
}

// inspectCanceled wraps the error of a done context.
func inspectCanceled(err error) error {
	return fmt.Errorf("inspecting the package: %w", err)
}

// openLocalPackage opens a local package file after checking that it is a
// regular file of at most limit bytes (no limit when limit < 0).
func openLocalPackage(file string, p errs.Path, limit int64) (*os.File, int64, error) {
	if file == "" {
		return nil, 0, errs.List{errs.Required(p, "J5", "the path of a local ZIP file")}.ToError()
	}
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, errs.List{errs.Invalid(p, "J5", file, "no such file")}.ToError()
	case err != nil:
		return nil, 0, errs.List{errs.Invalid(p, "J5", file, "cannot read the file: "+pathErrText(err))}.ToError()
	case fi.IsDir():
		return nil, 0, errs.List{errs.Invalid(p, "J5", file, "is a directory; a job package is one ZIP file (zip -r package.zip .)")}.ToError()
	case !fi.Mode().IsRegular():
		return nil, 0, errs.List{errs.Invalid(p, "J5", file, "is not a regular file")}.ToError()
	case limit >= 0 && fi.Size() > limit:
		return nil, 0, errs.List{errs.Invalid(p, "J5", file, fmt.Sprintf(
			"is %s, over the %s limit for a local package; upload it to COS (COSClient.UploadPackage or coscli) and reference it as package.cos instead",
			humanBytes(fi.Size()), humanBytes(limit)))}.ToError()
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, 0, errs.List{errs.Invalid(p, "J5", file, "cannot open the file: "+pathErrText(err))}.ToError()
	}
	// Stat the open file: the size that counts is the one we read.
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() || (limit >= 0 && fi.Size() > limit) {
		f.Close()
		return nil, 0, errs.List{errs.Invalid(p, "J5", file, "changed while it was opened")}.ToError()
	}
	return f, fi.Size(), nil
}

func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// InspectZIPReader inspects a ZIP archive of size bytes read through r,
// as InspectZIP does for a file but without the local size limit (a
// package in COS has none). It never reads outside [0, size).
func InspectZIPReader(r io.ReaderAt, size int64, opt InspectOptions) (*ZIPReport, error) {
	return InspectZIPReaderContext(context.Background(), r, size, opt)
}

// InspectZIPReaderContext is InspectZIPReader with a context: when ctx is
// done the inspection stops, without reading further, and returns an
// error wrapping ctx.Err().
func InspectZIPReaderContext(ctx context.Context, r io.ReaderAt, size int64, opt InspectOptions) (*ZIPReport, error) {
	return inspectZIP(ctx, r, size, opt, defaultZIPLimits)
}

func inspectZIP(ctx context.Context, r io.ReaderAt, size int64, opt InspectOptions, lim zipLimits) (*ZIPReport, error) {
	if opt.Path == "" {
		opt.Path = errs.NewPath("package")
	}
	if opt.EntrypointPath == "" {
		opt.EntrypointPath = errs.NewPath("entrypoint")
	}
	if err := ctx.Err(); err != nil {
		return nil, inspectCanceled(err)
	}
	cr := &boundedReaderAt{ctx: ctx, r: r, size: size}
	rep, err := inspect(ctx, cr, size, opt, lim)
	if err != nil && ctx.Err() != nil {
		return nil, inspectCanceled(ctx.Err())
	}
	if rep != nil {
		rep.BytesRead = cr.read()
	}
	return rep, err
}

func inspect(ctx context.Context, r *boundedReaderAt, size int64, opt InspectOptions, lim zipLimits) (*ZIPReport, error) {
	p := opt.Path
	invalid := func(detail string) error {
		return errs.List{errs.Invalid(p, "J5", nil, detail)}.ToError()
	}
	if size < eocdLen {
		if size == 0 {
			return nil, invalid("the file is empty, not a ZIP archive")
		}
		return nil, invalid(fmt.Sprintf("not a ZIP archive: %d bytes is too short for one", size))
	}
	var magic [4]byte
	if _, err := r.ReadAt(magic[:], 0); err != nil {
		return nil, fmt.Errorf("reading the package: %w", err)
	}
	if !bytes.Equal(magic[:], []byte("PK\x03\x04")) && !bytes.Equal(magic[:], []byte("PK\x05\x06")) {
		return nil, invalid("not a ZIP archive" + sniffFormat(r, magic[:]) + "; a job package is one ZIP file")
	}
	tail, err := readTail(r, size)
	if err != nil {
		return nil, fmt.Errorf("reading the package: %w", err)
	}
	r.setTail(tail, size-int64(len(tail)))
	end, err := parseZIPTail(tail, size-int64(len(tail)), func(off int64, n int) ([]byte, error) {
		b := make([]byte, n)
		_, err := r.ReadAt(b, off)
		return b, err
	})
	if err != nil {
		return nil, invalid(err.Error())
	}
	// Read the directory in one piece when it lies before the tail: both
	// archive/zip and the layout check read it.
	tailOff := size - int64(len(tail))
	if dirStart := end.endOffset - int64(end.dirSize); dirStart < tailOff && tailOff-dirStart <= maxDirCache {
		b := make([]byte, tailOff-dirStart+int64(len(tail)))
		if _, err := r.ReadAt(b[:tailOff-dirStart], dirStart); err != nil {
			return nil, fmt.Errorf("reading the package: %w", err)
		}
		copy(b[tailOff-dirStart:], tail)
		r.setTail(b, dirStart)
	}
	zr, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, invalid("not a valid ZIP archive: " + zipErrText(err))
	}
	rep := &ZIPReport{Size: size, ZIP64: end.zip64}
	var problems errs.List
	more := 0
	problem := func(name, detail string) {
		if len(problems) < maxProblems {
			var bad any
			if name != "" {
				bad = name
			}
			problems = append(problems, errs.Invalid(p, "J5", bad, detail))
		} else {
			more++
		}
	}
	extra := 0
	warn := func(w ZIPWarning) {
		if len(rep.Warnings) < maxWarnings {
			rep.Warnings = append(rep.Warnings, w)
		} else {
			extra++
		}
	}
	large := opt.LargeEntry
	if large == 0 {
		large = DefaultLargeEntry
	}
	// The layout: entries that share bytes or reach into the directory
	// are refused, before any entry's data is read.
	spans, dirStart, known, err := entrySpans(ctx, r, size, end, zr.File)
	if err != nil {
		return nil, err
	}
	readLinks := true
	switch {
	case !known:
		problem("", "the central directory does not read the same way twice (a damaged or crafted archive); its layout cannot be checked")
		readLinks = false
	case layoutProblems(zr.File, spans, dirStart, problem):
		readLinks = false
	}
	links := map[string]string{}
	linkCount, linkBytes := 0, 0
	seen := make(map[string]bool, len(zr.File))
	rep.Entries = make([]ZIPEntry, 0, len(zr.File))
	for i, f := range zr.File {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		e := ZIPEntry{Name: f.Name, Size: f.UncompressedSize64, CompressedSize: f.CompressedSize64, Mode: f.Mode()}
		if bad := entryNameProblem(f.Name); bad != "" {
			problem(f.Name, bad)
			rep.Entries = append(rep.Entries, e)
			continue
		}
		clean := strings.TrimSuffix(f.Name, "/")
		if seen[clean] {
			warn(ZIPWarning{Entry: f.Name, Message: "appears more than once; which copy is unpacked depends on the tool"})
		}
		seen[clean] = true
		if f.Flags&0x1 != 0 {
			problem(f.Name, "is encrypted; Ray cannot unpack encrypted entries")
		}
		if e.Mode&fs.ModeSymlink != 0 && readLinks {
			linkCount++
			linkBytes += len(clean)
			switch {
			case linkCount > lim.links:
				problem("", fmt.Sprintf("the archive holds more than %d symlinks, more than are checked (MaxSymlinks); Ray unpacks symlinks as regular files anyway, so package the files they point to instead", lim.links))
				readLinks = false
			case linkBytes > lim.linkBytes:
				problem("", fmt.Sprintf("the names and targets of the archive's symlinks come to more than %d bytes, more than are checked (MaxSymlinkBytes); Ray unpacks symlinks as regular files anyway, so package the files they point to instead", lim.linkBytes))
				readLinks = false
			default:
				target, err := readSymlink(f)
				if err != nil {
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					problem(f.Name, err.Error())
					break
				}
				e.Symlink = target
				links[clean] = target
				if linkBytes += len(target); linkBytes > lim.linkBytes {
					problem("", fmt.Sprintf("the names and targets of the archive's symlinks come to more than %d bytes, more than are checked (MaxSymlinkBytes); Ray unpacks symlinks as regular files anyway, so package the files they point to instead", lim.linkBytes))
					readLinks = false
				}
			}
		}
		rep.Entries = append(rep.Entries, e)
		if e.IsDir() {
			continue
		}
		rep.Files++
		rep.UncompressedSize = addSat(rep.UncompressedSize, e.Size)
		switch ext := strings.ToLower(path.Ext(f.Name)); {
		case large > 0 && e.Size > uint64(large):
			warn(ZIPWarning{Entry: f.Name, Rule: "J6", Message: fmt.Sprintf(
				"declares %d bytes uncompressed (%s); large files such as weights and data sets belong in a COS or CFS mount, not in the package",
				e.Size, humanBytes(int64(min(e.Size, math.MaxInt64))))})
		case e.Size > 0 && isDataExt(ext):
			warn(ZIPWarning{Entry: f.Name, Rule: "J6", Message: "looks like model weights or a data set (" + ext + "); those belong in a COS or CFS mount, not in the package"})
		}
	}
	// Symlinks: every target must stay inside the tree, also when it is
	// reached through other symlinks of the archive. When they were not
	// all read, the archive is refused already.
	if readLinks && len(links) > 0 {
		names := errs.SortedKeys(links)
		targets := make([]string, len(names))
		for i, n := range names {
			targets[i] = links[n]
		}
		lr := newLinkResolver(ctx, names, targets, lim.linkDepth)
		if err := lr.resolveAll(); err != nil {
			return nil, err
		}
		for _, l := range lr.links {
			if d := linkProblem(l, lim.linkDepth); d != "" {
				problem(l.name, d)
				continue
			}
			warn(ZIPWarning{Entry: l.name, Message: "is a symlink; Ray unpacks the package with Python's zipfile, which writes it as a regular file holding the link target"})
		}
	}
	if rep.Files == 0 && len(problems) == 0 {
		problem("", "the archive holds no files")
	}
	if more > 0 {
		problems = append(problems, errs.Invalid(p, "J5", nil, fmt.Sprintf("and %d more problems with entries", more)))
	}
	rep.Root = topLevelDir(rep.Entries)
	if !opt.SkipEntrypointCheck && opt.Entrypoint != "" && len(problems) == 0 {
		file, fe, w := checkEntrypoint(opt.EntrypointPath, opt.Entrypoint, rep)
		rep.EntrypointFile = file
		if fe != nil {
			problems = append(problems, fe)
		}
		if w != nil {
			warn(*w)
		}
	}
	if extra > 0 {
		rep.Warnings = append(rep.Warnings, ZIPWarning{Message: fmt.Sprintf("and %d more warnings", extra)})
	}
	return rep, problems.ToError()
}

// readTail reads the last bytes of the archive that can hold its end
// record.
func readTail(r io.ReaderAt, size int64) ([]byte, error) {
	n := min(size, maxEOCDSearch)
	tail := make([]byte, n)
	if _, err := r.ReadAt(tail, size-n); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return tail, nil
}

func zipErrText(err error) string {
	s := err.Error()
	return strings.TrimPrefix(s, "zip: ")
}

// entryNameProblem says what makes an entry name unsafe to unpack, or "".
func entryNameProblem(name string) string {
	switch {
	case name == "":
		return "an entry has an empty name"
	case strings.ContainsAny(name, "\x00"):
		return "an entry name may not contain NUL"
	}
	n := strings.ReplaceAll(name, `\`, "/")
	switch {
	case strings.HasPrefix(n, "/"):
		return "is an absolute path; entries are relative to the package's root"
	case len(n) >= 2 && n[1] == ':' && (n[0]|0x20 >= 'a' && n[0]|0x20 <= 'z'):
		return "starts with a drive letter; entries are relative to the package's root"
	case hasDotDot(n):
		return "contains '..'; entries may not point out of the package"
	}
	return ""
}

func isDataExt(ext string) bool {
	for _, e := range DataExtensions {
		if ext == e {
			return true
		}
	}
	return false
}

// readSymlink reads a symlink entry's target, which ZIP stores as the
// entry's data.
func readSymlink(f *zip.File) (string, error) {
	if f.UncompressedSize64 > MaxSymlinkTarget || f.CompressedSize64 > 2*MaxSymlinkTarget+64 {
		return "", fmt.Errorf("is a symlink entry of %d bytes; a link target is at most %d", f.UncompressedSize64, MaxSymlinkTarget)
	}
	rc, err := f.Open()
	if err != nil {
		return "", fmt.Errorf("is a symlink whose target cannot be read: %s", zipErrText(err))
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxSymlinkTarget+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("is a symlink whose target cannot be read: %s", zipErrText(err))
	case len(b) > MaxSymlinkTarget:
		return "", fmt.Errorf("is a symlink with a target over %d bytes", MaxSymlinkTarget)
	case len(b) == 0:
		return "", fmt.Errorf("is a symlink with an empty target")
	case bytes.IndexByte(b, 0) >= 0:
		return "", fmt.Errorf("is a symlink whose target contains NUL")
	}
	return string(b), nil
}

// linkProblem says what is wrong with a resolved symlink, or "".
func linkProblem(l symlink, depth int) string {
	t := quoteTarget(l.target)
	switch l.verdict {
	case linkInside:
		return ""
	case linkOut:
		return fmt.Sprintf("is a symlink to %s, which points out of the package", t)
	case linkLoop:
		return fmt.Sprintf("is a symlink to %s, which never resolves: it leads back to itself through the archive's symlinks", t)
	case linkDeep:
		return fmt.Sprintf("is a symlink to %s, which resolves through more than %d symlinks (MaxSymlinkDepth)", t, depth)
	}
	return fmt.Sprintf("is a symlink to %s, which could not be resolved", t)
}

// quoteTarget quotes a link target for a message, shortened when long.
func quoteTarget(t string) string {
	const keep = 120
	if len(t) <= keep {
		return fmt.Sprintf("%q", t)
	}
	return fmt.Sprintf("%q… (%d bytes)", check.Prefix(t, keep), len(t))
}

// topLevelDir returns the single top-level directory of the entries, the
// way Ray decides to strip it when it unpacks a remote working_dir
// (a "__MACOSX" directory beside it is ignored), or "".
func topLevelDir(entries []ZIPEntry) string {
	top := ""
	for _, e := range entries {
		first, _, nested := strings.Cut(e.Name, "/")
		if !nested {
			return ""
		}
		if first == "__MACOSX" {
			continue
		}
		if first == "" || first == "." || first == ".." {
			return ""
		}
		if top == "" {
			top = first
		} else if first != top {
			return ""
		}
	}
	return top
}

// entryIndex answers "is this file in the archive" and "is there a
// top-level directory of this name" below a root. It is built in time
// linear in the names, however deep they are.
type entryIndex struct {
	files map[string]bool
	dirs  map[string]bool // top-level directories only
}

func newEntryIndex(rep *ZIPReport) entryIndex {
	ix := entryIndex{files: map[string]bool{}, dirs: map[string]bool{}}
	for _, e := range rep.Entries {
		name := e.Name
		if rep.Root != "" {
			name = strings.TrimPrefix(name, rep.Root+"/")
		}
		name = strings.TrimSuffix(name, "/")
		if name == "" {
			continue
		}
		top, _, nested := strings.Cut(name, "/")
		if e.IsDir() || nested {
			ix.dirs[top] = true
		}
		if !e.IsDir() {
			ix.files[name] = true
		}
	}
	return ix
}

func checkEntrypoint(p errs.Path, cmd string, rep *ZIPReport) (string, *errs.FieldError, *ZIPWarning) {
	t := parseEntrypoint(cmd)
	if t.note != "" {
		return "", nil, &ZIPWarning{Rule: "J5", Message: "entrypoint not checked against the package: " + t.note}
	}
	if len(t.files) == 0 {
		return "", nil, nil
	}
	ix := newEntryIndex(rep)
	for _, f := range t.files {
		if ix.files[f] {
			if rep.Root != "" {
				return rep.Root + "/" + f, nil, nil
			}
			return f, nil, nil
		}
	}
	if t.module != "" {
		top := strings.SplitN(t.module, ".", 2)[0]
		if !ix.dirs[top] && !ix.files[top+".py"] {
			return "", nil, &ZIPWarning{Rule: "J5", Message: fmt.Sprintf(
				"module %s is not in the package; it must be installed in the image or by the runtime environment", t.module)}
		}
	}
	where := "the package's root"
	if rep.Root != "" {
		where = "the package's top-level directory " + rep.Root + "/, which Ray makes the working directory"
	}
	return "", errs.Invalid(p, "J5", cmd, fmt.Sprintf("runs %s, which is not in the package (looked in %s)",
		strings.Join(t.files, " or "), where)), nil
}

// entrypointTarget is what an entrypoint command runs from the package.
type entrypointTarget struct {
	files  []string // candidate paths, relative to the working directory
	module string   // for python -m
	note   string   // why the command cannot be checked, when it cannot
}

var (
	pythonProg = regexp.MustCompile(`^python[0-9.]*$`)
	shellProg  = map[string]bool{"bash": true, "sh": true, "zsh": true, "dash": true, "ksh": true}
	envAssign  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
)

// parseEntrypoint finds the file of the package that cmd runs: the script
// of python/bash/sh, the module of python -m, or a relative program path
// such as ./run.sh. A command that runs an installed program (ray,
// torchrun, an absolute path) has nothing to check.
func parseEntrypoint(cmd string) entrypointTarget {
	words, ok := shellWords(cmd)
	if !ok {
		return entrypointTarget{note: "it uses shell syntax (quotes, operators or substitutions) this check does not follow"}
	}
	for len(words) > 0 && (envAssign.MatchString(words[0]) || words[0] == "env" || words[0] == "exec") {
		words = words[1:]
	}
	if len(words) == 0 {
		return entrypointTarget{}
	}
	prog := path.Base(words[0])
	switch {
	case pythonProg.MatchString(prog):
		return pythonTarget(words[1:])
	case shellProg[prog]:
		return shellTarget(words[1:])
	case strings.Contains(words[0], "/") && !strings.HasPrefix(words[0], "/"):
		return scriptTarget(words[0])
	}
	return entrypointTarget{}
}

func pythonTarget(args []string) entrypointTarget {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return scriptTarget(args[i+1])
			}
			return entrypointTarget{}
		case a == "-c" || strings.HasPrefix(a, "-c") && !strings.HasPrefix(a, "--"), a == "-":
			return entrypointTarget{} // code on the command line or stdin
		case a == "-m" || strings.HasPrefix(a, "-m") && !strings.HasPrefix(a, "--"):
			mod := strings.TrimPrefix(a, "-m")
			if mod == "" {
				if i+1 >= len(args) {
					return entrypointTarget{}
				}
				mod = args[i+1]
			}
			if !moduleName.MatchString(mod) {
				return entrypointTarget{note: fmt.Sprintf("%q is not a module name", mod)}
			}
			p := strings.ReplaceAll(mod, ".", "/")
			return entrypointTarget{files: []string{p + ".py", p + "/__main__.py"}, module: mod}
		case a == "-W" || a == "-X" || a == "-Q":
			i++ // the option's argument
		case strings.HasPrefix(a, "-"):
			// a flag such as -u, -O, -B, --check-hash-based-pycs=...
		default:
			return scriptTarget(a)
		}
	}
	return entrypointTarget{}
}

func shellTarget(args []string) entrypointTarget {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return scriptTarget(args[i+1])
			}
			return entrypointTarget{}
		case a == "-c" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "c")), a == "-s":
			return entrypointTarget{}
		case a == "-o" || a == "+o" || a == "-O" || a == "+O" || a == "--rcfile" || a == "--init-file":
			i++
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
		default:
			return scriptTarget(a)
		}
	}
	return entrypointTarget{}
}

func scriptTarget(s string) entrypointTarget {
	switch {
	case strings.HasPrefix(s, "/"):
		return entrypointTarget{} // a file of the image
	case strings.ContainsAny(s, "*?[~"):
		return entrypointTarget{note: fmt.Sprintf("%q is a pattern, not a file name", s)}
	}
	c := path.Clean(s)
	if c == ".." || strings.HasPrefix(c, "../") {
		return entrypointTarget{note: fmt.Sprintf("%q is outside the working directory", s)}
	}
	if c == "." {
		return entrypointTarget{}
	}
	return entrypointTarget{files: []string{c}}
}

// shellWords splits a command the way a POSIX shell splits a simple
// command with quotes. It stops at the first operator (&&, ||, ;, |) and
// reports false for substitutions, redirections or unbalanced quotes, which
// it does not follow.
func shellWords(s string) ([]string, bool) {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			flush()
		case c == ';' || c == '&' || c == '|':
			flush()
			return words, len(words) > 0
		case c == '$' || c == '`' || c == '<' || c == '>' || c == '(' || c == ')':
			return nil, false
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
			inWord = true
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, false
			}
			q := s[i+1 : i+1+j]
			if strings.ContainsAny(q, "$`\\") {
				return nil, false
			}
			cur.WriteString(q)
			i += j + 1
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, true
}

// sniffFormat names a common non-ZIP format by its magic bytes, for the
// error message ("" when unknown).
func sniffFormat(r io.ReaderAt, magic []byte) string {
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		return " (it is gzip-compressed, e.g. a .tar.gz)"
	case bytes.HasPrefix(magic, []byte("BZh")):
		return " (it is bzip2-compressed)"
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X'}):
		return " (it is xz-compressed)"
	case bytes.HasPrefix(magic, []byte{'7', 'z', 0xbc, 0xaf}):
		return " (it is a 7z archive)"
	case bytes.HasPrefix(magic, []byte("Rar!")):
		return " (it is a RAR archive)"
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return " (it is zstd-compressed)"
	case bytes.HasPrefix(magic, []byte("PK")):
		return " (it starts like a ZIP but has no local file header; a split or damaged archive?)"
	}
	var ustar [5]byte
	if n, _ := r.ReadAt(ustar[:], 257); n == 5 && string(ustar[:]) == "ustar" {
		return " (it is a tar archive)"
	}
	return ""
}

func humanBytes(n int64) string {
	const unit = 1 << 10
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// boundedReaderAt reads from r but never outside [0, size), counts what
// it read, and stops reading once ctx is done.
type boundedReaderAt struct {
	ctx     context.Context
	r       io.ReaderAt
	size    int64
	mu      sync.Mutex
	n       int64
	tail    []byte // the archive's last bytes, already read
	tailOff int64
}

// setTail keeps the archive's last bytes, so that reads of them (the end
// records, which archive/zip reads again) cost nothing more.
func (b *boundedReaderAt) setTail(tail []byte, off int64) {
	b.mu.Lock()
	b.tail, b.tailOff = tail, off
	b.mu.Unlock()
}

func (b *boundedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= b.size {
		return 0, io.EOF
	}
	short := false
	if rest := b.size - off; int64(len(p)) > rest {
		p, short = p[:rest], true
	}
	b.mu.Lock()
	tail, tailOff := b.tail, b.tailOff
	b.mu.Unlock()
	if tail != nil && off >= tailOff {
		n := copy(p, tail[off-tailOff:])
		if short {
			return n, io.EOF
		}
		return n, nil
	}
	n, err := b.r.ReadAt(p, off)
	b.mu.Lock()
	b.n += int64(n)
	b.mu.Unlock()
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

func (b *boundedReaderAt) read() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// zipEnd is what the end records of an archive say about its central
// directory.
type zipEnd struct {
	entries   uint64
	dirSize   uint64
	dirOffset uint64 // as recorded; may be relative to a prefix (baseOffset)
	endOffset int64  // where the (ZIP64) end record starts in the archive
	zip64     bool
	comment   int
}

// parseZIPTail finds and checks the end-of-central-directory record in
// tail, the archive's bytes from tailOff to its end (size), following a
// ZIP64 locator to the ZIP64 end record (read with fetch when it lies
// before tail). It checks that the directory lies inside the archive
// before the end records.
func parseZIPTail(tail []byte, tailOff int64, fetch func(off int64, n int) ([]byte, error)) (zipEnd, error) {
	var end zipEnd
	i := -1
	for j := len(tail) - eocdLen; j >= 0; j-- {
		if tail[j] == 'P' && tail[j+1] == 'K' && tail[j+2] == 5 && tail[j+3] == 6 {
			n := int(tail[j+20]) | int(tail[j+21])<<8
			if j+eocdLen+n <= len(tail) {
				i = j
				break
			}
		}
	}
	if i < 0 {
		return end, errors.New("not a ZIP archive: no end-of-central-directory record (truncated or damaged?)")
	}
	rec := tail[i:]
	le16 := func(b []byte) uint64 { return uint64(b[0]) | uint64(b[1])<<8 }
	le32 := func(b []byte) uint64 { return le16(b) | le16(b[2:])<<16 }
	le64 := func(b []byte) uint64 { return le32(b) | le32(b[4:])<<32 }
	disk, dirDisk := le16(rec[4:]), le16(rec[6:])
	end.entries = le16(rec[10:])
	end.dirSize = le32(rec[12:])
	end.dirOffset = le32(rec[16:])
	end.comment = int(le16(rec[20:]))
	end.endOffset = tailOff + int64(i)
	eocdAt := end.endOffset
	// ZIP64: a locator right before the end record points to the ZIP64 end record.
	if loc := eocdAt - 20; loc >= 0 {
		var lb []byte
		if loc >= tailOff {
			lb = tail[loc-tailOff : loc-tailOff+20]
		} else if end.entries == 0xFFFF || end.dirSize == 0xFFFFFFFF || end.dirOffset == 0xFFFFFFFF {
			b, err := fetch(loc, 20)
			if err != nil {
				return end, fmt.Errorf("reading the ZIP64 locator: %v", err)
			}
			lb = b
		}
		if len(lb) == 20 && lb[0] == 'P' && lb[1] == 'K' && lb[2] == 6 && lb[3] == 7 {
			off := le64(lb[8:])
			if le32(lb[4:]) != 0 || le32(lb[16:]) != 1 {
				return end, errors.New("a split (multi-disk) ZIP archive is not supported")
			}
			if off > uint64(loc) || uint64(loc)-off < 56 {
				return end, errors.New("not a valid ZIP archive: the ZIP64 locator points outside the archive")
			}
			var rb []byte
			if int64(off) >= tailOff {
				rb = tail[int64(off)-tailOff : int64(off)-tailOff+56]
			} else {
				b, err := fetch(int64(off), 56)
				if err != nil {
					return end, fmt.Errorf("reading the ZIP64 end record: %v", err)
				}
				rb = b
			}
			if len(rb) < 56 || rb[0] != 'P' || rb[1] != 'K' || rb[2] != 6 || rb[3] != 6 {
				return end, errors.New("not a valid ZIP archive: no ZIP64 end record where the locator points")
			}
			disk, dirDisk = le32(rb[16:]), le32(rb[20:])
			end.entries = le64(rb[32:])
			end.dirSize = le64(rb[40:])
			end.dirOffset = le64(rb[48:])
			end.endOffset = int64(off)
			end.zip64 = true
		}
	}
	if disk != 0 || dirDisk != 0 {
		return end, errors.New("a split (multi-disk) ZIP archive is not supported")
	}
	if end.dirSize > uint64(end.endOffset) {
		return end, errors.New("not a valid ZIP archive: the central directory is larger than the archive")
	}
	if end.entries > end.dirSize/46 {
		return end, fmt.Errorf("not a valid ZIP archive: %d entries cannot fit in a %d-byte central directory", end.entries, end.dirSize)
	}
	if end.entries == 0 && end.dirSize == 0 {
		return end, errors.New("the ZIP archive is empty")
	}
	// The directory ends where the end records start; a recorded offset
	// below that is allowed (data prepended to the archive).
	if end.dirOffset+end.dirSize > uint64(end.endOffset) {
		return end, errors.New("not a valid ZIP archive: the central directory runs past its end record (truncated?)")
	}
	return end, nil
}
