package kube_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
)

// TestStoreTooLarge: a document too large to store — over etcd's limit
// (1.5 MiB: a 500 "request is too large"), the API server's call to etcd
// (2 MiB: a 500 "message larger than max") or the API server's own (3 MiB:
// 413) — is ErrInvalid, not ErrUnavailable: retrying it cannot help.
func TestStoreTooLarge(t *testing.T) {
	s := newStore(t)
	for name, size := range map[string]int{"etcd": 1600 << 10, "grpc": 2 << 20, "api server": 4 << 20} {
		t.Run(name, func(t *testing.T) {
			cl := storeCases()[0].v.(*cluster.Cluster).DeepCopy()
			cl.ID = "cls-big-" + strings.ReplaceAll(name, " ", "-")
			cl.Spec.Head.Env = map[string]string{"BIG": strings.Repeat("x", size)}
			_, err := s.Create(t.Context(), backend.Doc{Kind: "cluster", ID: cl.ID, Data: mustJSON(t, cl)})
			if !errors.Is(err, errs.ErrInvalid) || errors.Is(err, errs.ErrUnavailable) {
				t.Fatalf("Create of a %d-byte document: %v, want ErrInvalid", size, err)
			}
			t.Logf("%.200s", err)
			if _, err := s.Get(t.Context(), "cluster", cl.ID); !errors.Is(err, errs.ErrNotFound) {
				t.Fatalf("Get after a refused Create: %v", err)
			}
		})
	}
}
