// Package check holds the syntax checks that several dlc packages share:
// names, tags, environment variables, Ray node labels and logical
// resources, advanced parameters and image references. Each takes the
// field's path and the rule ID to report, and returns every problem.
package check

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aidlc/dlc/errs"
)

// Limits shared by clusters and jobs. They bound every map, list and
// string of a spec or job config, so that what validates fits, with room
// to spare, in one stored object (etcd takes at most 1.5 MiB) and in the
// RayCluster or RayJob rendered from it.
const (
	MaxTags          = 50  // tags per object
	MaxTagKeyLen     = 127 // characters in a tag key
	MaxTagValueLen   = 255 // characters in a tag value
	MaxAdvancedValue = 1024
	MaxAdvancedBytes = 2048 // bytes in all of an object's advanced keys and values
	MaxNodeGroupName = 63
	MaxIDLen         = 63 // characters in an id: a DNS label

	// Environment variables of one node group, or of a job's runtime
	// environment: plain (envVars) and from Secrets (secretEnvVars)
	// together.
	MaxEnvVars     = 64   // variables
	MaxEnvNameLen  = 128  // bytes in a name
	MaxEnvValueLen = 2048 // bytes in a value
	// MaxEnvBytes bounds the bytes of every name and value, and of every
	// Secret name and key a variable refers to.
	MaxEnvBytes = 4096

	MaxNodeLabels       = 16 // Ray node labels of a node group
	MaxLogicalResources = 32 // Ray logical resources of a node group
)

var (
	dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	envVarName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	labelName    = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	resourceName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:/-]*$`)
	advancedKey  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]*$`)
)

// Prefix returns the longest prefix of s of at most n bytes that ends on
// a character boundary: a value cut to fit a bound stays valid UTF-8.
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)]
}

// HasControl reports whether s holds a control character or invalid UTF-8.
func HasControl(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

// Name checks a display name — a job config's, a cluster group's, a
// template's: required (the error says "a <kind> needs a name"), at most
// maxLen characters, and shown as it reads: valid UTF-8 without control,
// format (zero-width, bidirectional embedding, override and isolate) or
// line-separator characters, and at least one visible character.
func Name(p errs.Path, rule, kind, name string, maxLen int) errs.List {
	switch {
	case strings.TrimSpace(name) == "":
		return errs.List{errs.Required(p, rule, "a "+kind+" needs a name")}
	case utf8.RuneCountInString(name) > maxLen:
		return errs.List{errs.TooLong(p, rule, name, maxLen)}
	case !utf8.ValidString(name):
		return errs.List{errs.Invalid(p, rule, name, "a name is valid UTF-8")}
	}
	if r, ok := hiddenRune(name); ok {
		return errs.List{errs.Invalid(p, rule, name, fmt.Sprintf(
			"a name has no control, zero-width or bidirectional formatting characters (it holds U+%04X)", r))}
	}
	if r, ok := nonCharacter(name); ok {
		return errs.List{errs.Invalid(p, rule, name, fmt.Sprintf(
			"a name has no Unicode noncharacters (it holds U+%04X)", r))}
	}
	if !hasVisible(name) {
		return errs.List{errs.Invalid(p, rule, name,
			"a name needs at least one visible character (unassigned and private-use code points are not)")}
	}
	return nil
}

// hiddenRune returns the first rune of s that is not shown as itself: a
// control (Cc), format (Cf: zero-width characters, the byte-order mark,
// bidirectional embeddings, overrides and isolates) or line or paragraph
// separator (Zl, Zp).
func hiddenRune(s string) (rune, bool) {
	for _, r := range s {
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			return r, true
		}
	}
	return 0, false
}

// nonCharacter returns the first Unicode noncharacter of s: U+FDD0 to
// U+FDEF and the last two code points of every plane, which are never
// meant for text that is shown or exchanged.
func nonCharacter(s string) (rune, bool) {
	for _, r := range s {
		if (r >= 0xFDD0 && r <= 0xFDEF) || r&0xFFFE == 0xFFFE {
			return r, true
		}
	}
	return 0, false
}

