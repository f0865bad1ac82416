// Package cli is the command tree of kubectl-dlc, the kubectl plugin over
// the dlc SDK: get, describe, create, apply, start, hibernate, delete,
// submit, logs, why, plan and quota, printed as kubectl prints (aligned
// tables with NAME or ID first and an AGE, or -o yaml|json|wide).
//
// The tree is built by NewCommand from an Env: the streams it writes to
// and a Connect function that returns the platform client the commands
// act through and the user they act as. cmd/kubectl-dlc connects to the
// Kubernetes backend with the kubeconfig flags (KubeConnector) as an
// observer client (dlc.WithObserver): it writes desired state and reads,
// and the platform's own replicas reconcile. Tests connect it to the
// memory fixture (dlctest.NewMemory) instead.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/errs"
)

// Session is a connection to the platform that one command uses.
type Session struct {
	// Client is the platform client the command acts through.
	Client *dlc.Client
	// User is who the command acts as (the context's auth.User), and
	// Groups the groups it is in.
	User   string
	Groups []string
	// Close releases the session; nil when there is nothing to release.
	Close func() error
}

// Env is what the command tree needs from outside.
type Env struct {
	// IO are the streams the commands read files from (-f -) and write to.
	IO genericiooptions.IOStreams
	// Connect opens a session; it is called once per command that needs
	// the platform, with the command's context. Required.
	Connect func(ctx context.Context) (*Session, error)
	// Now is the clock the AGE columns count from; nil means time.Now.
	Now func() time.Time
	// Flags, when set, are the kubeconfig flags (--kubeconfig, --context,
	// -n, --as, …) added to the root command: the ones Connect reads.
	Flags *genericclioptions.ConfigFlags
}

// MaxChunkSize bounds --chunk-size: the most objects one page asks for.
const MaxChunkSize = 5000

// NewCommand returns the root command of kubectl-dlc with every
// subcommand. env.Connect must be set.
func NewCommand(env Env) *cobra.Command {
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.IO.In == nil {
		env.IO.In = eofReader{}
	}
	if env.IO.Out == nil {
		env.IO.Out = io.Discard
	}
	if env.IO.ErrOut == nil {
		env.IO.ErrOut = io.Discard
	}
	root := &cobra.Command{
		Use:   "kubectl-dlc",
		Short: "Manage the dlc Ray platform: clusters, jobs, runs and quota",
		Long: `kubectl dlc manages the clusters, cluster groups, templates, job configs,
runs and resource groups of a dlc platform on Kubernetes.

It connects with your kubeconfig (the same flags as kubectl) to the platform
namespace (-n), as an observer: it writes what you ask for and reads, while
the platform's own replicas do the work. Every call acts as the user the API
server authenticates (after --as); the API server's RBAC decides what it may
read and write.`,
		Example: `  kubectl dlc get clusters -n dlc-system
  kubectl dlc create -f cluster.yaml
  kubectl dlc submit -f job.yaml --follow
  kubectl dlc why run-0123abcd`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	if env.Flags != nil {
		env.Flags.AddFlags(root.PersistentFlags())
	}
	root.SetIn(env.IO.In)
	root.SetOut(env.IO.Out)
	root.SetErr(env.IO.ErrOut)
	e := &app{env: env}
	root.AddCommand(
		e.getCmd(), e.describeCmd(),
		e.createCmd(), e.applyCmd(), e.startCmd(), e.hibernateCmd(), e.deleteCmd(),
		e.submitCmd(), e.logsCmd(), e.whyCmd(), e.planCmd(), e.quotaCmd(), e.usageCmd(),
	)
	return root
}

// Execute runs cmd with args and ctx, prints an error as PrintError does to
// errOut, and returns the process's exit code: 0, or 1 on an error.
func Execute(ctx context.Context, cmd *cobra.Command, args []string, errOut io.Writer) int {
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		PrintError(errOut, err)
		return 1
	}
	return 0
}

// PrintError writes err for a person: "error: " and its text, then each
// field error on a line of its own with its field path and rule ID, and for
// a refusal the action refused.
func PrintError(w io.Writer, err error) {
	var fe *errs.ForbiddenError
	fields := dlc.Fields(err)
	switch {
	case errors.As(err, &fe):
		fmt.Fprintf(w, "error: forbidden: user %q may not %s on %s", fe.User, fe.Action, fe.Resource)
		if fe.Reason != "" {
			fmt.Fprintf(w, " (%s)", fe.Reason)
		}
		fmt.Fprintln(w)
	case len(fields) > 0:
		fmt.Fprintf(w, "error: %s: %d problem(s):\n", headline(err), len(fields))
		for _, f := range fields {
			rule := f.Rule
			if rule == "" {
				rule = "-"
			}
			path := string(f.Path)
			if path == "" {
				path = "(root)"
			}
			msg := string(f.Type)
			if f.Detail != "" {
				msg += ": " + f.Detail
			}
			fmt.Fprintf(w, "  [%s] %s: %s\n", rule, path, msg)
		}
	default:
		fmt.Fprintf(w, "error: %v\n", err)
	}
}

// headline is what an error with field errors is about: its context (the
// text before the first field error's), or "invalid".
func headline(err error) string {
	var ce *contextError
	if errors.As(err, &ce) {
		return ce.what
	}
	return "invalid"
}

// contextError names what a wrapped error is about ("cluster.yaml",
// "create cluster x") without repeating its field errors.
type contextError struct {
	what string
	err  error
}

func (e *contextError) Error() string { return e.what + ": " + e.err.Error() }
func (e *contextError) Unwrap() error { return e.err }

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return &contextError{what: what, err: err}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// app holds the environment the commands share.
type app struct {
	env Env
}

// session opens a session and returns the context that acts as its user.
func (a *app) session(ctx context.Context) (context.Context, *Session, func(), error) {
	s, err := a.env.Connect(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if s == nil || s.Client == nil {
		return nil, nil, nil, errors.New("connect returned no client")
	}
	done := func() {
		if s.Close != nil {
			if err := s.Close(); err != nil {
				fmt.Fprintf(a.env.IO.ErrOut, "warning: closing the connection: %v\n", err)
			}
		}
	}
	if s.User != "" {
		ctx = auth.NewContext(ctx, auth.User{Name: s.User, Groups: s.Groups})
	}
	return ctx, s, done, nil
}

// withSession runs f with a session.
func (a *app) withSession(cmd *cobra.Command, f func(ctx context.Context, c *dlc.Client) error) error {
	ctx, s, done, err := a.session(cmd.Context())
	if err != nil {
		return err
	}
	defer done()
	return f(ctx, s.Client)
}
