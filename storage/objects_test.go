package storage

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/errs"
)

// What PutObject writes, GetObject reads back whole; a larger object than
// the limit, a missing one and a zero limit are refused, each with its
// sentinel.
func TestCOSPutGetObject(t *testing.T) {
	srv := cosfake.New(t)
	c := newTestClient(t, srv)
	ctx := t.Context()
	data := []byte(strings.Repeat("line of a run's log\n", 1000))
	if err := c.PutObject(ctx, obj("logs/run-1"), data, "text/plain; charset=utf-8"); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetObject(ctx, obj("logs/run-1"), int64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("GetObject = %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	for _, tc := range []struct {
		name string
		key  string
		max  int64
		want error
	}{
		{"over the limit", "logs/run-1", int64(len(data)) - 1, errs.ErrInvalid},
		{"missing", "logs/none", 10, errs.ErrNotFound},
		{"no limit", "logs/run-1", 0, errs.ErrInvalid},
	} {
		if _, err := c.GetObject(ctx, obj(tc.key), tc.max); !errors.Is(err, tc.want) {
			t.Errorf("%s: GetObject = %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := c.PutObject(ctx, obj(""), data, "text/plain"); err == nil {
		t.Error("PutObject of an object without a key succeeded")
	}
}
