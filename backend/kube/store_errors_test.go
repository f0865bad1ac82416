package kube

import (
	"errors"
	"fmt"
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/aidlc/dlc/errs"
)

// TestAPIError maps every kind of API answer to the store's errors, each
// still unwrapping to the API error.
func TestAPIError(t *testing.T) {
	gr := schema.GroupResource{Group: "dlc.aidlc.io", Resource: "computeclusters"}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"conflict", apierrors.NewConflict(gr, "c", errors.New("stale")), errs.ErrConflict},
		{"exists", apierrors.NewAlreadyExists(gr, "c"), errs.ErrConflict},
		{"not found", apierrors.NewNotFound(gr, "c"), errs.ErrNotFound},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "dlc.aidlc.io", Kind: "ComputeCluster"}, "c", nil), errs.ErrInvalid},
		{"429", apierrors.NewTooManyRequests("slow down", 1), errs.ErrUnavailable},
		{"timeout", apierrors.NewServerTimeout(gr, "update", 1), errs.ErrUnavailable},
		{"gateway timeout", apierrors.NewTimeoutError("late", 1), errs.ErrUnavailable},
		{"500", apierrors.NewInternalError(errors.New("boom")), errs.ErrUnavailable},
		{"503", apierrors.NewServiceUnavailable("down"), errs.ErrUnavailable},
		{"502", apierrors.NewGenericServerResponse(502, "update", gr, "c", "bad gateway", 0, true), errs.ErrUnavailable},
		{"413", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), errs.ErrInvalid},
		{"etcd too large", apierrors.NewInternalError(errors.New("etcdserver: request is too large")), errs.ErrInvalid},
		{"etcd too large, generic 500", apierrors.NewGenericServerResponse(500, "update", gr, "c", "etcdserver: request is too large", 0, true), errs.ErrInvalid},
		{"grpc too large", apierrors.NewInternalError(errors.New("rpc error: code = ResourceExhausted desc = trying to send message larger than max (2098501 vs. 2097152)")), errs.ErrInvalid},
		{"connection", &url.Error{Op: "Put", URL: "https://x", Err: errors.New("connection refused")}, errs.ErrUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := apiError("store update cluster/c", "cluster", "c", c.err)
			if !errors.Is(got, c.want) {
				t.Errorf("apiError(%v) = %v, want errors.Is %v", c.err, got, c.want)
			}
			if !errors.Is(got, c.err) {
				t.Errorf("apiError(%v) = %v does not unwrap to the API error", c.err, got)
			}
		})
	}
	var ce *errs.ConflictError
	if !errors.As(apiError("op", "cluster", "c", apierrors.NewConflict(gr, "c", errors.New("x"))), &ce) || ce.ID != "c" {
		t.Errorf("a conflict is not a *ConflictError of c")
	}
	if got := apiError("op", "cluster", "c", fmt.Errorf("x: %w", apierrors.NewForbidden(gr, "c", errors.New("no")))); errors.Is(got, errs.ErrUnavailable) {
		t.Errorf("forbidden is unavailable: %v", got)
	}
}
