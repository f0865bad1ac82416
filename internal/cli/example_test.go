package cli_test

import (
	"context"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/internal/cli"
	"github.com/aidlc/dlc/quota"
)

// The command tree on the memory fixture: the platform's client registers a
// resource group, and kubectl dlc, connected as alice with an observer
// client of its own, lists it. cmd/kubectl-dlc connects with
// cli.KubeConnector instead.
func ExampleNewCommand() {
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	defer m.Close()
	ctx := dlc.WithUser(context.Background(), "admin")
	if _, err := m.Client.ResourceGroups().Register(ctx, quota.Group{ID: "rg-cpu", Package: "pkg-1",
		Capacity: quota.Cores(16)}); err != nil {
		panic(err)
	}
	observer := m.NewClient(dlc.WithObserver())
	m.Settle(0, 10)
	root := cli.NewCommand(cli.Env{
		IO: genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stdout},
		Connect: func(context.Context) (*cli.Session, error) {
			return &cli.Session{Client: observer, User: "alice"}, nil
		},
		Now: m.Clock.Now,
	})
	cli.Execute(context.Background(), root, []string{"get", "resourcegroups"}, os.Stdout)
	cli.Execute(context.Background(), root, []string{"quota", "rg-nosuch"}, os.Stdout)
	// Output:
	// ID       PACKAGE   CAPACITY                  RESERVED                 ALLOCATABLE               HOLDERS
	// rg-cpu   pkg-1     cpu=16 memory=0Gi gpu=0   cpu=0 memory=0Gi gpu=0   cpu=16 memory=0Gi gpu=0   0
	// error: resource group "rg-nosuch" not found
}