// blankLetters are letters and symbols that fonts draw as blank space.
var blankLetters = map[rune]bool{
	'\u115F': true, '\u1160': true, '\u3164': true, '\uFFA0': true, // Hangul fillers
	'\u2800': true, // Braille blank
}

// hasVisible reports whether s, free of hidden runes, holds a character
// that is drawn: an assigned graphic character (a letter, mark, number,
// punctuation or symbol: not unassigned, private-use or a noncharacter,
// which no font is sure to draw) that is not a space, a combining mark on
// its own, or a blank letter.
func hasVisible(s string) bool {
	for _, r := range s {
		if unicode.IsGraphic(r) && !unicode.IsSpace(r) && !unicode.In(r, unicode.Mn, unicode.Me) && !blankLetters[r] {
			return true
		}
	}
	return false
}

// NodeGroupName checks a head or worker group name: it becomes part of
// Kubernetes object names and labels, so it is a DNS-1123 label.
func NodeGroupName(p errs.Path, rule, name string) errs.List {
	switch {
	case name == "":
		return errs.List{errs.Required(p, rule, "a node group needs a name")}
	case len(name) > MaxNodeGroupName:
		return errs.List{errs.TooLong(p, rule, name, MaxNodeGroupName)}
	case !dns1123Label.MatchString(name):
		return errs.List{errs.Invalid(p, rule, name,
			"must be lower-case letters, digits and '-', starting and ending with a letter or digit")}
	}
	return nil
}

// ID checks the id of a platform object, given or referenced — a resource
// group or package, a cluster or cluster group: required (the error says
// "a <kind> id"), and a DNS-1123 label, at most MaxIDLen characters. Ids
// become metric label values and parts of Kubernetes object names, so
// they are short and of a safe alphabet.
func ID(p errs.Path, rule, kind, id string) errs.List {
	switch {
	case id == "":
		return errs.List{errs.Required(p, rule, "a "+kind+" id")}
	case len(id) > MaxIDLen:
		return errs.List{errs.TooLong(p, rule, id, MaxIDLen)}
	case !dns1123Label.MatchString(id):
		return errs.List{errs.Invalid(p, rule, id,
			"a "+kind+" id is a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit")}
	}
	return nil
}

// IsID reports whether id is a valid id (see ID).
func IsID(id string) bool { return len(id) <= MaxIDLen && dns1123Label.MatchString(id) }

// ReservedTagPrefixes start tag keys that are not the user's: the
// platform's own labels and Kubernetes' and Ray's, which tags must never
// pass for.
var ReservedTagPrefixes = []string{"dlc.aidlc.io/", "kubernetes.io/", "k8s.io/", "ray.io/"}

// reservedTagPrefix returns the reserved prefix k starts with (compared
// without case, and after any subdomain: "x.kubernetes.io/" too), or "".
func reservedTagPrefix(k string) string {
	lk := strings.ToLower(k)
	for _, p := range ReservedTagPrefixes {
		if strings.HasPrefix(lk, p) || (strings.Contains(lk, "/") && strings.HasSuffix(lk[:strings.Index(lk, "/")+1], "."+p)) {
			return p
		}
	}
	return ""
}

// Tags checks key–value tags (J4, C3): at most MaxTags, keys not empty,
// bounded, without control characters and not in a reserved prefix
// (ReservedTagPrefixes), values bounded without control characters.
func Tags(p errs.Path, rule string, tags map[string]string) errs.List {
	var l errs.List
	if len(tags) > MaxTags {
		l = append(l, errs.TooMany(p, rule, len(tags), MaxTags))
	}
	for _, k := range errs.SortedKeys(tags) {
		v := tags[k]
		kp := p.Key(k)
		switch {
		case strings.TrimSpace(k) == "":
			l = append(l, errs.Invalid(kp, rule, k, "a tag key must not be empty"))
		case utf8.RuneCountInString(k) > MaxTagKeyLen:
			l = append(l, errs.TooLong(kp, rule, k, MaxTagKeyLen))
		case HasControl(k):
			l = append(l, errs.Invalid(kp, rule, k, "must not contain control characters"))
		case reservedTagPrefix(k) != "":
			l = append(l, errs.Invalid(kp, rule, k, "the prefix "+reservedTagPrefix(k)+" is reserved (the platform's and Kubernetes' own labels)"))
		}
		switch {
		case utf8.RuneCountInString(v) > MaxTagValueLen:
			l = append(l, errs.TooLong(kp, rule, v, MaxTagValueLen))
		case HasControl(v):
			l = append(l, errs.Invalid(kp, rule, v, "must not contain control characters"))
		}
	}
	return l
}

