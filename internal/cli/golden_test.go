package cli_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// ids matches the platform's generated ids.
var ids = regexp.MustCompile(`\b(cls|grp|job|run|od|ondemand)-[a-z0-9]{6,}\b`)

// normalizer replaces each generated id by a placeholder of the same
// length (numbered in order of first appearance, across every output of
// one test), so that a golden file holds nothing random and its columns
// stay as aligned as the output's.
type normalizer struct {
	seen map[string]string
	n    map[string]int
}

func (z *normalizer) do(s string) string {
	if z.seen == nil {
		z.seen, z.n = map[string]string{}, map[string]int{}
	}
	return ids.ReplaceAllStringFunc(s, func(id string) string {
		if p, ok := z.seen[id]; ok {
			return p
		}
		prefix, rest, _ := strings.Cut(id, "-")
		if rest == "planned" { // a plan's run, not an id
			return id
		}
		z.n[prefix]++
		num := fmt.Sprintf("%d", z.n[prefix])
		p := prefix + "-" + strings.Repeat("0", max(len(rest)-len(num), 0)) + num
		z.seen[id] = p
		return p
	})
}

// story makes the platform the golden tests print: two clusters (one
// running, one created), a template, a job config on the running cluster
// and a run of it that succeeded.
type story struct {
	*fixture
	running, created, jobID, runID string
}

func newStory(t *testing.T) *story {
	f := newFixture(t, fixtureOptions{})
	s := &story{fixture: f}
	s.running = created(t, f.must("create", "-f", f.file("cluster-cpu-autoscaling.yaml"), "--request-id", "a"), "cluster")
	s.created = created(t, f.must("create", "-f", f.file("cluster-mounts.yaml", func(y string) string {
		return strings.Replace(y, "image: ray", "tags: {team: vision, env: prod}\nimage: ray", 1)
	}), "--request-id", "b"), "cluster")
	f.must("create", "-f", f.file("template-gpu-a100.yaml"))
	f.settle()
	f.must("start", s.running)
	f.settle()
	out := f.must("submit", "-f", f.file("job-on-cluster.yaml", func(y string) string {
		return strings.ReplaceAll(y, "cls-replaceme01", s.running)
	}), "--request-id", "r1")
	s.jobID, s.runID = created(t, out, "job"), created(t, out, "run")
	f.settle()
	return s
}

func TestGoldenGet(t *testing.T) {
	s := newStory(t)
	var z normalizer
	for _, c := range []struct {
		name string
		args []string
	}{
		{"get-clusters", []string{"get", "clusters"}},
		{"get-clusters-wide", []string{"get", "clusters", "-o", "wide"}},
		{"get-clusters-selector", []string{"get", "clusters", "-l", "team=vision,env!=dev,!cost-center"}},
		{"get-clusters-chunked", []string{"get", "clusters", "--chunk-size", "1"}},
		{"get-cluster-one", []string{"get", "cluster", s.running}},
		{"get-groups", []string{"get", "groups", "-o", "wide"}},
		{"get-templates", []string{"get", "templates", "-o", "wide"}},
		{"get-jobs", []string{"get", "jobs", "-o", "wide"}},
		{"get-job-json", []string{"get", "job", s.jobID, "-o", "json"}},
		{"get-runs", []string{"get", "runs", "-o", "wide"}},
		{"get-runs-selector", []string{"get", "runs", "-l", "team=search"}},
		{"get-resourcegroups", []string{"get", "resourcegroups"}},
		{"get-resourcegroup-yaml", []string{"get", "rg", "rg-cpu", "-o", "yaml"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			golden(t, c.name, z.do(s.must(c.args...)))
		})
	}
}

func TestGoldenDescribe(t *testing.T) {
	s := newStory(t)
	var z normalizer
	normalize := z.do
	golden(t, "describe-cluster", normalize(s.must("describe", "cluster", s.running)))
	golden(t, "describe-run", normalize(s.must("describe", "run", s.runID)))
	golden(t, "describe-job", normalize(s.must("describe", "job", s.jobID)))
}

