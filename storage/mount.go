// Package storage models where a job's files live: storage mounts (COS,
// CFS, GooseFS, CFS Turbo) and their validation, and the job package (a
// ZIP file, local or in Tencent COS).
//
// The types and their validation do no I/O. Inspecting a local ZIP,
// checking a COS object and uploading to COS are the only operations
// here that touch files or the network.
package storage

import (
	"path"
	"regexp"
	"strings"

	"github.com/aidlc/dlc/errs"
)

// MountType is the kind of storage a mount attaches (C9, J9).
type MountType string

// The storage types.
const (
	COS      MountType = "COS"
	CFS      MountType = "CFS"
	GooseFS  MountType = "GooseFS"
	CFSTurbo MountType = "CFSTurbo"
)

// MountTypes lists the supported storage types.
var MountTypes = []MountType{COS, CFS, GooseFS, CFSTurbo}

// SubPathKind says how a mount chooses its directory inside the storage
// instance (C9).
type SubPathKind string

// The sub-path kinds.
const (
	// FixedSubPath mounts the directory SubPath; every pod sees the same one.
	FixedSubPath SubPathKind = "fixed"
	// DynamicSubPath mounts an own sub-directory per pod, generated below
	// SubPath from the pod's name.
	DynamicSubPath SubPathKind = "dynamic"
)

// Mount attaches a directory of a storage instance into every node of a
// cluster (C9) or into a job's run (J9). The zero SubPathKind means fixed;
// mounts are read–write unless ReadOnly.
type Mount struct {
	Type        MountType   `json:"type"`
	Instance    string      `json:"instance"` // COS bucket "name-appid", or a file system id such as "cfs-1a2b3c4d"
	SubPathKind SubPathKind `json:"subPathKind,omitempty"`
	SubPath     string      `json:"subPath,omitempty"` // relative directory inside the instance; "" is its root
	MountPath   string      `json:"mountPath"`         // absolute path in the container
	ReadOnly    bool        `json:"readOnly,omitempty"`
}

// Kind returns the sub-path kind, with the default (fixed) filled in.
func (m Mount) Kind() SubPathKind {
	if m.SubPathKind == "" {
		return FixedSubPath
	}
	return m.SubPathKind
}

