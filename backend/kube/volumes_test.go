package kube

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/storage"
)

func TestRenderMounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfs := storage.Mount{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPath: "team/data", MountPath: "/data"}
	cfsRO := storage.Mount{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPath: "models", MountPath: "/models", ReadOnly: true}
	dyn := storage.Mount{Type: storage.CFSTurbo, Instance: "cfs-5e6f7a8b", SubPathKind: storage.DynamicSubPath, SubPath: "scratch", MountPath: "/scratch"}
	dynRoot := storage.Mount{Type: storage.GooseFS, Instance: "goosefs-1a2b3c4d", SubPathKind: storage.DynamicSubPath, MountPath: "/cache/"}
	bucket := storage.Mount{Type: storage.COS, Instance: "data-1250000000", MountPath: "/cos"}

	cases := []struct {
		name     string
		mounts   []storage.Mount
		volumes  []string // claim names, in order
		mounts2  []corev1.VolumeMount
		env      bool
		resolver VolumeResolver
		errIs    error
	}{
		{name: "none", mounts: nil},
		{
			name: "fixed sub-paths share one volume per instance", mounts: []storage.Mount{cfs, cfsRO},
			volumes: []string{"dlc-cfs-cfs-1a2b3c4d"},
			mounts2: []corev1.VolumeMount{
				{Name: "storage-cfs-cfs-1a2b3c4d", MountPath: "/data", SubPath: "team/data"},
				{Name: "storage-cfs-cfs-1a2b3c4d", MountPath: "/models", SubPath: "models", ReadOnly: true},
			},
		},
		{
			name: "dynamic sub-paths expand the pod name", mounts: []storage.Mount{dyn, dynRoot, bucket},
			volumes: []string{"dlc-cfsturbo-cfs-5e6f7a8b", "dlc-goosefs-goosefs-1a2b3c4d", "dlc-cos-data-1250000000"},
			mounts2: []corev1.VolumeMount{
				{Name: "storage-cfsturbo-cfs-5e6f7a8b", MountPath: "/scratch", SubPathExpr: "scratch/$(DLC_POD_NAME)"},
				{Name: "storage-goosefs-goosefs-1a2b3c4d", MountPath: "/cache", SubPathExpr: "$(DLC_POD_NAME)"},
				{Name: "storage-cos-data-1250000000", MountPath: "/cos"},
			},
			env: true,
		},
		{
			name: "claims from a map", mounts: []storage.Mount{cfs},
			resolver: PVCResolver{Claims: map[string]string{"cfs-1a2b3c4d": "shared-cfs"}, Strict: true},
			volumes:  []string{"shared-cfs"},
			mounts2:  []corev1.VolumeMount{{Name: "storage-cfs-cfs-1a2b3c4d", MountPath: "/data", SubPath: "team/data"}},
		},
		{name: "strict map without the instance", mounts: []storage.Mount{cfs}, resolver: PVCResolver{Strict: true}, errIs: errs.ErrNotFound},
		{name: "invalid mount", mounts: []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPath: "../x", MountPath: "/data"}}, errIs: errs.ErrInvalid},
		{name: "duplicate mount path", mounts: []storage.Mount{cfs, cfs}, errIs: errs.ErrInvalid},
		{name: "resolver error", mounts: []storage.Mount{cfs}, errIs: errBoom, resolver: VolumeResolverFunc(func(context.Context, storage.Mount) (corev1.VolumeSource, error) {
			return corev1.VolumeSource{}, errBoom
		})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.resolver
			if r == nil {
				r = PVCResolver{}
			}
			got, err := RenderMounts(ctx, r, tc.mounts)
			if tc.errIs != nil {
				if !errors.Is(err, tc.errIs) {
					t.Fatalf("err = %v, want %v", err, tc.errIs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Volumes) != len(tc.volumes) {
				t.Fatalf("volumes = %+v", got.Volumes)
			}
			for i, v := range got.Volumes {
				if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != tc.volumes[i] {
					t.Errorf("volume %d = %+v, want claim %s", i, v, tc.volumes[i])
				}
				if msgs := validation.IsDNS1123Label(v.Name); len(msgs) > 0 {
					t.Errorf("volume name %q: %v", v.Name, msgs)
				}
			}
			if len(got.VolumeMounts) != len(tc.mounts2) {
				t.Fatalf("mounts = %+v", got.VolumeMounts)
			}
			for i, m := range got.VolumeMounts {
				if !reflect.DeepEqual(m, tc.mounts2[i]) {
					t.Errorf("mount %d = %+v, want %+v", i, m, tc.mounts2[i])
				}
			}
			if tc.env != (len(got.Env) == 1) {
				t.Fatalf("env = %+v", got.Env)
			}
			if tc.env {
				e := got.Env[0]
				if e.Name != PodNameEnv || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
					t.Fatalf("env = %+v", e)
				}
			}
		})
	}
}

var errBoom = errors.New("boom")

func TestVolumeNames(t *testing.T) {
	t.Parallel()
	long := storage.Mount{Type: storage.COS, Instance: strings.Repeat("a", 50) + "-1250000000", MountPath: "/a"}
	long2 := long
	long2.Instance = strings.Repeat("a", 50) + "-1250000001"
	long2.MountPath = "/b"
	got, err := RenderMounts(context.Background(), PVCResolver{}, []storage.Mount{long, long2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Volumes) != 2 || got.Volumes[0].Name == got.Volumes[1].Name {
		t.Fatalf("volumes %+v", got.Volumes)
	}
	for _, v := range got.Volumes {
		if msgs := validation.IsDNS1123Label(v.Name); len(msgs) > 0 {
			t.Errorf("volume name %q: %v", v.Name, msgs)
		}
	}
}

func TestApplyTo(t *testing.T) {
	t.Parallel()
	m := []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPathKind: storage.DynamicSubPath, MountPath: "/data"}}
	rm, err := RenderMounts(context.Background(), PVCResolver{}, m)
	if err != nil {
		t.Fatal(err)
	}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head"}, {Name: "sidecar", Env: []corev1.EnvVar{{Name: PodNameEnv, Value: "x"}}}}}
	rm.ApplyTo(&spec)
	rm.ApplyTo(&spec) // idempotent
	if len(spec.Volumes) != 1 {
		t.Fatalf("volumes %+v", spec.Volumes)
	}
	for _, c := range spec.Containers {
		if len(c.VolumeMounts) != 1 || len(c.Env) != 1 {
			t.Fatalf("container %s: %+v %+v", c.Name, c.VolumeMounts, c.Env)
		}
	}
	// The credentials of COS never appear: a volume names only a claim.
	if spec.Volumes[0].PersistentVolumeClaim.ClaimName != "dlc-cfs-cfs-1a2b3c4d" {
		t.Fatalf("claim %+v", spec.Volumes[0])
	}
}
