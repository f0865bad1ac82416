package storage_test

import (
	"testing"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/storage"
)

func TestParseCOSURL(t *testing.T) {
	cases := []struct {
		in                       string
		bucket, appid, region, k string
		bad                      bool
	}{
		{in: "cos://jobs-1250000000/a/b/job.zip", bucket: "jobs-1250000000", appid: "1250000000", k: "a/b/job.zip"},
		{in: "https://jobs-1250000000.cos.ap-guangzhou.myqcloud.com/job.zip", bucket: "jobs-1250000000", appid: "1250000000", region: "ap-guangzhou", k: "job.zip"},
		{in: "cos://jobs/job.zip", bad: true},
		{in: "cos://jobs-1250000000/", bad: true},
		{in: "cos://jobs-1250000000/a/../job.zip", bad: true},
		{in: "https://example.com/job.zip", bad: true},
		{in: "s3://jobs-1250000000/job.zip", bad: true},
		{in: "cos://jobs-1250000000/job.zip?x=1", bad: true},
	}
	for _, tc := range cases {
		o, err := storage.ParseCOSURL(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: accepted as %+v", tc.in, o)
			}
			continue
		}
		if err != nil || o.Bucket != tc.bucket || o.AppID != tc.appid || o.Region != tc.region || o.Key != tc.k {
			t.Errorf("%s: got %+v %v", tc.in, o, err)
		}
	}
}

func TestMountClashesAndKinds(t *testing.T) {
	cl := []storage.Mount{{Type: storage.COS, Instance: "data-1250000000", MountPath: "/data"}}
	jb := []storage.Mount{
		{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/data/"},
		{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/ckpt"},
	}
	l := storage.MountClashes(errs.NewPath("mounts"), cl, jb)
	if len(l) != 1 || l[0].Path != "mounts[0].mountPath" || l[0].Rule != "J9" {
		t.Fatalf("clashes = %v", l)
	}
	if (storage.Mount{}).Kind() != storage.FixedSubPath {
		t.Fatal("default sub-path kind is not fixed")
	}
	cases := []struct {
		name string
		m    storage.Mount
		bad  []string
	}{
		{"valid GooseFS", storage.Mount{Type: storage.GooseFS, Instance: "goosefs-1a2b3c4d", MountPath: "/mnt/g"}, nil},
		{"CFS Turbo id", storage.Mount{Type: storage.CFSTurbo, Instance: "turbo", MountPath: "/mnt/t"}, []string{"m.instance"}},
		{"absolute sub-path", storage.Mount{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPath: "/abs", MountPath: "/mnt/c"}, []string{"m.subPath"}},
		{"bad sub-path kind", storage.Mount{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPathKind: "random", MountPath: "/mnt/c"}, []string{"m.subPathKind"}},
		{"reserved /proc", storage.Mount{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/proc"}, []string{"m.mountPath"}},
		{"root", storage.Mount{Type: storage.CFS, Instance: "cfs-1a2b3c4d", MountPath: "/"}, []string{"m.mountPath"}},
		{"missing everything", storage.Mount{}, []string{"m.type", "m.instance", "m.mountPath"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.m.Validate(errs.NewPath("m"), "C9")
			if len(l) != len(tc.bad) {
				t.Fatalf("got %v, want problems at %v", l, tc.bad)
			}
			for i, p := range tc.bad {
				if string(l[i].Path) != p || l[i].Rule != "C9" {
					t.Errorf("problem %d = %v, want at %s", i, l[i], p)
				}
			}
		})
	}
}
