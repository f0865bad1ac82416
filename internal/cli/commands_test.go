package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
)

// cmdCase is one command line and what it must print and exit with.
type cmdCase struct {
	name   string
	args   func(s *story) []string
	in     string
	ok     bool
	out    []string // substrings of stdout
	errOut []string // substrings of stderr
	check  func(t *testing.T, s *story)
	drive  bool // the command waits on the platform: time must pass
}

func TestCommands(t *testing.T) {
	cases := []cmdCase{
		// get
		{name: "get clusters by state", ok: true,
			args: func(s *story) []string { return []string{"get", "clusters", "--state", "running"} },
			out:  []string{"训练集群_cpu_autoscaling"}},
		{name: "apply what get -o yaml prints",
			args:   func(*story) []string { return []string{"apply", "-f", "-"} },
			in:     "id: cls-x\nspec:\n  name: x\nstate: running\n",
			errOut: []string{`as "get -o yaml" prints it`}},
		{name: "get clusters by a state there is not",
			args:   func(*story) []string { return []string{"get", "clusters", "--state", "runing"} },
			errOut: []string{`--state "runing"`, "running"}},
		{name: "get unknown kind",
			args:   func(*story) []string { return []string{"get", "pods"} },
			errOut: []string{`unknown kind "pods"`}},
		{name: "get missing cluster",
			args:   func(*story) []string { return []string{"get", "cluster", "cls-nosuch"} },
			errOut: []string{"not found"}},
		{name: "get groups by tag",
			args:   func(*story) []string { return []string{"get", "groups", "-l", "team=a"} },
			errOut: []string{"groups have no tags"}},
		{name: "get bad selector",
			args:   func(*story) []string { return []string{"get", "clusters", "-l", "team=a,,x"} },
			errOut: []string{"an empty term"}},
		{name: "get bad output",
			args:   func(*story) []string { return []string{"get", "clusters", "-o", "toml"} },
			errOut: []string{`unknown output format "toml"`}},
		{name: "get chunk too large",
			args:   func(*story) []string { return []string{"get", "runs", "--chunk-size", "100000"} },
			errOut: []string{"--chunk-size must be 0 to 5000"}},
		{name: "get runs of a job", ok: true,
			args: func(s *story) []string { return []string{"get", "runs", "--job", s.jobID, "--chunk-size", "0"} },
			out:  []string{"succeeded"}},
		// describe
		{name: "describe missing run",
			args:   func(*story) []string { return []string{"describe", "run", "run-nosuch"} },
			errOut: []string{"not found"}},
		{name: "describe a group",
			args:   func(*story) []string { return []string{"describe", "group", "x"} },
			errOut: []string{`unknown kind "group"`}},
		// create
		{name: "create a template", ok: true,
			args: func(*story) []string { return []string{"create", "-f", "-"} },
			in:   "name: small\nimage: ray-2.46.0-py310-cpu\nheadGroup: {name: head, nodeSpec: cu.4c16g}\nworkerGroups:\n  - {name: w, nodeSpec: cu.4c8g, instances: {min: 1, max: 1}}\n",
			out:  []string{"template/small created"},
			check: func(t *testing.T, s *story) {
				if _, err := s.cli.Templates().Get(t.Context(), "small"); err != nil {
					t.Error(err)
				}
			}},
		{name: "create an existing template",
			args:   func(s *story) []string { return []string{"create", "-f", s.file("template-gpu-a100.yaml")} },
			errOut: []string{"exists (apply replaces it)"}},
		{name: "create with an unknown field",
			args:   func(*story) []string { return []string{"create", "-f", "-", "--kind", "cluster"} },
			in:     "name: x\nresourceGroup: rg-cpu\nbogus: 1\n",
			errOut: []string{"error: <stdin>: 1 problem(s):", `bogus: Unknown field: line 3: unknown field "bogus"`}},
		{name: "create from a missing file",
			args:   func(*story) []string { return []string{"create", "-f", "/nonexistent/x.yaml"} },
			errOut: []string{"no such file"}},
		{name: "create without -f",
			args:   func(*story) []string { return []string{"create"} },
			errOut: []string{`"filename" not set`}},
		{name: "create a cluster in a missing resource group",
			args:   func(s *story) []string { return []string{"create", "-f", s.file("cluster-gpu-ha.yaml")} },
			errOut: []string{"[C4] resourceGroup: Invalid value: no resource group"}},
		// apply
		{name: "apply a changed cluster", ok: true,
			args: func(s *story) []string {
				return []string{"apply", "-f", s.file("cluster-mounts.yaml", func(y string) string {
					return strings.Replace(y, "image: ray", "priority: 8\ntags: {team: vision, env: prod}\nimage: ray", 1)
				})}
			},
			out: []string{"configured"},
			check: func(t *testing.T, s *story) {
				c, err := s.cli.Clusters().Get(t.Context(), s.created)
				if err != nil || c.Spec.EffectivePriority() != 8 {
					t.Errorf("after apply: %v, %v", c, err)
				}
			}},
		{name: "apply an unchanged cluster", ok: true,
			args: func(s *story) []string { return []string{"apply", "-f", s.file("cluster-cpu-autoscaling.yaml")} },
			out:  []string{"unchanged"}},
		{name: "apply an unchanged template", ok: true,
			args: func(s *story) []string { return []string{"apply", "-f", s.file("template-gpu-a100.yaml")} },
			out:  []string{"template/A100 训练环境 unchanged"}},
		{name: "apply a new job config", ok: true,
			args: func(*story) []string { return []string{"apply", "-f", "-"} },
			in:   onDemandJob("new-job"),
			out:  []string{"created (new-job)"}},
		{name: "apply an edited job config", ok: true,
			args: func(s *story) []string {
				return []string{"apply", "-f", s.file("job-on-cluster.yaml", func(y string) string {
					y = strings.ReplaceAll(y, "cls-replaceme01", s.running)
					return strings.Replace(y, "python main.py", "python main2.py", 1)
				})}
			},
			out: []string{"configured (revision 2)"}},
		{name: "apply a job config change a revision may not make",
			args: func(s *story) []string {
				return []string{"apply", "-f", s.file("job-on-cluster.yaml", func(y string) string {
					return strings.ReplaceAll(y, "cls-replaceme01", s.created)
				})}
			},
			errOut: []string{"[J15] cluster: Forbidden"}},
		// start, hibernate
		{name: "start a created cluster", ok: true,
			args: func(s *story) []string { return []string{"start", s.created} },
			out:  []string{"starting"}},
		{name: "start a running cluster",
			args:   func(s *story) []string { return []string{"start", s.running} },
			errOut: []string{"cannot start in state running"}},
		{name: "start a missing cluster",
			args:   func(*story) []string { return []string{"start", "cls-nosuch"} },
			errOut: []string{"not found"}},
		{name: "hibernate a running cluster", ok: true,
			args: func(s *story) []string { return []string{"hibernate", s.running} },
			out:  []string{"hibernating"}},
		{name: "hibernate a created cluster",
			args:   func(s *story) []string { return []string{"hibernate", s.created} },
			errOut: []string{"cannot hibernate"}},
		// delete
		{name: "delete a cluster", ok: true,
			args: func(s *story) []string { return []string{"delete", "cluster", s.created} },
			out:  []string{"deleted"}},
		{name: "delete a job config", ok: true,
			args: func(s *story) []string { return []string{"delete", "job", s.jobID} },
			out:  []string{"job/"}},
		{name: "delete a template", ok: true,
			args: func(*story) []string { return []string{"delete", "template", "A100 训练环境"} },
			out:  []string{"deleted"}},
		{name: "delete a missing template",
			args:   func(*story) []string { return []string{"delete", "template", "nosuch"} },
			errOut: []string{"not found"}},
		{name: "delete a resource group in use",
			args:   func(*story) []string { return []string{"delete", "resourcegroup", "rg-cpu"} },
			errOut: []string{`resource group "rg-cpu": cannot delete`}},
		{name: "delete a missing resource group",
			args:   func(*story) []string { return []string{"delete", "rg", "rg-nosuch"} },
			errOut: []string{"not found"}},
		{name: "delete a group with --force",
			args:   func(s *story) []string { return []string{"delete", "group", s.group, "--force"} },
			errOut: []string{"--force is for clusters"}},
		// submit
		{name: "submit and wait", ok: true,
			args: func(s *story) []string {
				return []string{"submit", "-f", s.file("job-on-cluster.yaml", func(y string) string {
					y = strings.ReplaceAll(y, "cls-replaceme01", s.running)
					return strings.Replace(y, "name: wordcount-on-cluster", "name: again", 1)
				}), "--wait"}
			},
			out: []string{"job/", "run/", "succeeded"}, drive: true},
		{name: "submit an invalid job",
			args:   func(*story) []string { return []string{"submit", "-f", "-"} },
			in:     "name: x\ncluster: cls-x\npackage: {cos: 'cos://b-1/x.zip'}\n",
			errOut: []string{"[J5] entrypoint: Required value"}},
		{name: "submit two documents",
			args:   func(*story) []string { return []string{"submit", "-f", "-"} },
			in:     onDemandJob("a") + "---\n" + onDemandJob("b"),
			errOut: []string{"submit takes one job config, the file has 2"}},
		// logs
		{name: "logs of a run", ok: true,
			args: func(s *story) []string { return []string{"logs", s.runID} },
			out:  []string{"succeeded"}},
		{name: "logs of a missing run",
			args:   func(*story) []string { return []string{"logs", "run-nosuch"} },
			errOut: []string{"not found"}},
		// why
		{name: "why a run that ended", ok: true,
			args: func(s *story) []string { return []string{"why", s.runID} },
			out:  []string{"is succeeded: it does not wait"}},
		{name: "why a missing run",
			args:   func(*story) []string { return []string{"why", "run-nosuch"} },
			errOut: []string{"not found"}},
		// plan
		{name: "plan a start", ok: true,
			args: func(s *story) []string { return []string{"plan", "start", s.created, "-o", "yaml"} },
			out:  []string{"operation: start cluster", "fits: true"}},
		{name: "plan a run of a job", ok: true,
			args: func(s *story) []string { return []string{"plan", "run", s.jobID} },
			out:  []string{"Operation:       run job", "<none: reserves nothing>"}},
		{name: "plan an unsaved job",
			args:   func(*story) []string { return []string{"plan", "-f", "-"} },
			in:     onDemandJob("unsaved"),
			errOut: []string{`no saved job config is called "unsaved"`}},
		{name: "plan without a file",
			args:   func(*story) []string { return []string{"plan"} },
			errOut: []string{"give -f FILE"}},
		// quota
		{name: "quota as json", ok: true,
			args: func(*story) []string { return []string{"quota", "rg-cpu", "-o", "json"} },
			out:  []string{`"id": "rg-cpu"`, `"queue": []`}},
		{name: "quota of a missing group",
			args:   func(*story) []string { return []string{"quota", "rg-nosuch"} },
			errOut: []string{"not found"}},
		// usage
		{name: "usage by resource group", ok: true,
			args: func(*story) []string { return []string{"usage", "--by", "resourceGroup"} },
			out:  []string{"RESOURCEGROUP", "CPU-CORE-HOURS", "rg-cpu", "TOTAL"}},
		{name: "usage priced, as CSV", ok: true,
			args: func(*story) []string {
				return []string{"usage", "--by", "tag:team", "--from", "2025-12-01", "--prices", "-", "-o", "csv"}
			},
			in:  "currency: CNY\nnodeHour:\n  cu.4c8g: 1.5\n",
			out: []string{"tag:team,cpu_core_hours,", ",CNY,"}},
		{name: "usage by an unknown grouping",
			args:   func(*story) []string { return []string{"usage", "--by", "team"} },
			errOut: []string{"[U1] query.groupBy"}},
		{name: "usage with a set-based selector",
			args:   func(*story) []string { return []string{"usage", "-l", "team!=a"} },
			errOut: []string{"tag equality only"}},
		{name: "usage with a bad date",
			args:   func(*story) []string { return []string{"usage", "--from", "yesterday"} },
			errOut: []string{"--from", "neither RFC 3339 nor YYYY-MM-DD"}},
		{name: "usage as a table format it has not",
			args:   func(*story) []string { return []string{"usage", "-o", "wide"} },
			errOut: []string{`--output "wide"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStory(t)
			s.in = c.in
			if c.drive {
				defer s.m.Drive(t.Context(), time.Second, time.Millisecond)()
			}
			out, errOut, code := s.run(c.args(s)...)
			t.Logf("stdout:\n%sstderr:\n%s", out, errOut)
			if (code == 0) != c.ok {
				t.Fatalf("exit %d, want ok=%v\nstdout:\n%s\nstderr:\n%s", code, c.ok, out, errOut)
			}
			for _, w := range c.out {
				if !strings.Contains(out, w) {
					t.Errorf("stdout has no %q:\n%s", w, out)
				}
			}
			for _, w := range c.errOut {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr has no %q:\n%s", w, errOut)
				}
			}
			if !c.ok && !strings.HasPrefix(errOut, "error: ") {
				t.Errorf("stderr does not start with error: %q", errOut)
			}
			if c.check != nil {
				s.settle()
				c.check(t, s)
			}
		})
	}
}

// Every command refuses a user the authorizer refuses, naming the action,
// and changes nothing.
func TestForbidden(t *testing.T) {
	refuse := auth.AuthorizerFunc(func(_ context.Context, u auth.User, a auth.Action, r auth.Resource) error {
		if u.Name == "mallory" {
			return auth.Forbidden(u, a, r, "test policy")
		}
		return nil
	})
	f := newFixture(t, fixtureOptions{more: []dlc.Option{dlc.WithAuthorizer(refuse)}})
	s := &story{fixture: f}
	s.created = created(t, f.must("create", "-f", f.file("cluster-mounts.yaml")), "cluster")
	out := f.must("submit", "-f", f.file("job-on-cluster.yaml", func(y string) string {
		return strings.ReplaceAll(y, "cls-replaceme01", s.created)
	}))
	s.jobID, s.runID = created(t, out, "job"), created(t, out, "run")
	f.settle()
	f.user = "mallory"
	for _, c := range []struct {
		args   []string
		action auth.Action
	}{
		{[]string{"get", "cluster", s.created}, auth.DescribeCluster},
		{[]string{"describe", "cluster", s.created}, auth.DescribeCluster},
		{[]string{"describe", "job", s.jobID}, auth.DescribeJob},
		{[]string{"create", "-f", f.file("cluster-cpu-autoscaling.yaml")}, auth.CreateCluster},
		{[]string{"apply", "-f", f.file("template-gpu-a100.yaml")}, auth.DescribeTemplate},
		{[]string{"start", s.created}, auth.StartCluster},
		{[]string{"hibernate", s.created}, auth.HibernateCluster},
		{[]string{"delete", "cluster", s.created}, auth.DeleteCluster},
		{[]string{"delete", "job", s.jobID}, auth.DeleteJob},
		{[]string{"submit", "-f", f.file("job-on-cluster.yaml", func(y string) string {
			return strings.ReplaceAll(y, "cls-replaceme01", s.created)
		})}, auth.CreateJob},
		{[]string{"logs", s.runID}, auth.ReadRunLogs},
		{[]string{"why", s.runID}, auth.DescribeRun},
		{[]string{"plan", "start", s.created}, auth.StartCluster},
		{[]string{"quota", "rg-cpu"}, auth.DescribeResourceGroup},
	} {
		t.Run(strings.Join(c.args[:2], " "), func(t *testing.T) {
			out, errOut, code := f.run(c.args...)
			if code == 0 {
				t.Fatalf("mallory was allowed: %s", out)
			}
			want := `error: forbidden: user "mallory" may not ` + string(c.action)
			if !strings.HasPrefix(errOut, want) {
				t.Errorf("stderr = %q, want it to start %q", errOut, want)
			}
		})
	}
	f.settle()
	f.user = "alice"
	if got := f.must("get", "cluster", s.created); !strings.Contains(got, "created") {
		t.Errorf("a refused command changed the cluster:\n%s", got)
	}
	if got := f.must("get", "clusters"); strings.Count(got, "\n") != 2 {
		t.Errorf("a refused create made a cluster:\n%s", got)
	}
}

// get -w prints the list, then each change until the context ends.
func TestWatch(t *testing.T) {
	for _, kind := range []string{"clusters", "runs"} {
		t.Run(kind, func(t *testing.T) {
			s := newStory(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var out, errOut syncBuffer
			done := make(chan int, 1)
			go func() {
				done <- cliExecute(ctx, s.fixture, &out, &errOut, "get", kind, "-w")
			}()
			waitFor(t, &out, "AGE")
			switch kind {
			case "clusters":
				// The cluster with the shorter name starts: its row
				// lines up with the list's header all the same.
				if _, err := s.m.Client.Clusters().Start(s.admin, s.created); err != nil {
					t.Fatal(err)
				}
				s.settle()
				row := func(got string) string {
					for _, l := range strings.Split(got, "\n") {
						if strings.HasPrefix(l, s.created) && strings.Contains(l, " running ") {
							return l
						}
					}
					return ""
				}
				waitUntil(t, &out, func(got string) bool { return row(got) != "" })
				header := strings.Split(out.String(), "\n")[0]
				if l := row(out.String()); runeIndex(l, "running") != runeIndex(header, "STATE") {
					t.Errorf("the watched row is not aligned:\n%s", out.String())
				}
			case "runs":
				r, err := s.m.Client.RunJob(s.admin, s.jobID, "")
				if err != nil {
					t.Fatal(err)
				}
				s.settle()
				waitFor(t, &out, r.ID)
			}
			cancel()
			if code := <-done; code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
		})
	}
}

// submit --follow prints the run's log lines as they come, and its end;
// logs -f does too.
func TestFollow(t *testing.T) {
	lines := []string{"epoch 1 loss 0.9", "epoch 2 loss 0.4"}
	ray := memory.RayHooks{RunOutcome: func(r *job.Run) memory.Outcome {
		if r.Config.Name == "fails" {
			return memory.Outcome{Fail: true, Message: "exit 1", Logs: []string{"Traceback"}, Duration: time.Minute}
		}
		return memory.Outcome{Logs: lines, Duration: time.Minute}
	}}
	f := newFixture(t, fixtureOptions{ray: ray})
	cls := created(t, f.must("create", "-f", f.file("cluster-cpu-autoscaling.yaml")), "cluster")
	f.settle()
	f.must("start", cls)
	f.settle()
	if _, err := f.cli.Clusters().Wait(t.Context(), cls, cluster.InState(cluster.Running)); err != nil {
		t.Fatal(err)
	}
	stop := f.m.Drive(t.Context(), time.Second, time.Millisecond)
	defer stop()
	p := f.file("job-on-cluster.yaml", func(y string) string { return strings.ReplaceAll(y, "cls-replaceme01", cls) })
	out := f.must("submit", "-f", p, "--follow")
	for _, w := range append(lines, "succeeded") {
		if !strings.Contains(out, w) {
			t.Errorf("submit --follow printed no %q:\n%s", w, out)
		}
	}
	run := created(t, out, "run")
	if got := f.must("logs", "-f", run); !strings.Contains(got, lines[1]) {
		t.Errorf("logs -f of an ended run: %q", got)
	}
	fails := f.file("job-on-cluster.yaml", func(y string) string {
		y = strings.ReplaceAll(y, "cls-replaceme01", cls)
		return strings.Replace(y, "name: wordcount-on-cluster", "name: fails", 1)
	})
	out, errOut, code := f.run("submit", "-f", fails, "--follow")
	if code == 0 || !strings.Contains(out, "Traceback") || !strings.Contains(errOut, "did not succeed") {
		t.Errorf("a failed run: exit %d\n%s%s", code, out, errOut)
	}
}

// runeIndex is strings.Index in runes: a column, as the tab writer counts.
func runeIndex(s, sub string) int {
	i := strings.Index(s, sub)
	if i < 0 {
		return -1
	}
	return utf8.RuneCountInString(s[:i])
}
