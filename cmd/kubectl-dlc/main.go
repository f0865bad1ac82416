// Command kubectl-dlc is the kubectl plugin of the dlc platform: installed
// on PATH as kubectl-dlc, it runs as "kubectl dlc …" and manages clusters,
// cluster groups, templates, job configs, runs and resource groups with
// the kubeconfig's credentials (docs/cli.md).
//
//	go install github.com/aidlc/dlc/cmd/kubectl-dlc@latest
//	kubectl dlc get clusters -n dlc-system
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/aidlc/dlc/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	flags := genericclioptions.NewConfigFlags(true)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	connect := cli.KubeConnector{Flags: flags, COSRegion: os.Getenv("DLC_COS_REGION"), LogsLocation: os.Getenv("DLC_LOGS_LOCATION")}.Connect
	root := cli.NewCommand(cli.Env{IO: streams, Flags: flags, Connect: connect})
	code := cli.Execute(ctx, root, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
