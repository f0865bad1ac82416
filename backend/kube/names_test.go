package kube_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/aidlc/dlc/backend/kube"
)

func TestObjectNames(t *testing.T) {
	t.Parallel()
	cases := []struct{ id, cluster, job string }{
		{id: "cls-a1b2c3d4e5", cluster: "cls-a1b2c3d4e5", job: "cls-a1b2c3d4e5"},
		{id: "od-run-r0123456789abcdef", cluster: "od-run-r0123456789abcdef", job: "od-run-r0123456789abcdef"},
		{id: "Cls-A1", cluster: "cls-a1-c6f345179c", job: "cls-a1-c6f345179c"},
		{id: "7up", cluster: "c7up-be39b1e745", job: "r7up-be39b1e745"},
		{id: "训练", cluster: "c-a29c0de140", job: "r-a29c0de140"},
		{id: "", cluster: "c-e3b0c44298", job: "r-e3b0c44298"},
		{id: "a_b.c--d-", cluster: "a-b-c-d-665248b1f5", job: "a-b-c-d-665248b1f5"},
		{id: strings.Repeat("x", 53), cluster: strings.Repeat("x", 53), job: strings.Repeat("x", 36) + "-8a04a39a69"},
		{id: strings.Repeat("x", 54), cluster: strings.Repeat("x", 42) + "-45f316e10b", job: strings.Repeat("x", 36) + "-45f316e10b"},
	}
	for _, tc := range cases {
		if got := kube.RayClusterName(tc.id); got != tc.cluster {
			t.Errorf("RayClusterName(%q) = %q, want %q", tc.id, got, tc.cluster)
		}
		if got := kube.RayJobName(tc.id); got != tc.job {
			t.Errorf("RayJobName(%q) = %q, want %q", tc.id, got, tc.job)
		}
	}
}

// TestObjectNamesProperty checks, for many ids of every shape, that the
// derived names are DNS-1035 labels within KubeRay's limits, the same for
// the same id, the id itself when it already is such a name, and different
// for different ids.
func TestObjectNamesProperty(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	alphabets := []string{
		"abcdefghijklmnopqrstuvwxyz0123456789",
		"abcdefghijklmnopqrstuvwxyz0123456789-",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123456789-_./: ",
		"训练集群数据🙂é\x00\n",
	}
	ids := map[string]bool{}
	for len(ids) < 20000 {
		var b strings.Builder
		switch rng.IntN(3) {
		case 0: // the shape dlc makes: a prefix and random letters and digits
			b.WriteString([]string{"cls-", "run-", "od-run-", "run-r"}[rng.IntN(4)])
			for range 10 + rng.IntN(12) {
				b.WriteByte(alphabets[0][rng.IntN(len(alphabets[0]))])
			}
		default:
			a := []rune(alphabets[rng.IntN(len(alphabets))])
			for range rng.IntN(120) {
				b.WriteRune(a[rng.IntN(len(a))])
			}
		}
		ids[b.String()] = true
	}
	for _, k := range []struct {
		name string
		fn   func(string) string
		max  int
	}{
		{"RayClusterName", kube.RayClusterName, kube.MaxRayClusterNameLen},
		{"RayJobName", kube.RayJobName, kube.MaxRayJobNameLen},
	} {
		seen := make(map[string]string, len(ids))
		for id := range ids {
			name := k.fn(id)
			if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
				t.Fatalf("%s(%q) = %q: not DNS-1035: %v", k.name, id, name, msgs)
			}
			if len(name) > k.max {
				t.Fatalf("%s(%q) = %q: %d characters, more than %d", k.name, id, name, len(name), k.max)
			}
			if again := k.fn(id); again != name {
				t.Fatalf("%s(%q) = %q, then %q", k.name, id, name, again)
			}
			if len(id) <= k.max && len(validation.IsDNS1035Label(id)) == 0 && name != id {
				t.Fatalf("%s(%q) = %q, want the id itself", k.name, id, name)
			}
			if other, dup := seen[name]; dup {
				t.Fatalf("%s: ids %q and %q both name %q", k.name, other, id, name)
			}
			seen[name] = id
		}
	}
}
