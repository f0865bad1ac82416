package storage

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/aidlc/dlc/errs"
)

// MaxLocalPackageSize is the largest local job package: 100 MB (J5).
// A larger package goes to COS first and is referenced from there.
const MaxLocalPackageSize int64 = 100 << 20

// MaxPackageRefLen is the most bytes of a package's local path or COS URL
// (a COS object key has at most 850).
const MaxPackageRefLen = 1024

// Package is a job package (J5): one ZIP file, either a local file or an
// object already in COS. Exactly one of Local and COS is set.
type Package struct {
	// Local is the path of a ZIP file on this machine, at most 100 MB.
	Local string `json:"local,omitempty"`
	// COS is an object in COS, as cos://<bucket>-<appid>/<key> or
	// https://<bucket>-<appid>.cos.<region>.myqcloud.com/<key>.
	COS string `json:"cos,omitempty"`
}

// LocalPackage returns a package read from a local ZIP file.
func LocalPackage(path string) Package { return Package{Local: path} }

// COSPackage returns a package already in COS.
func COSPackage(uri string) Package { return Package{COS: uri} }

// IsZero reports whether no package is set.
func (p Package) IsZero() bool { return p == Package{} }

// String returns the package's location.
func (p Package) String() string {
	if p.COS != "" {
		return p.COS
	}
	return p.Local
}

// Validate checks the package reference without touching the file or COS.
func (p Package) Validate(fp errs.Path) errs.List {
	switch {
	case p.Local == "" && p.COS == "":
		return errs.List{errs.Required(fp, "J5", "a ZIP job package, local (local) or in COS (cos)")}
	case p.Local != "" && p.COS != "":
		return errs.List{errs.Invalid(fp, "J5", p.String(), "set one of local and cos, not both")}
	case len(p.Local) > MaxPackageRefLen:
		return errs.List{errs.TooLong(fp.Child("local"), "J5", p.Local, MaxPackageRefLen)}
	case len(p.COS) > MaxPackageRefLen:
		return errs.List{errs.TooLong(fp.Child("cos"), "J5", p.COS, MaxPackageRefLen)}
	case p.Local != "":
		if strings.ContainsRune(p.Local, 0) {
			return errs.List{errs.Invalid(fp.Child("local"), "J5", p.Local, "a path may not contain NUL")}
		}
		return nil
	}
	o, err := ParseCOSURL(p.COS)
	if err != nil {
		return errs.List{errs.Invalid(fp.Child("cos"), "J5", p.COS, err.Error())}
	}
	if !strings.HasSuffix(o.Key, ".zip") {
		// Ray takes a remote working_dir only as a .zip (validation.py,
		// parse_and_validate_working_dir: "Only .zip files supported for
		// remote URIs."), judged by the URL's path: a presigned URL's path
		// is the object key.
		return errs.List{errs.Invalid(fp.Child("cos"), "J5", p.COS,
			"the object key must end in .zip: Ray fetches a package from a URL only when its path ends so (UploadPackage names its objects <sha256>.zip)")}
	}
	return nil
}

// COSObject names one object in COS.
type COSObject struct {
	Bucket string // "<name>-<appid>", e.g. "jobs-1250000000"
	AppID  string // the account's APPID, the bucket's suffix
	Region string // e.g. "ap-guangzhou"; "" when the URI does not say
	Key    string // the object key, without a leading '/'
}

// URI returns the object as cos://<bucket>/<key>.
func (o COSObject) URI() string { return "cos://" + o.Bucket + "/" + o.Key }

// BucketURL returns the bucket's HTTPS endpoint, which needs a region.
func (o COSObject) BucketURL() string {
	return fmt.Sprintf("https://%s.cos.%s.myqcloud.com", o.Bucket, o.Region)
}

var (
	cosBucket = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?)-([0-9]{5,12})$`)
	cosRegion = regexp.MustCompile(`^[a-z]{2,}(-[a-z0-9]+)+$`)
)

// ParseCOSURL parses cos://<bucket>-<appid>/<key> or
// https://<bucket>-<appid>.cos.<region>.myqcloud.com/<key>.
func ParseCOSURL(s string) (COSObject, error) {
	u, err := url.Parse(s)
	if err != nil {
		return COSObject{}, fmt.Errorf("not a COS URL: %v", err)
	}
	var o COSObject
	switch u.Scheme {
	case "cos":
		o.Bucket = u.Host
	case "https", "http":
		bucket, rest, ok := strings.Cut(u.Hostname(), ".cos.")
		region, ok2 := strings.CutSuffix(rest, ".myqcloud.com")
		if !ok || !ok2 || !cosRegion.MatchString(region) {
			return COSObject{}, fmt.Errorf("a COS HTTPS URL looks like https://<bucket>-<appid>.cos.<region>.myqcloud.com/<key>")
		}
		o.Bucket, o.Region = bucket, region
	default:
		return COSObject{}, fmt.Errorf("a COS URL starts with cos:// or https://")
	}
	m := cosBucket.FindStringSubmatch(o.Bucket)
	if m == nil {
		return COSObject{}, fmt.Errorf("bucket %q is not <name>-<appid> (lower-case name, numeric APPID)", o.Bucket)
	}
	o.AppID = m[3]
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return COSObject{}, fmt.Errorf("a COS object URL has no query, fragment or user")
	}
	o.Key = strings.TrimPrefix(u.Path, "/")
	switch {
	case o.Key == "" || strings.HasSuffix(o.Key, "/"):
		return COSObject{}, fmt.Errorf("the URL names a bucket or folder, not an object")
	case hasDotDot(o.Key) || path.Clean("/"+o.Key) != "/"+o.Key:
		return COSObject{}, fmt.Errorf("object key %q is not a clean path", o.Key)
	}
	return o, nil
}
