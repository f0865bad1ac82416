package group_test

import (
	"strings"
	"testing"

	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/internal/fieldtest"
)

// G5: a group name is required, at most 64 characters, and shown as it
// reads: no invisible-only names, no control or bidirectional characters.
func TestValidateNameG5(t *testing.T) {
	cases := []struct {
		name, in string
		bad      bool
	}{
		{"valid", "推荐-gpu 组", false},
		{"valid 64 characters", strings.Repeat("组", 64), false},
		{"required", "", true},
		{"blank", "  ", true},
		{"too long", strings.Repeat("组", 65), true},
		{"control", "a\tb", true},
		{"zero-width only", "\u200b", true},
		{"word joiner only", "\u2060\u2060", true},
		{"byte-order mark only", "\ufeff", true},
		{"bidi override", "gpu\u202e", true},
		{"bidi isolate", "\u2067gpu", true},
		{"Hangul filler only", "\u3164", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var wants []fieldtest.Want
			if tc.bad {
				wants = []fieldtest.Want{{"name", "G5"}}
			}
			fieldtest.Check(t, group.ValidateName(tc.in), wants)
		})
	}
}
