package dlchttp

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/aidlc/dlc/auth"
)

// Authenticator says who sent a request. The handler asks it before every
// route but the OpenAPI document, and puts the user it returns into the
// request's context (auth.NewContext), where the client's authorizer
// (dlc.WithAuthorizer) finds it: the handler itself decides nothing about
// permissions. An error (or a user without a name) answers 401 without
// calling the client; the error's text is logged, not sent.
//
// In production put a real one here: a verifier of the platform's bearer
// tokens or client certificates, or of the identity a trusted proxy
// asserts.
type Authenticator interface {
	Authenticate(r *http.Request) (auth.User, error)
}

// AuthenticatorFunc is a function that is an Authenticator.
type AuthenticatorFunc func(r *http.Request) (auth.User, error)

// Authenticate calls f.
func (f AuthenticatorFunc) Authenticate(r *http.Request) (auth.User, error) { return f(r) }

// Default headers of InsecureHeaderAuthenticator.
const (
	DefaultUserHeader   = "X-Dlc-User"
	DefaultGroupsHeader = "X-Dlc-Groups"
)

// InsecureHeaderAuthenticator is for tests and development only — NOT FOR
// PRODUCTION: it believes whatever user a request's header names, so any
// caller can be anyone. It is safe only behind a proxy that authenticates
// the caller and sets (and strips from what callers send) these headers.
//
// The user is the value of UserHeader (DefaultUserHeader when empty), the
// groups the comma-separated values of GroupsHeader (DefaultGroupsHeader
// when empty). A request without the user header is unauthenticated (401).
type InsecureHeaderAuthenticator struct {
	UserHeader   string
	GroupsHeader string
}

var errNoUser = errors.New("no user")

// Authenticate returns the user the header names.
func (a InsecureHeaderAuthenticator) Authenticate(r *http.Request) (auth.User, error) {
	uh, gh := a.UserHeader, a.GroupsHeader
	if uh == "" {
		uh = DefaultUserHeader
	}
	if gh == "" {
		gh = DefaultGroupsHeader
	}
	name := strings.TrimSpace(r.Header.Get(uh))
	if name == "" {
		return auth.User{}, fmt.Errorf("header %s: %w", uh, errNoUser)
	}
	if err := checkName(name); err != nil {
		return auth.User{}, fmt.Errorf("header %s: %w", uh, err)
	}
	u := auth.User{Name: name}
	for _, v := range r.Header.Values(gh) {
		for g := range strings.SplitSeq(v, ",") {
			if g = strings.TrimSpace(g); g == "" {
				continue
			}
			if err := checkName(g); err != nil {
				return auth.User{}, fmt.Errorf("header %s: %w", gh, err)
			}
			if len(u.Groups) == auth.MaxEntries {
				return auth.User{}, fmt.Errorf("header %s: more than %d groups", gh, auth.MaxEntries)
			}
			u.Groups = append(u.Groups, g)
		}
	}
	return u, nil
}

// checkName refuses a user or group name a policy could not name
// (auth.MaxValueLen) or that holds control characters.
func checkName(s string) error {
	if len(s) > auth.MaxValueLen {
		return fmt.Errorf("a name of %d bytes; at most %d", len(s), auth.MaxValueLen)
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return errors.New("a name with control characters")
	}
	return nil
}
