// Command quickstart shows the SDK end to end on the embedded in-memory
// backend: no Kubernetes cluster is needed.
//
//	go run ./examples/quickstart
package main

import (
	"fmt"
	"os"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	fmt.Println("== a valid cluster spec")
	spec, err := dlc.NewCluster("训练集群_01").
		Groups("grp-1").
		Resources("pkg-1", "rg-1").
		Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").
		WorkerGroup("cpu", "cu.8c32g", 1, 4, cluster.Env("OMP_NUM_THREADS", "8")).
		Build()
	if err != nil {
		return err
	}
	y, err := spec.MarshalYAML()
	if err != nil {
		return err
	}
	fmt.Print(string(y))

	fmt.Println("\n== a valid job config (on-demand cluster, priority 7)")
	cfg, err := dlc.NewJob("train-resnet").
		OnDemand("pkg-1", "rg-1").
		Priority(7).
		Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").
		WorkerGroup("cpu", "cu.8c32g", 1, 2).
		COSPackage("cos://jobs-1250000000/resnet/job.zip").
		Entrypoint("python main.py --config config.yaml").
		Build()
	if err != nil {
		return err
	}
	if y, err = cfg.MarshalYAML(); err != nil {
		return err
	}
	fmt.Print(string(y))

	fmt.Println("\n== a broken cluster spec: every problem at once")
	_, err = dlc.NewCluster("bad name!").
		Priority(12).
		Image("ray-9.9").
		Head("Head", "cu.1c1g").
		WorkerGroup("cpu", "cu.8c32g", 4, 2).
		Advanced("num-cpus", "64").
		Build()
	for _, fe := range dlc.Fields(err) {
		fmt.Printf("  %-32s [%s] %s\n", fe.Path, fe.Rule, fe.Detail)
	}
	return nil
}