// EnvVars checks environment variables: names as Kubernetes and a shell
// accept them, of at most MaxEnvNameLen bytes, and values of valid UTF-8
// without NUL, of at most MaxEnvValueLen bytes. It returns the bytes of
// the names and values, which EnvTotals bounds.
func EnvVars(p errs.Path, rule string, env map[string]string) (errs.List, int) {
	var l errs.List
	size := 0
	for _, k := range errs.SortedKeys(env) {
		v := env[k]
		size += len(k) + len(v)
		l = append(l, EnvName(p.Key(k), rule, k)...)
		switch {
		case len(v) > MaxEnvValueLen:
			l = append(l, errs.Invalid(p.Key(k), rule, fmt.Sprintf("%d bytes", len(v)),
				fmt.Sprintf("an environment variable's value is at most %d bytes; pass larger data in a file (a mount or the job package)", MaxEnvValueLen)))
		case strings.ContainsRune(v, 0):
			l = append(l, errs.Invalid(p.Key(k), rule, v, "must not contain NUL"))
		case !utf8.ValidString(v):
			l = append(l, errs.Invalid(p.Key(k), rule, v, "must be valid UTF-8"))
		}
	}
	return l, size
}

// EnvName checks one environment variable name.
func EnvName(p errs.Path, rule, k string) errs.List {
	switch {
	case len(k) > MaxEnvNameLen:
		return errs.List{errs.TooLong(p, rule, k, MaxEnvNameLen)}
	case !envVarName.MatchString(k):
		return errs.List{errs.Invalid(p, rule, k,
			"an environment variable name is letters, digits and '_', not starting with a digit")}
	}
	return nil
}

// EnvTotals bounds the environment variables of one node group or
// runtime environment: at most MaxEnvVars of them and MaxEnvBytes in all
// (envVars and secretEnvVars together), reported at p.
func EnvTotals(p errs.Path, rule string, count, size int) errs.List {
	var l errs.List
	if count > MaxEnvVars {
		l = append(l, &errs.FieldError{Path: p, Rule: rule, Type: errs.TypeTooMany, BadValue: count,
			Detail: fmt.Sprintf("at most %d environment variables (envVars and secretEnvVars together)", MaxEnvVars)})
	}
	if size > MaxEnvBytes {
		l = append(l, errs.Invalid(p, rule, fmt.Sprintf("%d bytes", size), fmt.Sprintf(
			"the environment variables' names and values (and the Secret names and keys they refer to) come to at most %d bytes; pass larger data in a file (a mount or the job package)", MaxEnvBytes)))
	}
	return l
}

// SecretName checks the name of a Secret an environment variable's value
// comes from: a DNS subdomain (at most 253 characters) that starts with
// prefix, the only Secrets the platform's pods may read.
func SecretName(p errs.Path, rule, name, prefix string) errs.List {
	switch {
	case name == "":
		return errs.List{errs.Required(p, rule, "the Secret's name")}
	case len(name) > 253:
		return errs.List{errs.TooLong(p, rule, name, 253)}
	case !dnsSubdomain.MatchString(name):
		return errs.List{errs.Invalid(p, rule, name, "a Secret's name is a DNS subdomain: lower-case letters, digits, '-' and '.'")}
	case !strings.HasPrefix(name, prefix):
		return errs.List{errs.Invalid(p, rule, name, fmt.Sprintf(
			"the platform's pods read only Secrets whose name starts with %q; store the value in such a Secret", prefix))}
	}
	return nil
}

var secretKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// SecretKey checks a key of a Secret, as Kubernetes names them: at most
// 253 letters, digits, '-', '_' and '.', not "." or "..".
func SecretKey(p errs.Path, rule, key string) errs.List {
	switch {
	case key == "":
		return errs.List{errs.Required(p, rule, "the key in the Secret")}
	case len(key) > 253:
		return errs.List{errs.TooLong(p, rule, key, 253)}
	case !secretKey.MatchString(key) || key == "." || key == "..":
		return errs.List{errs.Invalid(p, rule, key, "a Secret key is letters, digits, '-', '_' and '.', not . or ..")}
	}
	return nil
}

