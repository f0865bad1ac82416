package job

import (
	"fmt"
	"strings"
	"testing"
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
