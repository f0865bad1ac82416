package check

import (
	"regexp"
	"strings"
)

// The grammar of a container image reference, after the distribution
// project's reference grammar.
var (
	refComponent = `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
	refDomain    = `(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?`
	refTag       = `[\w][\w.-]{0,127}`
	refDigest    = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	imageRef     = regexp.MustCompile(`^(` + refDomain + `)/(` + refComponent + `(?:/` + refComponent + `)*)(?::(` + refTag + `))?(?:@(` + refDigest + `))?$`)
)

// ImageRefProblem returns "" when ref is a registry image address with an
// explicit registry host (e.g. ccr.ccs.tencentyun.com/team/ray:2.46.0),
// and otherwise what is wrong with it.
func ImageRefProblem(ref string) string {
	switch {
	case ref == "":
		return "an image is required"
	case len(ref) > 255:
		return "an image reference has at most 255 characters"
	case strings.ContainsAny(ref, " \t\r\n"):
		return "an image reference has no spaces"
	}
	m := imageRef.FindStringSubmatch(ref)
	if m == nil {
		return "not a registry image address of the form host[:port]/namespace/repository[:tag][@digest]"
	}
	host := m[1]
	if !strings.ContainsAny(host, ".:[") && host != "localhost" {
		return "a custom image names its registry host (e.g. ccr.ccs.tencentyun.com/namespace/repository:tag)"
	}
	return ""
}
