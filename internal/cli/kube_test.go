package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/aidlc/dlc/internal/cli"
)

const kubeconfigYAML = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: alice
  user: {token: "x"}
- name: bob
  user: {token: "y"}
contexts:
- name: as-alice
  context: {cluster: c, user: alice, namespace: dlc-system}
- name: as-bob
  context: {cluster: c, user: bob}
- name: nobody
  context: {cluster: c}
current-context: as-alice
`

// The user a call acts as: --as, else --user, else the context's user.
func TestKubeUser(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(kubeconfigYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                  string
		context, user, as, ok string
		err                   bool
	}{
		{name: "current context", ok: "alice"},
		{name: "--context", context: "as-bob", ok: "bob"},
		{name: "--user", user: "bob", ok: "bob"},
		{name: "--as", as: "carol", user: "bob", ok: "carol"},
		{name: "a context without a user", context: "nobody", err: true},
		{name: "a missing context", context: "nosuch", err: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := genericclioptions.NewConfigFlags(false)
			*f.KubeConfig = p
			*f.Context, *f.AuthInfoName, *f.Impersonate = c.context, c.user, c.as
			got, err := cli.KubeUser(f)
			if (err != nil) != c.err || got != c.ok {
				t.Errorf("KubeUser = %q, %v; want %q (error %v)", got, err, c.ok, c.err)
			}
		})
	}
}
