package quota_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

func TestParseResources(t *testing.T) {
	for _, tc := range []struct {
		cpu, memory string
		gpu         int64
		want        quota.Resources
		bad         []string // the fields refused
	}{
		{"32", "128Gi", 4, quota.Resources{MilliCPU: 32000, Memory: 128 * quota.GiB, GPU: 4}, nil},
		{"500m", "512Mi", 0, quota.Resources{MilliCPU: 500, Memory: 512 << 20}, nil},
		{"1.5", "1G", 0, quota.Resources{MilliCPU: 1500, Memory: 1_000_000_000}, nil},
		{"", "", 0, quota.Resources{}, nil},
		{"0.0001", "0.5", 0, quota.Resources{}, []string{"cpu", "memory"}}, // finer than a millicore, half a byte
		{"-1", "-1Gi", -1, quota.Resources{}, []string{"cpu", "memory", "gpu"}},
		{"four", "lots", 0, quota.Resources{}, []string{"cpu", "memory"}},
		{"1e30", "1e30", 0, quota.Resources{}, []string{"cpu", "memory"}}, // beyond int64
		{"1", "8Ei", 0, quota.Resources{}, []string{"memory"}},            // capped at int64 by ParseQuantity
		{"1", "100Ei", 0, quota.Resources{}, []string{"memory"}},
		{"9223372036854775807", "1", 0, quota.Resources{}, []string{"cpu"}},
		{"1e-3", "1Ki", 0, quota.Resources{MilliCPU: 1, Memory: 1024}, nil},
	} {
		t.Run(tc.cpu+"/"+tc.memory, func(t *testing.T) {
			got, err := quota.ParseResources(tc.cpu, tc.memory, tc.gpu)
			if len(tc.bad) == 0 {
				if err != nil || got != tc.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
				}
				cpu, mem, gpu := got.Quantities()
				back, err := quota.ParseResources(cpu.String(), mem.String(), gpu)
				if err != nil || back != got {
					t.Fatalf("Quantities %s %s %d read back as %+v, %v", cpu.String(), mem.String(), gpu, back, err)
				}
				return
			}
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("got %+v, %v; want ErrInvalid", got, err)
			}
			fields := errs.Fields(err)
			if len(fields) != len(tc.bad) {
				t.Fatalf("problems %v, want one at each of %v", err, tc.bad)
			}
			for i, f := range fields {
				if !strings.HasPrefix(string(f.Path), tc.bad[i]) || f.Rule != "C4" {
					t.Errorf("problem %d: %s [%s], want %s [C4]", i, f.Path, f.Rule, tc.bad[i])
				}
			}
		})
	}
	cpu, mem, _ := quota.Resources{MilliCPU: 500, Memory: 96 * quota.GiB}.Quantities()
	if cpu.String() != "500m" || mem.String() != "96Gi" {
		t.Errorf("Quantities: %s %s, want 500m 96Gi", cpu.String(), mem.String())
	}
}