var instancePatterns = map[MountType]struct {
	re      *regexp.Regexp
	example string
}{
	COS:      {regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?-[0-9]{5,12}$`), "a bucket named <name>-<appid>, e.g. data-1250000000"},
	CFS:      {regexp.MustCompile(`^cfs-[a-z0-9]{8,16}$`), "a CFS file system id, e.g. cfs-1a2b3c4d"},
	CFSTurbo: {regexp.MustCompile(`^cfs-[a-z0-9]{8,16}$`), "a CFS Turbo file system id, e.g. cfs-5e6f7a8b"},
	GooseFS:  {regexp.MustCompile(`^goosefs-[a-z0-9]{8,16}$`), "a GooseFS instance id, e.g. goosefs-1a2b3c4d"},
}

// Limits of mounts (C9, J9).
const (
	MaxMounts       = 10  // mounts of one cluster or job
	MaxMountPathLen = 128 // bytes in a mount path or a sub-path
)

// ReservedPaths are container paths a mount may not cover: Ray's own
// session directory, the container's system directories, and the root.
var ReservedPaths = []string{"/", "/tmp/ray", "/dev", "/proc", "/sys", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/usr", "/boot", "/var/run", "/run"}

// Validate checks one mount. rule is the rule ID to report (C9 for a
// cluster, J9 for a job).
func (m Mount) Validate(p errs.Path, rule string) errs.List {
	var l errs.List
	pat, known := instancePatterns[m.Type]
	switch {
	case m.Type == "":
		l = append(l, errs.Required(p.Child("type"), rule, "one of COS, CFS, GooseFS, CFSTurbo"))
	case !known:
		l = append(l, errs.NotSupported(p.Child("type"), rule, string(m.Type), []string{"COS", "CFS", "GooseFS", "CFSTurbo"}))
	}
	switch {
	case m.Instance == "":
		l = append(l, errs.Required(p.Child("instance"), rule, "the storage instance to mount"))
	case known && !pat.re.MatchString(m.Instance):
		l = append(l, errs.Invalid(p.Child("instance"), rule, m.Instance, "must be "+pat.example))
	}
	switch m.SubPathKind {
	case "", FixedSubPath, DynamicSubPath:
	default:
		l = append(l, errs.NotSupported(p.Child("subPathKind"), rule, string(m.SubPathKind), []string{"fixed", "dynamic"}))
	}
	if sp := m.SubPath; sp != "" {
		switch {
		case len(sp) > MaxMountPathLen:
			l = append(l, errs.TooLong(p.Child("subPath"), rule, sp, MaxMountPathLen))
		case strings.HasPrefix(sp, "/"):
			l = append(l, errs.Invalid(p.Child("subPath"), rule, sp, "a sub-path is relative to the storage instance's root"))
		case hasDotDot(sp):
			l = append(l, errs.Invalid(p.Child("subPath"), rule, sp, "a sub-path may not contain '..'"))
		case strings.ContainsAny(sp, "\x00\n\r$"):
			l = append(l, errs.Invalid(p.Child("subPath"), rule, sp, "a sub-path may not contain NUL, line breaks or '$'"))
		}
	}
	l = append(l, mountPathProblems(p.Child("mountPath"), rule, m.MountPath)...)
	return l
}

func hasDotDot(p string) bool {
	for {
		seg, rest, more := strings.Cut(p, "/")
		if seg == ".." {
			return true
		}
		if !more {
			return false
		}
		p = rest
	}
}

func mountPathProblems(p errs.Path, rule, mp string) errs.List {
	switch {
	case mp == "":
		return errs.List{errs.Required(p, rule, "where to mount, an absolute path")}
	case len(mp) > MaxMountPathLen:
		return errs.List{errs.TooLong(p, rule, mp, MaxMountPathLen)}
	case !strings.HasPrefix(mp, "/"):
		return errs.List{errs.Invalid(p, rule, mp, "a mount path is absolute")}
	case hasDotDot(mp):
		return errs.List{errs.Invalid(p, rule, mp, "a mount path may not contain '..'")}
	case strings.ContainsAny(mp, "\x00\n\r:"):
		return errs.List{errs.Invalid(p, rule, mp, "a mount path may not contain NUL, line breaks or ':'")}
	}
	clean := path.Clean(mp)
	for _, r := range ReservedPaths {
		if clean == r || (r != "/" && strings.HasPrefix(clean, r+"/")) {
			return errs.List{errs.Invalid(p, rule, mp, "is reserved ("+r+"); mount somewhere else, e.g. under /mnt or /data")}
		}
	}
	return nil
}

// ValidateMounts checks a list of at most MaxMounts mounts and that no
// two share a mount path.
func ValidateMounts(p errs.Path, rule string, mounts []Mount) errs.List {
	var l errs.List
	if len(mounts) > MaxMounts {
		l = append(l, errs.TooMany(p, rule, len(mounts), MaxMounts))
		mounts = mounts[:MaxMounts] // and the first ones checked
	}
	seen := map[string]bool{}
	for i, m := range mounts {
		ip := p.Index(i)
		l = append(l, m.Validate(ip, rule)...)
		if m.MountPath == "" {
			continue
		}
		c := path.Clean(m.MountPath)
		if seen[c] {
			l = append(l, errs.Duplicate(ip.Child("mountPath"), rule, m.MountPath))
		}
		seen[c] = true
	}
	return l
}

// MountClashes reports each of a job's mounts whose mount path is already
// taken by one of its cluster's mounts, which the job inherits (C9, C16).
func MountClashes(jobPath errs.Path, cluster, job []Mount) errs.List {
	taken := map[string]bool{}
	for _, m := range cluster {
		taken[path.Clean(m.MountPath)] = true
	}
	var l errs.List
	for i, m := range job {
		if m.MountPath != "" && taken[path.Clean(m.MountPath)] {
			l = append(l, errs.Invalid(jobPath.Index(i).Child("mountPath"), "J9", m.MountPath,
				"the cluster already mounts storage here, and jobs inherit the cluster's mounts; choose another path"))
		}
	}
	return l
}
