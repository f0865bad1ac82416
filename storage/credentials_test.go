package storage

import (
	"bytes"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
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
	// encoding/gob, of the value, a pointer to it and a struct holding it.
	for i, v := range []any{c, &c, struct{ C Credentials }{c}, opts} {
		var b bytes.Buffer
		if err := gob.NewEncoder(&b).Encode(v); err != nil {
			t.Fatalf("gob %d: %v", i, err)
		}
		out = append(out, b.String())
	}
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

// TestCOSClientIsRedacted: no format verb shows a client's secret key or
// session token, whether the client is printed itself, in a struct, a
// slice or a map, or (through reflection, as a logger might) as a struct
// value field by field.
func TestCOSClientIsRedacted(t *testing.T) {
	t.Parallel()
	creds := Credentials{SecretID: "AKIDabcdefgh1234", SecretKey: "super-secret-key", SessionToken: "session-token-xyz"}
	c, err := NewCOSClient(COSOptions{Credentials: creds, Region: "ap-guangzhou", Endpoint: "https://cos.example.com:8443"})
	if err != nil {
		t.Fatal(err)
	}
	type holder struct {
		Client *COSClient
		client *COSClient
		Opts   COSOptions
	}
	h := holder{Client: c, client: c, Opts: COSOptions{Credentials: creds}}
	values := []any{c, h, &h, []*COSClient{c}, map[string]*COSClient{"c": c}, reflect.ValueOf(c).Elem()}
	// fmt handles %p before any method: of a value that is not a pointer
	// it prints the fields raw, which no method can redact.
	pointers := []any{c, &h}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3v", "%-8s", "%o", "%t", "%p"} {
		vs := values
		if verb == "%p" {
			vs = pointers
		}
		for i, v := range vs {
			s := fmt.Sprintf(verb, v)
			if strings.Contains(s, creds.SecretKey) || strings.Contains(s, creds.SessionToken) || strings.Contains(s, "AKIDabcdefgh") ||
				strings.Contains(s, hex.EncodeToString([]byte(creds.SecretKey))) {
				t.Fatalf("%s of value %d leaked: %s", verb, i, s)
			}
		}
	}
	if s := fmt.Sprintf("%#v", c); !strings.Contains(s, "ap-guangzhou") || !strings.Contains(s, "cos.example.com") || !strings.Contains(s, "[redacted]") {
		t.Fatalf("%%#v = %s", s)
	}
	if s := fmt.Sprintf("%q", c); s != strconv.Quote(c.String()) {
		t.Fatalf("%%q = %s", s)
	}
	if s := fmt.Sprint((*COSClient)(nil)); s != "COSClient(nil)" {
		t.Fatalf("nil client = %s", s)
	}
}

// TestNewCOSClientRedactsEndpoint: an endpoint's user and password never
// show in NewCOSClient's error, also when the URL does not parse, and an
// endpoint with them is refused.
func TestNewCOSClientRedactsEndpoint(t *testing.T) {
	t.Parallel()
	for _, ep := range []string{
		"https://admin:hunter2@cos.example.com",
		"https://admin:hunter2@cos.example.com/path",
		"https://admin:hunter2@cos.example.com:port",
		"https://admin:hun/ter2@cos.example.com",
		"ftp://admin:hunter2@cos.example.com",
		"admin:hunter2@cos.example.com",
		"https://hunter2@cos.example.com",
	} {
		_, err := NewCOSClient(COSOptions{Endpoint: ep, Anonymous: true})
		if err == nil {
			t.Errorf("%s accepted", ep)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "ter2") || !strings.Contains(err.Error(), "[redacted]@cos.example.com") {
			t.Errorf("%s: %v", ep, err)
		}
	}
	if _, err := NewCOSClient(COSOptions{Endpoint: "http://127.0.0.1:9000/", Anonymous: true}); err != nil {
		t.Fatal(err)
	}
}
