package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc/errs"
)

// smallZIPLimits make the symlink limits reachable by small fuzz inputs.
var smallZIPLimits = zipLimits{links: 4, linkBytes: 256, linkDepth: 3}

// FuzzInspectZIP feeds corrupt and hostile archives to the inspector: it
// must never panic, hang or read outside the file, with the default
// limits and with small ones. Sums of declared sizes saturate, and an
// archive it accepts has no entries that share bytes. The seeds (valid,
// ZIP64, traversal, symlinks, towers, chains, loops, fans, deep links,
// overlapping entries, huge declared sizes, truncated, bad end records)
// run in every go test.
func FuzzInspectZIP(f *testing.F) {
	ok := buildZIP(f, simple...)
	body, recs := zipRecords(f, buildZIP(f, entry{name: "main.py", body: "print(1)", store: true}, entry{name: "b.py", body: "x", store: true}))
	seeds := [][]byte{
		ok,
		toZIP64(f, ok),
		ok[:len(ok)/2],
		ok[:len(ok)-1],
		withDirOffset(ok, 0x7FFFFFF0),
		withDirOffset(ok, 0),
		buildZIP(f),
		buildZIP(f, entry{name: "../evil", body: "x"}, entry{name: "/abs", body: "x"}),
		buildZIP(f, entry{name: "l", body: "../../etc", link: true}, entry{name: "here", body: ".", link: true}, entry{name: "up", body: "here/..", link: true}),
		buildZIP(f, entry{name: "l", body: "target", link: true, store: true}),
		buildZIP(f, entry{name: "main.py", body: "x"}, entry{name: "w.safetensors", size: 1024}),
		buildZIP(f, linkTower(6, 40, false)...),
		buildZIP(f, linkTower(6, 40, true)...),
		buildZIP(f, linkChain(6, 40, false)...),
		buildZIP(f, linkChain(6, 40, true)...),
		buildZIP(f, linkChain(MaxSymlinkDepth+1, 0, false)...),
		buildZIP(f, linkFan(4, 60)...),
		buildZIP(f, deepLinks(3, 40)...),
		joinRecords(body, [][]byte{recs[0], recs[1], renamed(recs[0], "copy.py")}),
		joinRecords(body, [][]byte{recs[0], withZIP64Size(recs[1], 1<<63+5), withZIP64Size(renamed(recs[1], "c.py"), 1<<63+5)}),
		append([]byte("PK\x03\x04junk"), ok...),
		[]byte("PK\x05\x06" + string(make([]byte, 18))),
		[]byte("PK\x03\x04not really"),
		{},
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, lim := range []zipLimits{defaultZIPLimits, smallZIPLimits} {
			r := &countingReaderAt{t: t, data: data}
			start := time.Now()
			rep, err := inspectZIP(context.Background(), r, int64(len(data)), InspectOptions{}, lim)
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("%d bytes took %v", len(data), d)
			}
			if err == nil && rep == nil {
				t.Fatal("nil report without an error")
			}
			if err != nil && !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			if rep == nil {
				continue
			}
			if rep.BytesRead > int64(len(data))*2+4 {
				// The tail and the directory are cached: at most a few
				// re-reads of small parts.
				t.Fatalf("read %d bytes of a %d-byte file", rep.BytesRead, len(data))
			}
			var sum, occupied uint64
			for _, e := range rep.Entries {
				if !e.IsDir() {
					sum = addSat(sum, e.Size)
				}
				occupied = addSat(occupied, addSat(localHeaderLen, e.CompressedSize))
			}
			if err == nil && rep.UncompressedSize != sum { // entries with bad names are not counted
				t.Fatalf("UncompressedSize %d, want the saturated sum %d", rep.UncompressedSize, sum)
			}
			if err == nil && occupied > uint64(len(data)) {
				t.Fatalf("accepted entries that take %d bytes of a %d-byte archive: they overlap", occupied, len(data))
			}
		}
	})
}

