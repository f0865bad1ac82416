package kube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/aidlc/dlc/errs"
)

// HeadGuard keeps one slow Ray head from holding up the callers of the
// others: a user's head runs the user's image, and may accept a call and
// never answer it. Heads are told apart by their base URL.
//
//   - At most one call to a head is in flight. Another caller fails at
//     once with an error that is errors.Is errs.ErrUnavailable and has a
//     method Busy() bool that returns true (the client's reconcilers retry
//     it with backoff, without counting it as a failed step); JobsClient.Logs
//     waits instead, within its deadline.
//   - A call that times out opens the head's breaker: for Backoff, doubled
//     with each timeout in a row up to 16 times Backoff, every call to that
//     head fails at once with ErrUnavailable. The first call after that is
//     made; any answer from the head closes the breaker.
//
// So a head that hangs holds at most one caller at a time, for at most
// one call's deadline per backoff window. The zero value is ready to use
// with DefaultHeadBackoff; a HeadGuard is safe for concurrent use.
type HeadGuard struct {
	// Backoff is how long calls to a head fail at once after a call to it
	// timed out; 0 means DefaultHeadBackoff.
	Backoff time.Duration

	mu    sync.Mutex
	heads map[string]*headState
}

// DefaultHeadBackoff is HeadGuard.Backoff when it is zero.
const DefaultHeadBackoff = 15 * time.Second

type headState struct {
	slot  chan struct{} // holds a token while a call is in flight
	users int           // callers holding or waiting for the slot
	until time.Time     // calls fail at once until then
	trips int           // timeouts in a row
}

// callOutcome is what a call's end says about its head.
type callOutcome int

const (
	callFailed   callOutcome = iota // failed before the head answered, not by timing out: says nothing
	callAnswered                    // the head answered: it is alive
	callTimedOut                    // the head did not answer in time
)

// headBusyError is the error of a call not made because another call to
// the same head is in flight.
type headBusyError struct{ head string }

func (e *headBusyError) Error() string {
	return "ray head " + e.head + ": unavailable: busy: another call to it is in flight; try again"
}

// Is makes a busy head errors.Is errs.ErrUnavailable.
func (e *headBusyError) Is(target error) bool { return target == errs.ErrUnavailable }

// Busy says the call was not made because the head was busy: a retry is
// not a failure.
func (e *headBusyError) Busy() bool { return true }

func (g *HeadGuard) backoff() time.Duration {
	if g.Backoff > 0 {
		return g.Backoff
	}
	return DefaultHeadBackoff
}

// enter takes head's slot for one call, or fails: at once while the
// head's breaker is open, at once when the slot is taken and !wait, else
// when ctx is done first. leave gives the slot back and records the call's
// outcome.
func (g *HeadGuard) enter(ctx context.Context, head string, wait bool) (leave func(callOutcome), err error) {
	g.mu.Lock()
	if g.heads == nil {
		g.heads = map[string]*headState{}
	}
	st := g.heads[head]
	if st == nil {
		st = &headState{slot: make(chan struct{}, 1)}
		g.heads[head] = st
	}
	if err := g.openLocked(head, st); err != nil {
		g.mu.Unlock()
		return nil, err
	}
	st.users++
	g.mu.Unlock()
	select {
	case st.slot <- struct{}{}:
	default:
		if !wait {
			g.drop(head, st)
			return nil, &headBusyError{head: head}
		}
		select {
		case st.slot <- struct{}{}:
		case <-ctx.Done():
			g.drop(head, st)
			return nil, errs.Unavailable("ray head "+head, fmt.Errorf("busy: another call to it did not end in time: %w", ctx.Err()))
		}
	}
	// The call before may have opened the breaker while this one waited.
	g.mu.Lock()
	if err := g.openLocked(head, st); err != nil {
		<-st.slot
		g.mu.Unlock()
		g.drop(head, st)
		return nil, err
	}
	g.mu.Unlock()
	return func(o callOutcome) {
		g.mu.Lock()
		switch o {
		case callAnswered:
			st.trips, st.until = 0, time.Time{}
		case callTimedOut:
			st.trips++
			st.until = time.Now().Add(g.backoff() << min(st.trips-1, 4))
		}
		<-st.slot
		g.mu.Unlock()
		g.drop(head, st)
	}, nil
}

// openLocked returns the error of a call to a head whose breaker is open.
func (g *HeadGuard) openLocked(head string, st *headState) error {
	if now := time.Now(); now.Before(st.until) {
		return errs.Unavailable("ray head "+head, fmt.Errorf("it did not answer in time %d times in a row; it is called again in %s",
			st.trips, st.until.Sub(now).Round(time.Millisecond)))
	}
	return nil
}

// drop counts a caller out, and forgets a head nobody calls whose
// breaker is closed.
func (g *HeadGuard) drop(head string, st *headState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st.users--
	if st.users == 0 && st.trips == 0 && g.heads[head] == st {
		delete(g.heads, head)
	}
}