// onDemandJob is an on-demand job in rg-cpu that needs a head of 4 cores
// and a worker of 8.
func onDemandJob(name string) string {
	return `name: ` + name + `
onDemand:
  resourcePackage: pkg-1
  resourceGroup: rg-cpu
  environment:
    image: ray-2.46.0-py310-cpu
    headGroup: {name: head, nodeSpec: cu.4c16g}
    workerGroups:
      - {name: cpu, nodeSpec: cu.8c32g, instances: {min: 1, max: 2}}
tags: {team: search}
package: {cos: "cos://jobs-1250000000/train/job.zip"}
entrypoint: python train.py
`
}

// queued makes a resource group of 24 cores whose running cluster holds
// 20, and two on-demand runs of 12 cores each waiting for quota.
func queued(t *testing.T) (f *fixture, first, second string) {
	f = newFixture(t, fixtureOptions{cpu: 24})
	cls := created(t, f.must("create", "-f", f.file("cluster-cpu-autoscaling.yaml"), "--request-id", "a"), "cluster")
	f.settle()
	f.must("start", cls)
	f.settle()
	f.in = onDemandJob("train-a")
	first = created(t, f.must("submit", "-f", "-", "--request-id", "q1"), "run")
	f.settle()
	f.in = onDemandJob("train-b")
	second = created(t, f.must("submit", "-f", "-", "--request-id", "q2"), "run")
	f.settle()
	return f, first, second
}

func TestGoldenQueue(t *testing.T) {
	f, first, second := queued(t)
	var z normalizer
	normalize := z.do
	golden(t, "why-first", normalize(f.must("why", first)))
	golden(t, "why-second", normalize(f.must("why", second)))
	golden(t, "quota", normalize(f.must("quota", "rg-cpu")))
	golden(t, "why-second-yaml", normalize(f.must("why", second, "-o", "yaml")))
	golden(t, "describe-run-waiting", normalize(f.must("describe", "run", second)))
	f.in = onDemandJob("train-a")
	golden(t, "plan-job", normalize(f.must("plan", "-f", "-")))
	golden(t, "plan-cluster", normalize(f.must("plan", "-f", f.file("cluster-mounts.yaml", func(y string) string {
		return strings.Replace(y, "cu.16c64g", "cu.4c8g", 1)
	}))))
}

func TestGoldenFieldErrors(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	p := f.file("cluster-cpu-autoscaling.yaml", func(y string) string {
		y = strings.Replace(y, "priority: 6", "priority: 12", 1)
		y = strings.Replace(y, "{min: 1, max: 8}", "{min: 9, max: 8}", 1)
		return strings.Replace(y, "nodeSpec: cu.4c8g", "nodeSpec: cu.nosuch", 1)
	})
	var z normalizer
	normalize := z.do
	out, errOut, code := f.run("create", "-f", p)
	if code == 0 {
		t.Fatalf("an invalid cluster was created: %s", out)
	}
	golden(t, "error-fields", strings.ReplaceAll(normalize(errOut), p, "cluster.yaml"))
	if got := f.must("get", "clusters"); !strings.Contains(got, "No clusters found.") {
		t.Errorf("the refused create left a cluster:\n%s", got)
	}
}

// A lowered ceiling that Ray has not applied yet is held, and describe
// says so until Ray runs it.
func TestDescribeDraining(t *testing.T) {
	s := newStory(t)
	if _, err := s.m.Client.Clusters().Autoscale(s.admin, s.running, "cpu", 4); err != nil {
		t.Fatal(err)
	}
	s.settle()
	if _, err := s.m.Client.Clusters().Autoscale(s.admin, s.running, "cpu", 1); err != nil {
		t.Fatal(err)
	}
	const line = "Draining:        cpu 4 workers (held until Ray runs the lower ceiling)"
	if out := s.must("describe", "cluster", s.running); !strings.Contains(out, line) {
		t.Fatalf("describe of a cluster whose ceiling was lowered has no %q:\n%s", line, out)
	}
	s.settle()
	if out := s.must("describe", "cluster", s.running); strings.Contains(out, "Draining") {
		t.Fatalf("describe once Ray runs the lower ceiling still says it drains:\n%s", out)
	}
}