// NodeLabels checks Ray node labels: keys are [prefix/]name as in
// Kubernetes, values at most 63 characters of the same alphabet, and the
// ray.io/ prefix is Ray's own.
func NodeLabels(p errs.Path, rule string, labels map[string]string) errs.List {
	var l errs.List
	if len(labels) > MaxNodeLabels {
		l = append(l, errs.TooMany(p, rule, len(labels), MaxNodeLabels))
	}
	for _, k := range errs.SortedKeys(labels) {
		kp := p.Key(k)
		if msg := labelKeyProblem(k); msg != "" {
			l = append(l, errs.Invalid(kp, rule, k, msg))
		}
		if v := labels[k]; v != "" && (len(v) > 63 || !labelName.MatchString(v)) {
			l = append(l, errs.Invalid(kp, rule, v,
				"a label value is at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"))
		}
	}
	return l
}

func labelKeyProblem(k string) string {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	switch {
	case hasPrefix && (prefix == "" || len(prefix) > 253 || !dnsSubdomain.MatchString(prefix)):
		return "a label key prefix must be a DNS subdomain (lower case, at most 253 characters)"
	case hasPrefix && (prefix == "ray.io" || strings.HasSuffix(prefix, ".ray.io")):
		return "the ray.io/ prefix is reserved for Ray's own labels"
	case name == "" || len(name) > 63 || !labelName.MatchString(name):
		return "a label name is at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	}
	return ""
}

// reservedResources are the resources Ray derives from the node itself.
var reservedResources = map[string]bool{
	"CPU": true, "GPU": true, "TPU": true, "memory": true, "object_store_memory": true,
}

// LogicalResources checks Ray logical (custom) resources: a name Ray
// accepts, not one of Ray's own (CPU, GPU, memory, ...), and a finite
// quantity that is not negative.
func LogicalResources(p errs.Path, rule string, res map[string]float64) errs.List {
	var l errs.List
	if len(res) > MaxLogicalResources {
		l = append(l, errs.TooMany(p, rule, len(res), MaxLogicalResources))
	}
	for _, k := range errs.SortedKeys(res) {
		kp := p.Key(k)
		switch {
		case reservedResources[k]:
			l = append(l, errs.Invalid(kp, rule, k,
				"CPU, GPU, memory and object store memory come from the node spec; choose a different node spec instead"))
		case len(k) > 128 || !resourceName.MatchString(k):
			l = append(l, errs.Invalid(kp, rule, k,
				"a logical resource name starts with a letter or '_' and holds letters, digits, '_', '.', ':', '/' or '-'"))
		}
		if v := res[k]; math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			l = append(l, errs.Invalid(kp, rule, v, "a logical resource quantity is a finite number ≥ 0"))
		}
	}
	return l
}

// managedKeys maps each platform-managed advanced-parameter key (written
// lower case, '-' for '_' and '.') to the setting that controls it (J11).
var managedKeys = map[string]string{
	// compute resources
	"num-cpus":  "the node spec (headGroup.nodeSpec, workerGroups[].nodeSpec)",
	"num-gpus":  "the node spec (headGroup.nodeSpec, workerGroups[].nodeSpec)",
	"memory":    "the node spec (headGroup.nodeSpec, workerGroups[].nodeSpec)",
	"cpu":       "the node spec (headGroup.nodeSpec, workerGroups[].nodeSpec)",
	"gpu":       "the node spec (headGroup.nodeSpec, workerGroups[].nodeSpec)",
	"resources": "the node group's logical resources (headGroup.resources, workerGroups[].resources)",
	"labels":    "the node group's labels (headGroup.labels, workerGroups[].labels)",
	// instance counts
	"replicas":     "the worker group's instance range (workerGroups[].instances)",
	"min-replicas": "the worker group's instance range (workerGroups[].instances)",
	"max-replicas": "the worker group's instance range (workerGroups[].instances)",
	"num-workers":  "the worker group's instance range (workerGroups[].instances)",
	"instances":    "the worker group's instance range (workerGroups[].instances)",
	// image and runtime version
	"image":           "the image setting",
	"ray-version":     "the image setting (the image fixes the Ray version)",
	"python-version":  "the image setting (the image fixes the Python version)",
	"runtime-version": "the image setting (the image fixes the runtime version)",
	// start command and start parameters
	"entrypoint":       "the job's entrypoint",
	"command":          "the job's entrypoint",
	"start-command":    "nothing: the platform starts Ray itself",
	"ray-start-params": "nothing: the platform sets Ray's start parameters",
	"block":            "nothing: the platform starts Ray itself",
	"head":             "nothing: the platform starts Ray itself",
	"address":          "nothing: the platform connects the nodes itself",
	"port":             "nothing: the platform chooses Ray's ports",
	"node-ip-address":  "nothing: the platform connects the nodes itself",
	// environment variables
	"env":      "the environment variables setting (envVars)",
	"env-vars": "the environment variables setting (envVars)",
}

