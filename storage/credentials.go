package storage

import (
	"fmt"
	"os"
)

// The environment variables that CredentialsFromEnv reads, in order of
// preference: Tencent Cloud's own, then the COS tools' older names.
const (
	EnvSecretID        = "TENCENTCLOUD_SECRET_ID"
	EnvSecretKey       = "TENCENTCLOUD_SECRET_KEY"
	EnvSessionToken    = "TENCENTCLOUD_SESSION_TOKEN"
	EnvCOSSecretID     = "COS_SECRETID"
	EnvCOSSecretKey    = "COS_SECRETKEY"
	EnvCOSSessionToken = "COS_SESSIONTOKEN"
)

// Credentials are a Tencent Cloud API key pair, optionally temporary (with
// a session token from STS). They never show in logs: String, GoString,
// Format, MarshalText, MarshalJSON and GobEncode all redact them, so that printing a
// value or an options struct holding one, or serialising it into a
// Kubernetes object by mistake, does not leak the secret. One exception
// is fmt's own: %p of a value that is not a pointer (a Credentials or a
// struct holding one) prints its fields before any method is asked, so
// never print those with %p.
type Credentials struct {
	SecretID     string
	SecretKey    string
	SessionToken string // "" for a permanent key
}

// CredentialsFromEnv reads credentials from TENCENTCLOUD_SECRET_ID,
// TENCENTCLOUD_SECRET_KEY and TENCENTCLOUD_SESSION_TOKEN, falling back to
// COS_SECRETID, COS_SECRETKEY and COS_SESSIONTOKEN when the first pair is
// not set. The result is zero when neither pair is.
func CredentialsFromEnv() Credentials {
	return credentialsFrom(os.Getenv)
}

func credentialsFrom(getenv func(string) string) Credentials {
	if id, key := getenv(EnvSecretID), getenv(EnvSecretKey); id != "" && key != "" {
		return Credentials{SecretID: id, SecretKey: key, SessionToken: getenv(EnvSessionToken)}
	}
	if id, key := getenv(EnvCOSSecretID), getenv(EnvCOSSecretKey); id != "" && key != "" {
		return Credentials{SecretID: id, SecretKey: key, SessionToken: getenv(EnvCOSSessionToken)}
	}
	return Credentials{}
}

// IsZero reports whether no key is set.
func (c Credentials) IsZero() bool { return c.SecretID == "" && c.SecretKey == "" }

// Temporary reports whether the credentials carry a session token.
func (c Credentials) Temporary() bool { return c.SessionToken != "" }

// String returns a redacted description: the secret id's last four
// characters, never the key or the token.
func (c Credentials) String() string {
	if c.IsZero() {
		return "Credentials{}"
	}
	id := "…"
	if len(c.SecretID) > 8 {
		id = "…" + c.SecretID[len(c.SecretID)-4:]
	}
	s := "Credentials{SecretID:" + id + " SecretKey:[redacted]"
	if c.SessionToken != "" {
		s += " SessionToken:[redacted]"
	}
	return s + "}"
}

// GoString returns the same redacted text as String, for %#v.
func (c Credentials) GoString() string { return c.String() }

// Format prints the redacted text for every verb (%v, %+v, %#v, %s, %q, …).
func (c Credentials) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprintf(f, "%q", c.String())
		return
	}
	fmt.Fprint(f, c.String())
}

// MarshalText returns the redacted text, so that encoders never write the
// secret.
func (c Credentials) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// MarshalJSON returns the redacted text as a JSON string.
func (c Credentials) MarshalJSON() ([]byte, error) { return fmt.Appendf(nil, "%q", c.String()), nil }

// GobEncode returns the redacted text, as MarshalText does, so that
// encoding/gob never writes the secret either. Credentials do not decode
// from it: a decoder refuses the redacted value.
func (c Credentials) GobEncode() ([]byte, error) { return []byte(c.String()), nil }
