package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Tags reach the Kubernetes objects the platform renders, so that cost
// tools that allocate by label (OpenCost, Kubecost) and `kubectl get -l`
// can select by them: each tag of a cluster (or of an on-demand run's job
// config) is a label on its RayCluster (or RayJob) and on every pod
// template, under TagLabelPrefix, with the original tags kept in the
// KeyTags annotation of the RayCluster (or RayJob): on every pod template
// too, the largest valid tags would take a tenth of etcd's limit. A tag may hold what a label cannot (a value in
// Chinese, a space, more than 63 characters): TagLabel says what label
// it becomes.

// TagLabelPrefix starts the label key of every tag. It is a subdomain of
// the platform's own, which tag keys may not use, so a tag never passes
// for one of the platform's labels (nor for Kubernetes' or Ray's).
const TagLabelPrefix = "tag.dlc.aidlc.io/"

// KeyTags is the annotation with the original tags, as a JSON object, on
// the rendered RayCluster or RayJob that carries tag labels.
const KeyTags = "dlc.aidlc.io/tags"

// TagLabel returns the label (key and value) that tag key=value becomes.
// A key or value that is a valid label name (or value) of at most 63
// characters is kept as it is; any other is made one: the characters a
// label cannot hold become '-', the ends are trimmed to a letter or digit,
// it is cut to 52 characters and a hash of the original is appended
// ("-" and 10 hex digits), so that two tags never share a label. A value
// with nothing left ("推荐") is "h" and its hash.
func TagLabel(key, value string) (labelKey, labelValue string) {
	return TagLabelPrefix + labelSafe(key, false), labelSafe(value, true)
}

// TagSelector returns the label selector, as a map, that selects the
// objects tagged with every tag of tags (cluster.HasTags' meaning).
func TagSelector(tags map[string]string) map[string]string {
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		lk, lv := TagLabel(k, v)
		out[lk] = lv
	}
	return out
}

// labelSafe returns s as a label name (the part after the prefix) or, if
// value, a label value.
func labelSafe(s string, value bool) string {
	valid := len(validation.IsValidLabelValue(s)) == 0 // a name's rules, but for the empty string
	if valid && (value || s != "") && !hashedShape.MatchString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && (r == '-' || r == '_' || r == '.' || isAlnum(byte(r))) {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	clean := strings.TrimFunc(b.String(), func(r rune) bool { return r >= 0x80 || !isAlnum(byte(r)) })
	if len(clean) > 52 {
		clean = strings.TrimRightFunc(clean[:52], func(r rune) bool { return !isAlnum(byte(r)) })
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:10]
	if clean == "" {
		return "h" + h
	}
	return clean + "-" + h
}

// hashedShape is what labelSafe makes of a string it rewrites: one that
// has that shape already is rewritten too, so that a tag never shares its
// label with another's rewritten one.
var hashedShape = regexp.MustCompile(`(^h|-)[0-9a-f]{10}$`)

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// withTags returns labels with tags' labels added (the platform's own
// keep theirs: no tag label can have their keys), and the KeyTags
// annotation's value ("" for no tags).
func withTags(labels, tags map[string]string) (map[string]string, string) {
	if len(tags) == 0 {
		return labels, ""
	}
	out := make(map[string]string, len(labels)+len(tags))
	for k, v := range TagSelector(tags) {
		out[k] = v
	}
	for k, v := range labels {
		out[k] = v
	}
	data, _ := json.Marshal(tags) // a map of strings: sorted keys, no error
	return out, string(data)
}