// NormalizeKey writes an advanced-parameter key the way managedKeys does.
func NormalizeKey(k string) string {
	k = strings.ToLower(strings.TrimLeft(k, "-"))
	k = strings.NewReplacer("_", "-", ".", "-").Replace(k)
	// camelCase keys: rayStartParams → raystartparams; match those too.
	return k
}

var managedCompact = func() map[string]string {
	m := make(map[string]string, len(managedKeys))
	for k, v := range managedKeys {
		m[strings.ReplaceAll(k, "-", "")] = v
	}
	return m
}()

// ManagedSetting returns the setting to use instead when key is a
// platform-managed advanced parameter, and "" when key may be set.
func ManagedSetting(key string) string {
	n := NormalizeKey(key)
	if s, ok := managedKeys[n]; ok {
		return s
	}
	return managedCompact[strings.ReplaceAll(n, "-", "")]
}

// Advanced checks advanced parameters: at most max entries (max < 0: no
// limit, reported under countRule), keys of a sane syntax, and no
// platform-managed key (J11).
func Advanced(p errs.Path, countRule string, max int, params map[string]string) errs.List {
	var l errs.List
	if max >= 0 && len(params) > max {
		l = append(l, errs.TooMany(p, countRule, len(params), max))
	}
	size := 0
	for k, v := range params {
		size += len(k) + len(v)
	}
	if size > MaxAdvancedBytes {
		l = append(l, errs.Invalid(p, countRule, fmt.Sprintf("%d bytes", size),
			fmt.Sprintf("the advanced parameters' keys and values come to at most %d bytes", MaxAdvancedBytes)))
	}
	for _, k := range errs.SortedKeys(params) {
		kp := p.Key(k)
		if s := ManagedSetting(k); s != "" {
			l = append(l, errs.Forbidden(kp, "J11",
				fmt.Sprintf("%q is managed by the platform and cannot be overridden; use %s", k, s)))
			continue
		}
		if len(k) > 128 || !advancedKey.MatchString(k) {
			l = append(l, errs.Invalid(kp, countRule, k,
				"an advanced parameter key starts with a letter and holds letters, digits, '_', '.' or '-'"))
		}
		if v := params[k]; len(v) > MaxAdvancedValue || HasControl(v) {
			l = append(l, errs.Invalid(kp, countRule, clip(v),
				fmt.Sprintf("a value is at most %d bytes without control characters", MaxAdvancedValue)))
		}
	}
	return l
}

// Priority checks a priority: nil means unset (the default 5 applies);
// any value given, 0 too, is 1–9.
func Priority(p errs.Path, rule string, v *int) errs.List {
	if v != nil && (*v < 1 || *v > 9) {
		return errs.List{errs.Invalid(p, rule, *v, "priority is 1–9; leave it out for the default 5")}
	}
	return nil
}

// clip shortens a bad value for an error message: its first 64
// characters.
func clip(v string) string {
	if utf8.RuneCountInString(v) <= 64 {
		return v
	}
	n := 0
	for i := range v {
		if n == 64 {
			return v[:i] + "…"
		}
		n++
	}
	return v
}
