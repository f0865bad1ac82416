package job

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The tail kept of an ended run's logs: within both bounds, the end of
// the log, and how many lines before it are left out.
func TestLogTailOf(t *testing.T) {
	many := func(n, size int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%0*d", size, i)
		}
		return out
	}
	for _, c := range []struct {
		name          string
		lines         []string
		keep, dropped int
	}{
		{"none", nil, 0, 0},
		{"a few", many(3, 10), 3, 0},
		{"more lines than the bound", many(250, 10), MaxLogTailLines, 50},
		{"more bytes than the bound", many(100, 999), MaxLogTailBytes / 1000, 100 - MaxLogTailBytes/1000},
		{"one line longer than the bound", []string{"a", strings.Repeat("x", 3*MaxLogTailBytes)}, 1, 1},
	} {
		tail, dropped := LogTailOf(c.lines)
		size := 0
		for _, l := range tail {
			size += len(l) + 1
		}
		if len(tail) != c.keep || dropped != c.dropped || size > MaxLogTailBytes || len(tail) > MaxLogTailLines {
			t.Errorf("%s: kept %d (%d bytes), dropped %d; want %d and %d", c.name, len(tail), size, dropped, c.keep, c.dropped)
		}
		if len(tail) > 0 && len(c.lines[len(c.lines)-1]) <= MaxLogTailBytes && tail[len(tail)-1] != c.lines[len(c.lines)-1] {
			t.Errorf("%s: the last line kept is not the log's last", c.name)
		}
	}
}

// A tail of hostile bytes stores, as JSON, in at most its bound (a '<'
// is six bytes there, a NUL would be six too), with no control character
// (a terminal escape, NUL) and valid UTF-8; the end of the log is kept.
func TestLogTailOfHostileBytes(t *testing.T) {
	for _, c := range []struct {
		name  string
		lines []string
		last  string // the last kept line
	}{
		{"html", slices.Repeat([]string{strings.Repeat("<a&b>", 100)}, 300), strings.Repeat("<a&b>", 100)},
		{"escapes and NUL", slices.Repeat([]string{"\x1b[31mred\x1b[0m\x00\x07 \u2028 \"q\" \\"}, 5000), "[31mred[0m \u2028 \"q\" \\"},
		{"bytes that are not UTF-8", []string{"ok", "bad \xff\xfe end"}, "bad \uFFFD end"},
		{"one long line of <", []string{strings.Repeat("<", 3*MaxLogTailBytes) + "end"}, ""},
		{"C1 controls", []string{"a\u0085b\u009bc\td"}, "abc\td"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tail, _ := LogTailOf(c.lines)
			b, err := json.Marshal(tail)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > MaxLogTailBytes+2 { // the brackets; a comma fewer than lines
				t.Fatalf("stored in %d bytes, over %d", len(b), MaxLogTailBytes)
			}
			for _, l := range tail {
				if !utf8.ValidString(l) || strings.ContainsFunc(l, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) {
					t.Fatalf("kept %q", l)
				}
			}
			if c.last != "" && tail[len(tail)-1] != c.last {
				t.Fatalf("the last line kept: %q, want %q", tail[len(tail)-1], c.last)
			}
			if c.name == "one long line of <" && (!strings.HasSuffix(tail[0], "end") || len(b) < MaxLogTailBytes-16) {
				t.Fatalf("a long line keeps its end, near the bound: %d bytes", len(b))
			}
		})
	}
}

// What the platform knows to be secret is never kept: the signature and
// token of a presigned package URL that a driver printed, in the log
// tail and in the message a run takes from Ray.
func TestSecretsNotKept(t *testing.T) {
	url := "https://jobs-1250000000.cos.ap-guangzhou.myqcloud.com/pkg/job.zip?q-sign-algorithm=sha1&q-ak=AKIDx&q-sign-time=1;2&q-key-time=1;2&q-header-list=host&q-url-param-list=&q-signature=0123abcd&x-cos-security-token=TOKEN42"
	s3 := "https://b.s3.amazonaws.com/k.zip?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=feedbeef&X-Amz-Security-Token=TOK"
	tail, _ := LogTailOf([]string{"working_dir: " + url, "and " + s3})
	msg := Observation{State: Failed, Message: "Job entrypoint command failed with exit code 1, last available logs:\n" + url}.Bounded().Message
	for _, kept := range append(tail, msg) {
		for _, secret := range []string{"0123abcd", "TOKEN42", "feedbeef", "AKIA%2F1", "=TOK"} {
			if strings.Contains(kept, secret) {
				t.Errorf("kept %q", kept)
			}
		}
	}
	if got := RedactSecrets("design=blue sign=abc"); got != "design=blue sign=REDACTED" {
		t.Errorf("a parameter named like one: %q", got)
	}
	if !strings.Contains(tail[0], "q-signature=REDACTED") || !strings.Contains(tail[0], "/pkg/job.zip?") {
		t.Errorf("kept %q: the URL's place is kept, its secret not", tail[0])
	}
}
