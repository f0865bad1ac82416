package dlchttp

import (
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/aidlc/dlc"
)

// etag returns the strong entity tag of a stored version: the version
// itself in quotes, or, when it holds a character an entity tag may not
// (or begins with "~"), "~" and its base64url.
func etag(version string) string {
	if version == "" {
		return ""
	}
	ok := !strings.HasPrefix(version, "~")
	for i := 0; ok && i < len(version); i++ {
		c := version[i]
		ok = c == 0x21 || (c >= 0x23 && c <= 0x7e)
	}
	if ok {
		return `"` + version + `"`
	}
	return `"~` + base64.RawURLEncoding.EncodeToString([]byte(version)) + `"`
}

// unETag returns the version a strong entity tag stands for; false for a
// weak tag or one that does not parse (which then matches no version).
func unETag(t string) (string, bool) {
	if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
		return "", false
	}
	v := t[1 : len(t)-1]
	if rest, ok := strings.CutPrefix(v, "~"); ok {
		b, err := base64.RawURLEncoding.DecodeString(rest)
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	return v, v != ""
}

func setETag(w http.ResponseWriter, version string) {
	if t := etag(version); t != "" {
		w.Header().Set("ETag", t)
	}
}

var (
	errPreconditionRequired = httpError(http.StatusPreconditionRequired, CodePreconditionRequired,
		`an update needs If-Match: the ETag of the object as read (or "*" for any version)`)
	errPreconditionFailed = httpError(http.StatusPreconditionFailed, CodePreconditionFailed,
		"If-Match does not name the stored version: read the object again")
)

// ifMatch reads a request's If-Match: the versions it names (strong tags
// only; a weak one never matches, RFC 9110 §13.1.1), whether it is "*",
// and whether there is one at all.
func ifMatch(r *http.Request) (versions []string, star, present bool) {
	for _, h := range r.Header.Values("If-Match") {
		present = true
		for t := range strings.SplitSeq(h, ",") {
			t = strings.TrimSpace(t)
			if t == "*" {
				star = true
			} else if v, ok := unETag(t); ok {
				versions = append(versions, v)
			}
		}
	}
	return versions, star, present
}

// precondition returns the version an update is to be made against, and
// what to make of the update's conflict. A single tag is the version it
// names (the SDK checks it); for "*", a list, or no If-Match where none is
// required, it is the stored version that current reads (a list must
// hold it). A missing If-Match where one is required is a 428. When the
// update made against an If-Match's tags conflicts, onConflict turns
// the conflict into a 412 if the stored version is another now: the
// precondition failed; a conflict of another kind (a name taken), or one
// under "*" or no If-Match, stays a 409.
func precondition(r *http.Request, required bool, current func() (string, error)) (version string, onConflict func(error) error, err error) {
	versions, star, present := ifMatch(r)
	keep := func(err error) error { return err }
	conditional := present && !star
	switch {
	case !present && required:
		return "", nil, errPreconditionRequired
	case conditional && len(versions) == 0:
		return "", nil, errPreconditionFailed
	case conditional && len(versions) == 1:
		version = versions[0]
	default:
		if version, err = current(); err != nil {
			return "", nil, err
		}
		if conditional && !slices.Contains(versions, version) {
			return "", nil, errPreconditionFailed
		}
	}
	if !conditional {
		return version, keep, nil
	}
	return version, func(err error) error { return stale(err, version, current) }, nil
}

// stale turns the conflict of an update made against version into a 412
// when the stored version is another now.
func stale(err error, version string, current func() (string, error)) error {
	if !errors.Is(err, dlc.ErrConflict) {
		return err
	}
	if v, gerr := current(); gerr == nil && v != version {
		return errPreconditionFailed
	}
	return err
}
