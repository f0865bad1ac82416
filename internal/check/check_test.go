package check_test

import (
	"strings"
	"testing"

	"github.com/aidlc/dlc/internal/check"
	"github.com/aidlc/dlc/internal/fieldtest"
)

// Name refuses names that look empty or read differently from what they
// hold: only invisible characters, or control, zero-width and
// bidirectional formatting characters anywhere.
func TestName(t *testing.T) {
	cases := []struct {
		name, in string
		bad      bool
		detail   string // a part of the error's text
	}{
		{"valid ASCII", "train-rn50", false, ""},
		{"valid Chinese", "训练 任务 1", false, ""},
		{"valid combining accent", "cafe\u0301", false, ""},
		{"valid at the limit", strings.Repeat("名", 10), false, ""},
		{"empty", "", true, "needs a name"},
		{"spaces", " \t ", true, "needs a name"},
		{"ideographic space", "\u3000", true, "needs a name"},
		{"too long", strings.Repeat("名", 11), true, "at most 10"},
		{"invalid UTF-8", "a\xffb", true, "UTF-8"},
		{"newline", "a\nb", true, "U+000A"},
		{"NUL", "a\x00", true, "U+0000"},
		{"DEL", "a\x7f", true, "U+007F"},
		{"C1 control", "a\u0085", true, "U+0085"},
		{"zero-width space only", "\u200b\u200b", true, "U+200B"},
		{"word joiner only", "\u2060", true, "U+2060"},
		{"byte-order mark only", "\ufeff", true, "U+FEFF"},
		{"zero-width inside", "tr\u200bain", true, "U+200B"},
		{"soft hyphen", "a\u00adb", true, "U+00AD"},
		{"left-to-right embedding", "\u202ajob", true, "U+202A"},
		{"right-to-left override", "j\u202egpj.exe", true, "U+202E"},
		{"pop directional formatting", "job\u202c", true, "U+202C"},
		{"left-to-right isolate", "\u2066job\u2069", true, "U+2066"},
		{"first strong isolate", "job\u2068x", true, "U+2068"},
		{"pop directional isolate", "job\u2069", true, "U+2069"},
		{"right-to-left mark", "job\u200f", true, "U+200F"},
		{"line separator", "a\u2028b", true, "U+2028"},
		{"paragraph separator", "a\u2029b", true, "U+2029"},
		{"Mongolian vowel separator", "\u180e", true, "U+180E"},
		{"Hangul filler only", "\u3164", true, "visible"},
		{"half-width Hangul filler and spaces", " \uffa0 ", true, "visible"},
		{"Braille blank only", "\u2800\u2800", true, "visible"},
		{"combining marks only", "\u0301\u0308", true, "visible"},
		{"no-break space and filler", "\u00a0\u115f\u1160", true, "visible"},
		{"private use only", "\ue000\uf8ff", true, "visible"},
		{"supplementary private use only", "\U000F0000\U0010FFFD", true, "visible"},
		{"unassigned only", "\u0378\U0002FFFD", true, "visible"},
		{"private use beside a letter", "a\ue000", false, ""},
		{"noncharacter only", "\ufdd0\ufdef", true, "U+FDD0"},
		{"noncharacter U+FFFE", "\ufffe", true, "U+FFFE"},
		{"plane noncharacter inside", "job\U0001FFFF", true, "U+1FFFF"},
		{"emoji", "训练 🚀", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := check.Name("name", "J1", "job config", tc.in, 10).ToError()
			if !tc.bad {
				fieldtest.Check(t, err, nil)
				return
			}
			fieldtest.Check(t, err, []fieldtest.Want{{"name", "J1"}})
			if !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("error does not say %q: %v", tc.detail, err)
			}
		})
	}
}

func TestPrefix(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 2, "ab"},
		{"训练", 4, "训"}, // 3-byte runes: 4 bytes end inside the second
		{"训练", 3, "训"},
		{"训练", 2, ""},
		{"", 0, ""},
	} {
		if got := check.Prefix(tc.s, tc.n); got != tc.want {
			t.Errorf("Prefix(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
