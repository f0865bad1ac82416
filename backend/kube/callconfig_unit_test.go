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

// The backend's clients are not throttled to client-go's 5 queries a
// second: a config that sets no limit gets DefaultQPS and DefaultBurst,
// one that sets its own keeps it, Options override both, and the caller's
// config is left as it was.
func TestLimitConfig(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfgQPS    float32
		cfgBurst  int
		qps       float32
		burst     int
		wantQPS   float32
		wantBurst int
	}{
		{"in-cluster config (QPS 0)", 0, 0, 0, 0, DefaultQPS, DefaultBurst},
		{"the config's own", 50, 80, 0, 0, 50, 80},
		{"options override", 50, 80, 1000, 2000, 1000, 2000},
		{"options without a burst", 0, 0, 300, 0, 300, 300},
		{"no client-side limit", 0, 0, -1, 0, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &rest.Config{Host: "https://127.0.0.1:6443", QPS: tc.cfgQPS, Burst: tc.cfgBurst}
			got := limitConfig(cfg, tc.qps, tc.burst)
			if got.QPS != tc.wantQPS || got.Burst != tc.wantBurst {
				t.Errorf("QPS %v burst %d, want %v %d", got.QPS, got.Burst, tc.wantQPS, tc.wantBurst)
			}
			if cfg.QPS != tc.cfgQPS || cfg.Burst != tc.cfgBurst {
				t.Errorf("the caller's config changed to %v %d", cfg.QPS, cfg.Burst)
			}
		})
	}
}
