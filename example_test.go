package dlc_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/storage"
)

// Build a compute cluster spec: a head, an autoscaling worker group and a
// read-only dataset mount.
func ExampleNewCluster() {
	spec, err := dlc.NewCluster("训练集群_01").
		Groups("grp-1").
		Resources("pkg-1", "rg-1").
		Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").
		WorkerGroup("cpu", "cu.8c32g", 1, 4, cluster.Env("OMP_NUM_THREADS", "8")).
		Mount(storage.Mount{Type: storage.COS, Instance: "data-1250000000", SubPath: "imagenet", MountPath: "/data", ReadOnly: true}).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(spec.Name, spec.EffectivePriority(), spec.Workers[0].Instances.Autoscaling())
	// Output: 训练集群_01 5 true
}

// Build a job config that runs on an on-demand cluster, queued at
// priority 7 in its resource group.
func ExampleNewJob() {
	cfg, err := dlc.NewJob("train-resnet").
		OnDemand("pkg-1", "rg-gpu").
		Priority(7).
		Image("ray-2.46.0-py310-gpu").
		Head("head", "cu.8c32g").
		WorkerGroup("gpu", "gu.10c40g.1xa10", 1, 2).
		COSPackage("cos://jobs-1250000000/resnet/job.zip").
		Entrypoint("python main.py --config config.yaml").
		Pip("torchvision==0.19.0").
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Mode(), cfg.Target(), cfg.Priority())
	// Output: onDemand rg-gpu 7
}

// Build and Validate report every problem at once, each with its field
// path and rule ID.
func ExampleFields() {
	_, err := dlc.NewCluster("bad name!").
		Resources("pkg-1", "rg-1").
		Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").
		WorkerGroup("cpu", "cu.8c32g", 4, 2).
		Advanced("num-cpus", "64").
		Build()
	fmt.Println(errors.Is(err, dlc.ErrInvalid))
	for _, fe := range dlc.Fields(err) {
		fmt.Printf("%s [%s]\n", fe.Path, fe.Rule)
	}
	// Output:
	// true
	// name [C1]
	// groups [C2]
	// workerGroups[0].instances.max [C8]
	// advanced[num-cpus] [J11]
}

// A compute-environment template fills a new cluster's node groups; the
// copy is adjusted without changing the template (C6).
func ExampleNewCluster_fromTemplate() {
	tmpl, _ := dlc.NewCluster("").
		Image("ray-2.46.0-py310-gpu").
		Head("head", "cu.8c32g").
		WorkerGroup("gpu", "gu.10c40g.1xa10", 1, 4).
		BuildTemplate("a10-training")
	spec, err := dlc.NewCluster("a10_cluster").Groups("grp-1").Resources("pkg-1", "rg-1").
		FromTemplate(tmpl).
		EditWorkerGroup("gpu", func(w *cluster.WorkerGroup) { w.Instances = cluster.Range(2, 8) }).
		Build()
	fmt.Println(err, *spec.Workers[0].Instances.Max, *tmpl.Workers[0].Instances.Max)
	// Output: <nil> 8 4
}

// docs/guide.md's "Building specs": a cluster spec and an on-demand job
// config from a template (TestReadmeSnippets checks the region against
// docs/guide.md's block).
func Example_readmeBuilders() {
	groupID := "grp-1"
	tmpl, _ := dlc.NewCluster("").Image("ray-2.46.0-py310-gpu").Head("head", "cu.8c32g").
		WorkerGroup("gpu", "gu.10c40g.1xa10", 1, 4).BuildTemplate("a10-training")
	// snippet builders
	spec, err := dlc.NewCluster("训练集群_01").
		Groups(groupID).
		Resources("pkg-1", "rg-1").
		Image("ray-2.46.0-py310-cpu"). // a built-in image, or a registry address
		Head("head", "cu.4c16g").
		WorkerGroup("cpu", "cu.8c32g", 1, 4, cluster.Env("OMP_NUM_THREADS", "8")).
		Mount(storage.Mount{Type: storage.COS, Instance: "data-1250000000", MountPath: "/data", ReadOnly: true}).
		Build()

	cfg, err := dlc.NewJob("train-resnet").
		OnDemand("pkg-1", "rg-gpu").Priority(7). // or OnCluster(id) / OnGroup(id)
		FromTemplate(tmpl).                      // a saved compute environment (C6), copied
		COSPackage("cos://jobs-1250000000/resnet/job.zip").
		Entrypoint("python main.py --config config.yaml").
		Pip("torchvision==0.19.0").
		Build()
	// end snippet builders
	fmt.Println(spec.Name, cfg.Name, err)
	// Output: 训练集群_01 train-resnet <nil>
}

// docs/guide.md's YAML loading: a sample config of examples/configs, loaded
// strictly and validated.
func Example_readmeYAML() {
	// snippet yaml
	data, _ := os.ReadFile("examples/configs/cluster-gpu-ha.yaml")
	spec, err := cluster.UnmarshalYAML(data) // then spec.Validate(), c.Clusters().Create(ctx, spec)
	// end snippet yaml
	fmt.Println(err, spec.Validate(), spec.Name != "")
	// Output: <nil> <nil> true
}

// docs/guide.md's error handling: every problem at once, each a field path
// and a rule.
func Example_readmeErrors() {
	// snippet errors
	_, err := dlc.NewCluster("bad name!").WorkerGroup("cpu", "cu.8c32g", 4, 2).Build()
	fmt.Println(errors.Is(err, dlc.ErrInvalid)) // true
	for _, fe := range dlc.Fields(err) {        // every problem at once
		fmt.Println(fe.Path, fe.Rule) // name C1, groups C2, ..., workerGroups[0].instances.max C8
	}
	// end snippet errors

	// Output:
	// true
	// name C1
	// groups C2
	// resourcePackage C4
	// resourceGroup C4
	// image C5
	// headGroup.name C7
	// headGroup.nodeSpec C7
	// workerGroups[0].instances.max C8
}
