package kube

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// The clients that make calls (not the informers' watches) have a
// timeout: DefaultAPITimeout unless the caller's config sets one, and the
// caller's config is left as it was.
func TestCallConfigHasATimeout(t *testing.T) {
	for _, tc := range []struct {
		set, want time.Duration
	}{{0, DefaultAPITimeout}, {5 * time.Second, 5 * time.Second}} {
		cfg := &rest.Config{Host: "https://127.0.0.1:6443", Timeout: tc.set}
		if got := callConfig(cfg); got.Timeout != tc.want || cfg.Timeout != tc.set {
			t.Errorf("Timeout %v: the call config's is %v, the caller's now %v", tc.set, got.Timeout, cfg.Timeout)
		}
	}
}