// Prune forgets the heads nobody calls whose breaker closed more than the
// longest backoff ago (a cluster deleted while its head hung), so that the
// guard holds only heads in use. The provisioner calls it every poll
// interval.
func (g *HeadGuard) Prune() {
	g.mu.Lock()
	defer g.mu.Unlock()
	limit := time.Now().Add(-g.backoff() << 4)
	for head, st := range g.heads {
		if st.users == 0 && st.until.Before(limit) {
			delete(g.heads, head)
		}
	}
}

// logsError is an answer to a logs call that is not the JSON object Ray
// sends.
type logsError struct{ why string }

func (e *logsError) Error() string {
	return "the Ray head's logs answer is not {\"logs\": \"...\"}: " + e.why
}

// errReadLimit stops reading a logs answer at its bound.
var errReadLimit = errors.New("read limit")

// tailLogs decodes Ray's logs answer, {"logs": "<text>"}, from r as it
// reads it, keeping only the last keep bytes of the text: reading at most
// limit bytes, whatever the length of the answer, and holding at most
// 2*keep. Logs longer than keep start with a line saying how much was
// cut; an answer longer than limit ends with a line saying the rest was
// not read.
func tailLogs(r io.Reader, limit int64, keep int) (string, error) {
	s := &logScanner{r: bufio.NewReader(r), limit: limit}
	t := &tail{keep: keep}
	err := s.logsObject(t)
	cutEnd := errors.Is(err, errReadLimit) && t.started
	switch {
	case cutEnd:
	case errors.Is(err, errReadLimit):
		return "", &logsError{why: fmt.Sprintf("no logs in its first %d bytes", limit)}
	case err != nil:
		return "", err
	}
	return t.text(cutEnd, limit), nil
}

// text is what t kept as valid UTF-8: after a line saying how many bytes
// before it were cut, if any, and before one saying the answer was not
// read to its end, when cutEnd.
func (t *tail) text(cutEnd bool, limit int64) string {
	var b strings.Builder
	text := t.bytes()
	// Cut at a rune's start, so that what is shown is valid text.
	skip := 0
	if t.total > int64(len(text)) {
		for skip < len(text) && !utf8.RuneStart(text[skip]) {
			skip++
		}
		fmt.Fprintf(&b, "[dlc: logs cut: the first %d bytes are not shown]\n", t.total-int64(len(text)-skip))
	}
	b.WriteString(strings.ToValidUTF8(string(text[skip:]), "\uFFFD"))
	if cutEnd {
		fmt.Fprintf(&b, "\n[dlc: logs cut: the Ray head's answer is over %d bytes; the logs after that were not read]\n", limit)
	}
	return b.String()
}

