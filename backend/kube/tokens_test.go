package kube_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/errs"
)

// A Ray token read from its Secret: trimmed; a Secret that is missing is
// ErrUnavailable, never ErrNotFound (which a run's follower takes for
// Ray's word that the job is gone: the run would fail and its job run
// on); a value no HTTP header can carry is ErrInvalid (C10).
func TestSecretTokens(t *testing.T) {
	secret := func(name, v string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: map[string][]byte{"token": []byte(v)}}
	}
	c := fake.NewClientBuilder().WithObjects(secret("dlc-env-ok", "tok-1\n"), secret("dlc-env-empty", " \n"),
		secret("dlc-env-ctl", "tok\x00en"), secret("dlc-env-space", "to ken")).Build()
	st := &kube.SecretTokens{Client: c}
	ref := func(name, key string) corev1.SecretKeySelector {
		return corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
	}
	for _, tc := range []struct {
		name, secret, key string
		want              string
		is                error
	}{
		{"a file's final newline trimmed", "dlc-env-ok", "token", "tok-1", nil},
		{"a missing Secret", "dlc-env-gone", "token", "", errs.ErrUnavailable},
		{"a missing key", "dlc-env-ok", "other", "", errs.ErrInvalid},
		{"white space only", "dlc-env-empty", "token", "", errs.ErrInvalid},
		{"a control character", "dlc-env-ctl", "token", "", errs.ErrInvalid},
		{"a space", "dlc-env-space", "token", "", errs.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := st.Token(t.Context(), "ns", ref(tc.secret, tc.key))
			if got != tc.want || (tc.is == nil) != (err == nil) || (tc.is != nil && !errors.Is(err, tc.is)) || errors.Is(err, errs.ErrNotFound) {
				t.Fatalf("%q, %v; want %q, %v", got, err, tc.want, tc.is)
			}
		})
	}
}