// naiveResolve is the resolver's specification: it resolves the link
// name → target as a kernel would, walking every link each time it is
// reached and giving up after depth links in all. It reports whether the
// link resolves inside the tree. Exponential in general: for small
// inputs only.
func naiveResolve(links map[string]string, name string, depth int) bool {
	count := 1
	var resolve func(dir []string, rel string) ([]string, bool)
	resolve = func(dir []string, rel string) ([]string, bool) {
		if absoluteTarget(rel) {
			return nil, false
		}
		cur := append([]string(nil), dir...)
		for _, seg := range strings.Split(strings.ReplaceAll(rel, `\`, "/"), "/") {
			switch seg {
			case "", ".":
				continue
			case "..":
				if len(cur) == 0 {
					return nil, false
				}
				cur = cur[:len(cur)-1]
				continue
			}
			cur = append(cur, seg)
			t, isLink := links[strings.Join(cur, "/")]
			if !isLink {
				continue
			}
			if count++; count > depth {
				return nil, false
			}
			var ok bool
			if cur, ok = resolve(cur[:len(cur)-1], t); !ok {
				return nil, false
			}
		}
		return cur, true
	}
	dir := strings.Split(name, "/")
	_, ok := resolve(dir[:len(dir)-1], links[name])
	return ok
}

// fuzzLinks decodes links from fuzz input: one "name=target" a line.
func fuzzLinks(data []byte) map[string]string {
	links := map[string]string{}
	for line := range strings.SplitSeq(string(data), "\n") {
		name, target, ok := strings.Cut(line, "=")
		name = strings.TrimSuffix(name, "/")
		if !ok || name == "" || target == "" || len(links) >= 32 {
			continue
		}
		links[name] = target
	}
	return links
}

// FuzzSymlinkResolver checks the resolver against naiveResolve: a link
// is accepted exactly when the naive walk, which follows every link each
// time it is reached, resolves it inside the tree within the same depth,
// and the work is at most one step per segment of the names and targets.
// Run it with a small depth too, where loops and fans reach the limit
// sooner.
func FuzzSymlinkResolver(f *testing.F) {
	for _, s := range []string{
		"a=b",
		"d/a=../b",
		"d/a=../../b",
		"a=/etc\nb=C:\\x",
		"s=x/y\nt=s/../..",
		"s=.\nt=s/..",
		"s=t\nt=s",
		"a=b/x\nb=a/y",
		"l=l/x",
		"a=d\nd/e=../../x",
		"a=d/e\nd/e=../../x",
		"g=h\nh=main.py\nf=" + strings.Repeat("g/../", 20) + "g",
		"l0=l1\nl1=l2\nl2=l3\nl3=l4\nl4=main.py",
		"a/a/a/l=../../../a/a/a/m\na/a/a/m=../../../x",
		"x=y\\..\\..\\z",
		"up=a/../..\na=.",
	} {
		f.Add([]byte(s), uint8(MaxSymlinkDepth))
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, depth uint8) {
		d := int(depth%64) + 1
		links := fuzzLinks(data)
		names := errs.SortedKeys(links)
		targets := make([]string, len(names))
		work := 0
		for i, n := range names {
			targets[i] = links[n]
			work += len(n) + len(targets[i]) + 2
		}
		r := newLinkResolver(context.Background(), names, targets, d)
		if err := r.resolveAll(); err != nil {
			t.Fatal(err)
		}
		if r.steps > work {
			t.Fatalf("%d steps for %d bytes of names and targets", r.steps, work)
		}
		for _, l := range r.links {
			if l.verdict == linkUnvisited || l.verdict == linkBusy {
				t.Fatalf("%s left %v", l.name, l.verdict)
			}
			if got, want := l.verdict == linkInside, naiveResolve(links, l.name, d); got != want {
				t.Fatalf("%q → %q (depth %d): resolver says %v, the naive walk inside=%v\nlinks: %q", l.name, l.target, d, l.verdict, want, links)
			}
			if l.verdict == linkInside && (l.follows < 1 || l.follows > d) {
				t.Fatalf("%s went through %d links", l.name, l.follows)
			}
		}
	})
}

// TestFuzzLinksDecodes keeps fuzzLinks honest.
func TestFuzzLinksDecodes(t *testing.T) {
	got := fuzzLinks([]byte("a=b\nbad\n=x\nd/=e\nc=\n"))
	if fmt.Sprint(got) != "map[a:b d:e]" {
		t.Fatalf("got %v", got)
	}
	if math.MaxUint64 != addSat(math.MaxUint64-1, 2) || addSat(1, 2) != 3 {
		t.Fatal("addSat")
	}
}