// tailRaw reads a log's raw bytes from r, keeping only the last keep
// bytes and reading at most limit, and returns them as tailLogs does
// (Ray's log API streams the file as it is, with no JSON around it):
// bytes that are not UTF-8 as U+FFFD, a line saying how much was cut from
// the front, and one saying the rest was not read past limit.
func tailRaw(r io.Reader, limit int64, keep int) (string, error) {
	t := &tail{keep: keep}
	buf := make([]byte, 32<<10)
	lr := io.LimitReader(r, limit+1) // a byte more tells a log of limit bytes from a longer one
	for {
		n, err := lr.Read(buf)
		if over := t.total + int64(n) - limit; over > 0 {
			n -= int(over)
		}
		t.write(buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
	}
	return t.text(lr.(*io.LimitedReader).N == 0, limit), nil
}

// tail keeps the last keep bytes written to it.
type tail struct {
	keep    int
	buf     []byte
	total   int64
	started bool // the logs string has begun
}

func (t *tail) write(p ...byte) {
	t.total += int64(len(p))
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.keep {
		n := copy(t.buf, t.buf[len(t.buf)-t.keep:])
		t.buf = t.buf[:n]
	}
}

func (t *tail) bytes() []byte {
	if len(t.buf) > t.keep {
		return t.buf[len(t.buf)-t.keep:]
	}
	return t.buf
}

// logScanner reads JSON a byte at a time, up to limit bytes.
type logScanner struct {
	r     *bufio.Reader
	n     int64
	limit int64
}

func (s *logScanner) next() (byte, error) {
	if s.n >= s.limit {
		return 0, errReadLimit
	}
	b, err := s.r.ReadByte()
	if err == io.EOF {
		return 0, &logsError{why: "it ends early"}
	}
	if err != nil {
		return 0, err
	}
	s.n++
	return b, nil
}

func (s *logScanner) back() {
	_ = s.r.UnreadByte()
	s.n--
}

// token returns the next byte that is not white space.
func (s *logScanner) token() (byte, error) {
	for {
		b, err := s.next()
		if err != nil || (b != ' ' && b != '\t' && b != '\n' && b != '\r') {
			return b, err
		}
	}
}

// logsObject reads the answer's object, writing the "logs" member's text
// to t and skipping any other member.
func (s *logScanner) logsObject(t *tail) error {
	if b, err := s.token(); err != nil {
		return err
	} else if b != '{' {
		return &logsError{why: fmt.Sprintf("it starts with %q", b)}
	}
	for first := true; ; first = false {
		b, err := s.token()
		if err != nil {
			return err
		}
		if b == '}' && first {
			return nil
		}
		if b != '"' {
			return &logsError{why: fmt.Sprintf("%q where a member's name belongs", b)}
		}
		key := &tail{keep: 64}
		if err := s.str(key); err != nil {
			return err
		}
		if b, err := s.token(); err != nil {
			return err
		} else if b != ':' {
			return &logsError{why: fmt.Sprintf("%q after a member's name", b)}
		}
		if key.total == 4 && string(key.bytes()) == "logs" {
			b, err := s.token()
			switch {
			case err != nil:
				return err
			case b == '"':
				t.started = true
				if err := s.str(t); err != nil {
					return err
				}
			case b == 'n': // null: no logs
				s.back()
				if err := s.skip(); err != nil {
					return err
				}
			default:
				return &logsError{why: fmt.Sprintf("logs is not a string but starts with %q", b)}
			}
		} else if err := s.skip(); err != nil {
			return err
		}
		b, err = s.token()
		switch {
		case err != nil:
			return err
		case b == '}':
			return nil
		case b != ',':
			return &logsError{why: fmt.Sprintf("%q after a member", b)}
		}
	}
}

// str decodes the rest of a JSON string (its opening quote read) into t.
func (s *logScanner) str(t *tail) error {
	var enc [utf8.UTFMax]byte
	for {
		if s.plain(t) {
			continue
		}
		b, err := s.next()
		if err != nil {
			return err
		}
		switch b {
		case '"':
			return nil
		case '\\':
		default:
			t.write(b)
			continue
		}
		e, err := s.next()
		if err != nil {
			return err
		}
		switch e {
		case '"', '\\', '/':
			t.write(e)
		case 'b':
			t.write('\b')
		case 'f':
			t.write('\f')
		case 'n':
			t.write('\n')
		case 'r':
			t.write('\r')
		case 't':
			t.write('\t')
		case 'u':
			r, err := s.hex4()
			if err != nil {
				return err
			}
			if utf16.IsSurrogate(r) {
				// A pair is \uD8xx\uDCxx; a lone half is a bad rune.
				if p, _ := s.r.Peek(2); r < 0xDC00 && string(p) == `\u` && s.n+2 <= s.limit {
					s.n += 2
					_, _ = s.r.Discard(2)
					r2, err := s.hex4()
					if err != nil {
						return err
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
					} else {
						t.write(enc[:utf8.EncodeRune(enc[:], utf8.RuneError)]...)
						r = r2
						if utf16.IsSurrogate(r) {
							r = utf8.RuneError
						}
					}
				} else {
					r = utf8.RuneError
				}
			}
			t.write(enc[:utf8.EncodeRune(enc[:], r)]...)
		default:
			return &logsError{why: fmt.Sprintf("a bad escape \\%c in a string", e)}
		}
	}
}

// plain copies to t the bytes already read ahead that need no decoding
// (up to a quote or a backslash, within the limit), and reports whether
// there were any.
func (s *logScanner) plain(t *tail) bool {
	chunk, _ := s.r.Peek(s.r.Buffered())
	if rest := s.limit - s.n; int64(len(chunk)) > rest {
		chunk = chunk[:rest]
	}
	i := bytes.IndexAny(chunk, `"\`)
	if i < 0 {
		i = len(chunk)
	}
	if i == 0 {
		return false
	}
	t.write(chunk[:i]...)
	_, _ = s.r.Discard(i)
	s.n += int64(i)
	return true
}

func (s *logScanner) hex4() (rune, error) {
	var r rune
	for range 4 {
		b, err := s.next()
		if err != nil {
			return 0, err
		}
		switch {
		case b >= '0' && b <= '9':
			r = r<<4 | rune(b-'0')
		case b >= 'a' && b <= 'f':
			r = r<<4 | rune(b-'a'+10)
		case b >= 'A' && b <= 'F':
			r = r<<4 | rune(b-'A'+10)
		default:
			return 0, &logsError{why: fmt.Sprintf("a bad \\u escape (%q)", b)}
		}
	}
	return r, nil
}

// skip reads one JSON value of any kind, keeping nothing of it.
func (s *logScanner) skip() error {
	depth := 0
	discard := &tail{keep: 0}
	for {
		b, err := s.next()
		if err != nil {
			return err
		}
		switch {
		case b == '"':
			if err := s.str(discard); err != nil {
				return err
			}
			if depth == 0 {
				return nil
			}
		case b == '{' || b == '[':
			depth++
		case b == '}' || b == ']':
			if depth == 0 {
				s.back()
				return nil
			}
			if depth--; depth == 0 {
				return nil
			}
		case b == ',' && depth == 0:
			s.back()
			return nil
		}
	}
}
