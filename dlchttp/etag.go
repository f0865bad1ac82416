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

// precondition returns the version an update is to be made against:
// the one If-Match names, or, for "*" or a list, the stored one that
// current reads. required says a missing If-Match is a 428; otherwise it
// means the stored version.
func precondition(r *http.Request, required bool, current func() (string, error)) (string, error) {
	versions, star, present := ifMatch(r)
	switch {
	case !present && required:
		return "", errPreconditionRequired
	case !star && len(versions) == 1:
		return versions[0], nil
	case !star && len(versions) == 0 && present:
		return "", errPreconditionFailed
	}
	v, err := current()
	if err != nil {
		return "", err
	}
	if present && !star && !slices.Contains(versions, v) {
		return "", errPreconditionFailed
	}
	return v, nil
}

// stale turns the conflict of an update made against version into a 412
// when the stored version is another now: the precondition failed. A
// conflict of another kind (a name taken) stays a 409.
func stale(err error, version string, current func() (string, error)) error {
	if !errors.Is(err, dlc.ErrConflict) {
		return err
	}
	if v, gerr := current(); gerr == nil && v != version {
		return errPreconditionFailed
	}
	return err
}
