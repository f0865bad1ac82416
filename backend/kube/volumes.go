package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/storage"
)

// PodNameEnv is the environment variable that a dynamic sub-path expands
// (subPathExpr "$(DLC_POD_NAME)"). RenderMounts returns it, set from the
// pod's name through the downward API. It has a DLC_ prefix so that it
// cannot clash with a variable the user sets (J10).
const PodNameEnv = "DLC_POD_NAME"

// VolumeResolver turns a mount's storage instance into the volume that
// serves it, typically a PersistentVolumeClaim bound to the COS, CFS,
// GooseFS or CFS Turbo CSI driver. RenderMounts calls it once per
// distinct instance.
type VolumeResolver interface {
	ResolveVolume(ctx context.Context, m storage.Mount) (corev1.VolumeSource, error)
}

// VolumeResolverFunc adapts a function to VolumeResolver.
type VolumeResolverFunc func(ctx context.Context, m storage.Mount) (corev1.VolumeSource, error)

// ResolveVolume calls f.
func (f VolumeResolverFunc) ResolveVolume(ctx context.Context, m storage.Mount) (corev1.VolumeSource, error) {
	return f(ctx, m)
}

// PVCResolver resolves every storage instance to a PersistentVolumeClaim
// in the pod's namespace: the claim named in Claims, else (unless Strict)
// the claim named by the rule Prefix + lower-case type + "-" + instance,
// e.g. "dlc-cfs-cfs-1a2b3c4d" or "dlc-cos-data-1250000000".
type PVCResolver struct {
	// Claims maps a storage instance ("cfs-1a2b3c4d", "data-1250000000")
	// to its claim's name.
	Claims map[string]string
	// Prefix of claim names made by the naming rule; "" means "dlc-".
	Prefix string
	// Strict refuses instances that Claims does not name.
	Strict bool
}

// ClaimName returns the claim that serves m's instance, or "" when Strict
// and Claims does not name it.
func (r PVCResolver) ClaimName(m storage.Mount) string {
	if c, ok := r.Claims[m.Instance]; ok {
		return c
	}
	if r.Strict {
		return ""
	}
	prefix := r.Prefix
	if prefix == "" {
		prefix = "dlc-"
	}
	return prefix + strings.ToLower(string(m.Type)) + "-" + m.Instance
}

// ResolveVolume implements VolumeResolver. An instance without a claim is
// errors.Is(err, errs.ErrNotFound).
func (r PVCResolver) ResolveVolume(_ context.Context, m storage.Mount) (corev1.VolumeSource, error) {
	name := r.ClaimName(m)
	if name == "" {
		return corev1.VolumeSource{}, errs.NotFound("persistent volume claim for storage instance", m.Instance)
	}
	return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}, nil
}

// RenderedMounts are storage mounts as a pod needs them.
type RenderedMounts struct {
	// Volumes holds one volume per distinct storage instance.
	Volumes []corev1.Volume
	// VolumeMounts holds one mount per storage.Mount, in order.
	VolumeMounts []corev1.VolumeMount
	// Env holds the downward-API variable that dynamic sub-paths expand
	// (PodNameEnv); it is empty when no mount is dynamic. Every container
	// that gets VolumeMounts needs it.
	Env []corev1.EnvVar
}

// RenderMounts renders storage mounts (C9, J9) for a pod: a fixed
// sub-path becomes subPath, a dynamic one subPathExpr
// "<subPath>/$(DLC_POD_NAME)" (an own directory per pod) together with
// the variable it needs, read-only becomes readOnly, and every distinct
// (type, instance) pair becomes one volume from r. The mounts are checked
// first (storage.ValidateMounts, reported as C9 at "mounts[i]"); bad input
// renders nothing.
func RenderMounts(ctx context.Context, r VolumeResolver, mounts []storage.Mount) (RenderedMounts, error) {
	var out RenderedMounts
	if len(mounts) == 0 {
		return out, nil
	}
	if err := storage.ValidateMounts(errs.NewPath("mounts"), "C9", mounts).ToError(); err != nil {
		return out, err
	}
	if r == nil {
		return out, errors.New("kube: rendering storage mounts needs a VolumeResolver")
	}
	type instance struct {
		t  storage.MountType
		id string
	}
	names := map[instance]string{}
	used := map[string]bool{}
	dynamic := false
	for i, m := range mounts {
		key := instance{m.Type, m.Instance}
		name, ok := names[key]
		if !ok {
			src, err := r.ResolveVolume(ctx, m)
			if err != nil {
				return RenderedMounts{}, fmt.Errorf("mounts[%d]: %s %s: %w", i, m.Type, m.Instance, err)
			}
			if src == (corev1.VolumeSource{}) {
				return RenderedMounts{}, fmt.Errorf("mounts[%d]: %s %s: the resolver returned an empty volume source", i, m.Type, m.Instance)
			}
			name = volumeName(m, used)
			used[name] = true
			names[key] = name
			out.Volumes = append(out.Volumes, corev1.Volume{Name: name, VolumeSource: src})
		}
		vm := corev1.VolumeMount{Name: name, MountPath: path.Clean(m.MountPath), ReadOnly: m.ReadOnly}
		sub := strings.Trim(path.Clean("/"+m.SubPath), "/")
		if m.Kind() == storage.DynamicSubPath {
			vm.SubPathExpr = path.Join(sub, "$("+PodNameEnv+")")
			dynamic = true
		} else {
			vm.SubPath = sub
		}
		out.VolumeMounts = append(out.VolumeMounts, vm)
	}
	if dynamic {
		out.Env = []corev1.EnvVar{{
			Name: PodNameEnv,
			ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
			},
		}}
	}
	return out, nil
}

// volumeName returns a DNS-1123 label for an instance's volume:
// "storage-<type>-<instance>", shortened with a hash when too long, and
// made unique among used.
func volumeName(m storage.Mount, used map[string]bool) string {
	base := "storage-" + strings.ToLower(string(m.Type)) + "-" + m.Instance
	if len(base) > 63 || used[base] {
		sum := sha256.Sum256([]byte(string(m.Type) + "/" + m.Instance))
		h := hex.EncodeToString(sum[:])[:10]
		base = strings.TrimRight(base[:min(len(base), 63-11)], "-") + "-" + h
	}
	name := base
	for i := 2; used[name]; i++ {
		name = fmt.Sprintf("%s-%d", base[:min(len(base), 60)], i)
	}
	return name
}

// ApplyTo adds the volumes to spec and the mounts and variables to each of
// its containers, skipping any a container already has under the same
// name (volumes) or path (mounts).
func (rm RenderedMounts) ApplyTo(spec *corev1.PodSpec) {
	haveVol := map[string]bool{}
	for _, v := range spec.Volumes {
		haveVol[v.Name] = true
	}
	for _, v := range rm.Volumes {
		if !haveVol[v.Name] {
			spec.Volumes = append(spec.Volumes, *v.DeepCopy())
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		havePath := map[string]bool{}
		for _, m := range c.VolumeMounts {
			havePath[path.Clean(m.MountPath)] = true
		}
		for _, m := range rm.VolumeMounts {
			if !havePath[m.MountPath] {
				c.VolumeMounts = append(c.VolumeMounts, m)
			}
		}
		haveEnv := map[string]bool{}
		for _, e := range c.Env {
			haveEnv[e.Name] = true
		}
		for _, e := range rm.Env {
			if !haveEnv[e.Name] {
				c.Env = append(c.Env, *e.DeepCopy())
			}
		}
	}
}
