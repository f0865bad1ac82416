package cli_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/internal/cli"
	"github.com/aidlc/dlc/quota"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// syncBuffer is a buffer that a command writes while the test reads it.
// Each write closes changed, for a test that waits for some output.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

// next returns what it holds and a channel closed at the next write.
func (s *syncBuffer) next() (string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.b.String(), s.changed
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fixture is a platform on the memory backend: the fixture's client is the
// platform (it reconciles), and the CLI connects with an observer client of
// its own, as kubectl-dlc does on Kubernetes.
type fixture struct {
	t     *testing.T
	m     *dlctest.Memory
	admin context.Context // the platform's client acting as "admin"
	cli   *dlc.Client     // the CLI's observer client
	user  string
	group string // a cluster group's id
	in    string // standard input of the next command
}

type fixtureOptions struct {
	ray  memory.RayHooks
	more []dlc.Option // more options of the CLI's client
	cpu  int64        // the resource group's cores; 0: 64
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	m := dlctest.NewMemory(dlctest.MemoryOptions{T: t, Ray: o.ray})
	f := &fixture{t: t, m: m, admin: dlc.WithUser(t.Context(), "admin"), user: "alice"}
	if o.cpu == 0 {
		o.cpu = 64
	}
	if _, err := m.Client.ResourceGroups().Register(f.admin, quota.Group{ID: "rg-cpu", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: o.cpu * 1000, Memory: o.cpu * 4 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	g, err := m.Client.Groups().Create(f.admin, "search")
	if err != nil {
		t.Fatal(err)
	}
	f.group = g.ID
	f.cli = m.NewClient(append([]dlc.Option{dlc.WithObserver()}, o.more...)...)
	f.settle()
	return f
}

func (f *fixture) settle() { f.m.Settle(time.Second, 600) }

// env is the CLI's environment: the observer client as f.user, the AGE
// columns from the fake clock.
func (f *fixture) env(out, errOut *syncBuffer) cli.Env {
	return cli.Env{
		IO: genericiooptions.IOStreams{In: strings.NewReader(f.in), Out: out, ErrOut: errOut},
		Connect: func(context.Context) (*cli.Session, error) {
			return &cli.Session{Client: f.cli, User: f.user}, nil
		},
		Now: f.m.Clock.Now,
	}
}

// run runs the CLI with args and returns what it printed and its exit code.
func (f *fixture) run(args ...string) (stdout, stderr string, code int) {
	f.t.Helper()
	return f.runCtx(f.t.Context(), args...)
}

func (f *fixture) runCtx(ctx context.Context, args ...string) (stdout, stderr string, code int) {
	f.t.Helper()
	var out, errOut syncBuffer
	code = cli.Execute(ctx, cli.NewCommand(f.env(&out, &errOut)), args, &errOut)
	f.in = ""
	return out.String(), errOut.String(), code
}

// must runs the CLI and fails the test unless it succeeds.
func (f *fixture) must(args ...string) string {
	f.t.Helper()
	out, errOut, code := f.run(args...)
	if code != 0 {
		f.t.Fatalf("kubectl dlc %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// file writes an example config into a temporary file, with the fixture's
// ids in place of the placeholders, and edit applied.
func (f *fixture) file(example string, edit ...func(string) string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "configs", example))
	if err != nil {
		f.t.Fatal(err)
	}
	s := strings.ReplaceAll(string(b), "grp-replaceme01", f.group)
	for _, e := range edit {
		s = e(s)
	}
	p := filepath.Join(f.t.TempDir(), example)
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// created returns the id a create printed ("cluster/<id> created ...").
func created(t *testing.T, out, kind string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, kind+"/"); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no %s/ in %q", kind, out)
	return ""
}

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to write it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, p, got, want)
	}
}

// cliExecute runs the CLI with its own buffers, for a command that runs
// while the test goes on.
func cliExecute(ctx context.Context, f *fixture, out, errOut *syncBuffer, args ...string) int {
	return cli.Execute(ctx, cli.NewCommand(f.env(out, errOut)), args, errOut)
}

// waitFor waits until b holds s, failing the test after a minute (a bound
// for a test that hangs, not a timing assertion).
func waitFor(t *testing.T, b *syncBuffer, s string) {
	t.Helper()
	waitUntil(t, b, func(got string) bool { return strings.Contains(got, s) })
}

// waitUntil waits until what b holds satisfies done, failing the test
// after a minute.
func waitUntil(t *testing.T, b *syncBuffer, done func(string) bool) {
	t.Helper()
	hang := time.NewTimer(time.Minute)
	defer hang.Stop()
	for {
		got, changed := b.next()
		if done(got) {
			return
		}
		select {
		case <-changed:
		case <-hang.C:
			t.Fatalf("not there yet:\n%s", got)
		}
	}
}
