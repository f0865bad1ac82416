package storage

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestCredentialsFromEnv(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want Credentials
	}{
		{"tencentcloud", map[string]string{EnvSecretID: "id1", EnvSecretKey: "k1", EnvSessionToken: "t1", EnvCOSSecretID: "id2", EnvCOSSecretKey: "k2"}, Credentials{"id1", "k1", "t1"}},
		{"cos fallback", map[string]string{EnvCOSSecretID: "id2", EnvCOSSecretKey: "k2"}, Credentials{SecretID: "id2", SecretKey: "k2"}},
		{"half a pair falls back", map[string]string{EnvSecretID: "id1", EnvCOSSecretID: "id2", EnvCOSSecretKey: "k2"}, Credentials{SecretID: "id2", SecretKey: "k2"}},
		{"none", map[string]string{}, Credentials{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := credentialsFrom(func(k string) string { return tc.env[k] })
			if got != tc.want {
				t.Fatalf("got %v", got.SecretID)
			}
		})
	}
	t.Run("environment", func(t *testing.T) {
		t.Setenv(EnvSecretID, "AKIDenv")
		t.Setenv(EnvSecretKey, "envkey")
		if c := CredentialsFromEnv(); c.SecretID != "AKIDenv" || c.SecretKey != "envkey" {
			t.Fatal("not read from the environment")
		}
	})
}

func TestCredentialsAreRedacted(t *testing.T) {
	t.Parallel()
	c := Credentials{SecretID: "AKIDabcdefgh1234", SecretKey: "super-secret-key", SessionToken: "session-token-xyz"}
	opts := COSOptions{Credentials: c, Region: "ap-guangzhou"}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		out = append(out, fmt.Sprintf(verb, c), fmt.Sprintf(verb, &c), fmt.Sprintf(verb, opts))
	}
	js, err := json.Marshal(struct{ C Credentials }{c})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, string(js), c.String(), c.GoString())
	for _, s := range out {
		if strings.Contains(s, c.SecretKey) || strings.Contains(s, c.SessionToken) || strings.Contains(s, "AKIDabcdefgh") {
			t.Fatalf("leaked: %s", s)
		}
	}
	if !strings.Contains(c.String(), "…1234") || !strings.Contains(c.String(), "redacted") {
		t.Fatalf("String = %s", c)
	}
	if (Credentials{}).String() != "Credentials{}" || !c.Temporary() || c.IsZero() {
		t.Fatal("zero or temporary wrong")
	}
}
