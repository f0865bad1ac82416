package storage

import (
	"archive/zip"
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// localHeaderLen is the fixed part of a local file header; an entry
// occupies at least that plus its compressed data.
const localHeaderLen = 30

// entrySpan is what an entry occupies in the archive: its local header
// (the fixed part, and the name and extra field its own header declares)
// and its compressed data, [lo, hi). noHeader is set when no local header
// is where the directory says.
type entrySpan struct {
	lo, hi   uint64
	noHeader bool
}

// localReadGap is the largest gap between two local headers read in one
// piece, and localReadMax the most one such read takes: reading them in
// offset order, coalesced, takes at most one read per localReadGap bytes
// of the archive, never reads a byte twice and holds at most
// localReadMax bytes.
const (
	localReadGap = 64 << 10
	localReadMax = 1 << 20
)

// addSat adds without wrapping: a sum over math.MaxUint64 is
// math.MaxUint64.
func addSat(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

// entrySpans reads the central directory as archive/zip does (from the
// same start, with the same base offset for archives with data before
// them) and returns the span of each of files, which must be what
// zip.NewReader read from it, and where the directory starts. ok is false
// when the records read do not match files: the layout is then unknown.
func entrySpans(ctx context.Context, r io.ReaderAt, size int64, end zipEnd, files []*zip.File) (spans []entrySpan, dirStart uint64, ok bool, err error) {
	// archive/zip takes the directory to start at base+dirOffset, where
	// base is what lies before the archive proper (the directory ends
	// where the end records start), unless a directory record is found
	// at dirOffset itself; it then reads records until one is not.
	base := uint64(end.endOffset) - end.dirSize - end.dirOffset // parseZIPTail checked it is ≥ 0
	bases := []uint64{base}
	if base > 0 {
		if _, _, _, valid := readDirRecord(bufio.NewReader(io.NewSectionReader(r, int64(end.dirOffset), size-int64(end.dirOffset))), nil); valid {
			bases = []uint64{0, base}
		} else {
			bases = []uint64{base, 0}
		}
	}
	for _, b := range bases {
		spans, ok, err = readSpans(ctx, r, size, b+end.dirOffset, b, files)
		if err == nil && ok {
			err = readLocalHeaders(ctx, r, b+end.dirOffset, spans)
		}
		if err != nil || ok {
			return spans, b + end.dirOffset, ok, err
		}
	}
	return nil, 0, false, nil
}

// readSpans reads the directory records from start and matches them with
// files.
func readSpans(ctx context.Context, r io.ReaderAt, size int64, start, base uint64, files []*zip.File) ([]entrySpan, bool, error) {
	if start >= uint64(size) {
		return nil, false, nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(r, int64(start), size-int64(start)), 64<<10)
	spans := make([]entrySpan, 0, len(files))
	var name []byte
	for i := 0; ; i++ {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, false, err
			}
		}
		off, csize, n, valid := readDirRecord(br, &name)
		if !valid {
			if err := ctx.Err(); err != nil {
				return nil, false, err
			}
			return spans, i == len(files), nil
		}
		if i >= len(files) || string(name[:n]) != files[i].Name || csize != files[i].CompressedSize64 {
			return nil, false, nil
		}
		lo := addSat(off, base)
		spans = append(spans, entrySpan{lo: lo, hi: addSat(lo, addSat(localHeaderLen, csize))})
	}
}

// readLocalHeaders reads the local header of each span that starts before
// dirStart and extends the span by the name and extra field lengths that
// header declares: archive/zip, and Ray's unzip, find an entry's data
// after its own local header, whatever the directory says the name is.
// (A data descriptor after the data is not counted: it is not data.) A
// span without the local header signature is marked noHeader. Headers are
// read in offset order, those less than localReadGap apart in one read.
func readLocalHeaders(ctx context.Context, r io.ReaderAt, dirStart uint64, spans []entrySpan) error {
	order := make([]int, 0, len(spans))
	for i, s := range spans {
		if s.lo < dirStart && dirStart-s.lo >= localHeaderLen {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(spans[a].lo, spans[b].lo) })
	var buf []byte
	var bufOff uint64
	for k := 0; k < len(order); {
		if err := ctx.Err(); err != nil {
			return err
		}
		// One read from this header to the last one within localReadGap
		// of the one before it.
		start := spans[order[k]].lo
		j := k + 1
		for j < len(order) && spans[order[j]].lo-spans[order[j-1]].lo <= localReadGap &&
			spans[order[j]].lo+localHeaderLen-start <= localReadMax {
			j++
		}
		endAt := spans[order[j-1]].lo + localHeaderLen
		if uint64(cap(buf)) < endAt-start {
			buf = make([]byte, endAt-start)
		}
		buf, bufOff = buf[:endAt-start], start
		if _, err := r.ReadAt(buf, int64(start)); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading the package: %w", err)
		}
		for ; k < j; k++ {
			s := &spans[order[k]]
			h := buf[s.lo-bufOff:][:localHeaderLen]
			if binary.LittleEndian.Uint32(h) != 0x04034b50 {
				s.noHeader = true
				continue
			}
			vary := uint64(binary.LittleEndian.Uint16(h[26:])) + uint64(binary.LittleEndian.Uint16(h[28:]))
			s.hi = addSat(s.hi, vary)
		}
	}
	return nil
}

