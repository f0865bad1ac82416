package storage

import "testing"

// FuzzInspectZIP feeds corrupt and hostile archives to the inspector: it
// must never panic, hang or read outside the file. The seeds (valid,
// ZIP64, traversal, symlinks, truncated, bad end records) run in every
// go test.
func FuzzInspectZIP(f *testing.F) {
	ok := buildZIP(f, simple...)
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
		[]byte("PK\x05\x06" + string(make([]byte, 18))),
		[]byte("PK\x03\x04not really"),
		{},
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &countingReaderAt{t: t, data: data}
		rep, err := InspectZIPReader(r, int64(len(data)), InspectOptions{Entrypoint: "python -m pkg.mod"})
		if err == nil && rep == nil {
			t.Fatal("nil report without an error")
		}
		if rep != nil && rep.BytesRead > int64(len(data))*2+4 {
			// The tail is cached, so at most a few re-reads of small parts.
			t.Fatalf("read %d bytes of a %d-byte file", rep.BytesRead, len(data))
		}
	})
}
