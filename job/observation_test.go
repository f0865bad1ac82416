package job_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aidlc/dlc/job"
)

// A message from Ray is clipped to job.MaxMessage, keeping its end (where
// a traceback puts the error) at a rune boundary, after a marker.
func TestClipMessage(t *testing.T) {
	cases := []struct {
		name, in string
		cut      bool
	}{
		{"empty", "", false},
		{"short", "Job failed: exit code 1", false},
		{"exactly the bound", strings.Repeat("x", job.MaxMessage), false},
		{"one over", strings.Repeat("x", job.MaxMessage) + "!", true},
		{"2 MiB of traceback", strings.Repeat("  File \"a.py\", line 1\n", 100000) + "KeyError: 'lr'", true},
		{"multibyte runes", strings.Repeat("错误", 10000) + "结束", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := job.ClipMessage(tc.in)
			if !tc.cut {
				if got != tc.in {
					t.Fatalf("changed: %q", got)
				}
				return
			}
			if len(got) > job.MaxMessage || !utf8.ValidString(got) || !strings.HasPrefix(got, "[… ") {
				t.Fatalf("%d bytes, valid %v: %q…", len(got), utf8.ValidString(got), got[:40])
			}
			_, kept, _ := strings.Cut(got, "cut …] ")
			if !strings.HasSuffix(tc.in, kept) || len(kept) < job.MaxMessage-64 {
				t.Fatalf("kept %d bytes, not the end of the message", len(kept))
			}
		})
	}
}

// Bounded drops the times no run can have and JSON cannot hold.
func TestObservationBounded(t *testing.T) {
	ok := time.Date(2026, 12, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"a real time", ok, ok},
		{"zero", time.Time{}, time.Time{}},
		{"past year 9999", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Time{}},
		{"before the epoch", time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), time.Time{}},
	} {
		o := job.Observation{State: job.Succeeded, StartedAt: tc.at, EndedAt: tc.at}.Bounded()
		if !o.StartedAt.Equal(tc.want) || !o.EndedAt.Equal(tc.want) {
			t.Errorf("%s: %v %v", tc.name, o.StartedAt, o.EndedAt)
		}
		if _, err := json.Marshal(job.Run{StartedAt: o.StartedAt, FinishedAt: o.EndedAt}); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