// readDirRecord reads one central directory record as archive/zip's
// readDirectoryHeader does and returns its local header offset,
// compressed size (from the ZIP64 extra field when the record says so)
// and name length; the name goes into *name when name is not nil. valid
// is false where archive/zip stops reading records.
func readDirRecord(br *bufio.Reader, name *[]byte) (off, csize uint64, nameLen int, valid bool) {
	var h [46]byte
	if _, err := io.ReadFull(br, h[:]); err != nil || binary.LittleEndian.Uint32(h[:]) != 0x02014b50 {
		return 0, 0, 0, false
	}
	le := binary.LittleEndian
	usize32, csize32, off32 := le.Uint32(h[24:]), le.Uint32(h[20:]), le.Uint32(h[42:])
	nameLen, extraLen, commentLen := int(le.Uint16(h[28:])), int(le.Uint16(h[30:])), int(le.Uint16(h[32:]))
	var nb []byte
	if name != nil {
		if cap(*name) < nameLen {
			*name = make([]byte, nameLen)
		}
		nb = (*name)[:nameLen]
	} else {
		nb = make([]byte, nameLen)
	}
	extra := make([]byte, extraLen)
	if _, err := io.ReadFull(br, nb); err != nil {
		return 0, 0, 0, false
	}
	if _, err := io.ReadFull(br, extra); err != nil {
		return 0, 0, 0, false
	}
	if _, err := br.Discard(commentLen); err != nil {
		return 0, 0, 0, false
	}
	needU, needC, needOff := usize32 == math.MaxUint32, csize32 == math.MaxUint32, off32 == math.MaxUint32
	off, csize = uint64(off32), uint64(csize32)
	for len(extra) >= 4 {
		tag, n := le.Uint16(extra), int(le.Uint16(extra[2:]))
		extra = extra[4:]
		if len(extra) < n {
			break
		}
		field := extra[:n]
		extra = extra[n:]
		if tag != 0x0001 { // ZIP64
			continue
		}
		for _, need := range []struct {
			on *bool
			to *uint64
		}{{&needU, nil}, {&needC, &csize}, {&needOff, &off}} {
			if !*need.on {
				continue
			}
			*need.on = false
			if len(field) < 8 {
				return 0, 0, 0, false
			}
			if need.to != nil {
				*need.to = le.Uint64(field)
			}
			field = field[8:]
		}
	}
	if needC || needOff {
		return 0, 0, 0, false
	}
	return off, csize, nameLen, true
}

// layoutProblems reports entries whose spans overlap one another (the
// layers of an overlapping zip bomb share one compressed body) or reach
// into the central directory, through problem (name, detail). It reports
// whether it found any.
func layoutProblems(files []*zip.File, spans []entrySpan, dirStart uint64, problem func(name, detail string)) bool {
	found := false
	order := make([]int, 0, len(spans))
	for i, s := range spans {
		if s.noHeader {
			found = true
			problem(files[i].Name, fmt.Sprintf("has no local file header at offset %d, where the central directory says it starts; the archive is damaged or crafted", s.lo))
			continue
		}
		if s.hi > dirStart {
			found = true
			problem(files[i].Name, fmt.Sprintf("declares %d compressed bytes at offset %d, which with its local header run into the central directory at offset %d; the archive is damaged or crafted",
				files[i].CompressedSize64, s.lo, dirStart))
			continue
		}
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(spans[a].lo, spans[b].lo), cmp.Compare(a, b))
	})
	last := -1 // the entry reaching furthest so far
	for _, i := range order {
		if last >= 0 && spans[i].lo < spans[last].hi {
			found = true
			problem(files[i].Name, fmt.Sprintf("overlaps entry %q in the archive (bytes %d to %d); entries may not share bytes, which is how a zip bomb multiplies its size",
				files[last].Name, spans[i].lo, min(spans[i].hi, spans[last].hi)))
		}
		if last < 0 || spans[i].hi > spans[last].hi {
			last = i
		}
	}
	return found
}
