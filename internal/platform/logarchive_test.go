package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/aidlc/dlc/job"
)

func TestArchiveText(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		max   int
		text  string
		want  job.LogArchive
	}{
		{"none", nil, 1000, "", job.LogArchive{}},
		{"cleaned", []string{"a\x1b[2Jb", "https://x/y?q-signature=abc123&z=1"}, 1000, "a[2Jb\nhttps://x/y?q-signature=REDACTED&z=1\n", job.LogArchive{Lines: 2}},
		{"all fit", []string{"a", "", "b"}, 1000, "a\n\nb\n", job.LogArchive{Lines: 3}},
		{"the last ones", []string{strings.Repeat("x", 30), "yy", "zz"}, 64 + 6, "[1 earlier lines not kept]\nyy\nzz\n", job.LogArchive{Lines: 2, Dropped: 1}},
		{"the last alone too long", []string{"a", strings.Repeat("x", 100)}, 64 + 50, "", job.LogArchive{}},
	} {
		text, got := archiveText(tc.lines, tc.max)
		if sum := sha256.Sum256(text); !got.IsZero() && got.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: digest %s is not the text's", tc.name, got.SHA256)
		}
		got.SHA256 = ""
		if string(text) != tc.text || got != tc.want {
			t.Errorf("%s: %q %+v, want %q %+v", tc.name, text, got, tc.text, tc.want)
		}
	}
}
