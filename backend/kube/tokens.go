package kube

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/errs"
)

// SecretTokens reads clusters' Ray tokens from their Secrets, keeping each
// for TTL so that a head polled every PollInterval costs no read of its
// Secret each time. Its Client needs "get" on Secrets in the namespace:
// the backend's Role grants none, the optional Role dlc-backend-ray-tokens
// in config/rbac does. A SecretTokens is safe for concurrent use.
//
// A rotated token reaches a cluster's Ray only when its pods start again
// (a variable from a Secret is read when a container starts): rotate by
// hibernating and starting the cluster. Until then the head refuses the
// new token, and its calls fail as unavailable.
type SecretTokens struct {
	// Client reads the Secrets.
	Client client.Client
	// TTL is how long a token read is used before it is read again; 0
	// means DefaultTokenTTL.
	TTL time.Duration

	mu      sync.Mutex
	kept    map[tokenKey]keptToken
	pruneAt int // prune what expired when kept grows past this
}

// DefaultTokenTTL is SecretTokens.TTL when it is zero.
const DefaultTokenTTL = 30 * time.Second

// maxToken bounds a token read from a Secret: a header of a few KiB at
// most goes with every call.
const maxToken = 4 << 10

type tokenKey struct{ namespace, secret, key string }

type keptToken struct {
	token string
	until time.Time
}

// Token returns the value of key ref of a Secret in namespace, without
// white space around it: a Ray token. A Secret that does not exist or
// cannot be read is ErrUnavailable (never ErrNotFound, which a run's
// follower takes for Ray's word that a job is gone); a key missing or
// empty, a value over 4 KiB or with characters an HTTP header cannot
// carry is ErrInvalid (C10).
func (s *SecretTokens) Token(ctx context.Context, namespace string, ref corev1.SecretKeySelector) (string, error) {
	k := tokenKey{namespace, ref.Name, ref.Key}
	now := time.Now()
	s.mu.Lock()
	if t, ok := s.kept[k]; ok && now.Before(t.until) {
		s.mu.Unlock()
		return t.token, nil
	}
	s.mu.Unlock()
	var sec corev1.Secret
	err := s.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, &sec)
	// No answer here is ErrNotFound: a caller following a run reads that
	// as Ray's word that the job is gone. A Secret missing or unreadable
	// leaves the head unreachable until it is put right.
	switch {
	case apierrors.IsNotFound(err):
		return "", errs.Unavailable("read the Ray token in Secret "+ref.Name,
			fmt.Errorf("the Secret %s/%s does not exist: the cluster's head cannot be called until it does", namespace, ref.Name))
	case apierrors.IsForbidden(err):
		return "", errs.Unavailable("read the Ray token in Secret "+ref.Name,
			fmt.Errorf("the backend may not read Secrets (bind the Role dlc-backend-ray-tokens, or give kube.Options.RayTokens): %w", err))
	case err != nil:
		return "", errs.Unavailable("read the Ray token in Secret "+ref.Name, err)
	}
	// A file with a final newline, as kubectl create secret --from-file
	// takes it, is the token without it.
	v := bytes.TrimSpace(sec.Data[ref.Key])
	switch {
	case len(v) == 0:
		return "", errs.List{errs.Invalid("rayToken", "C10", ref.Name+"/"+ref.Key, "the Secret has no such key, or it is empty")}.ToError()
	case len(v) > maxToken:
		return "", errs.List{errs.Invalid("rayToken", "C10", ref.Name+"/"+ref.Key, fmt.Sprintf("a Ray token of over %d bytes", maxToken))}.ToError()
	case bytes.ContainsFunc(v, func(r rune) bool { return r < 0x21 || r > 0x7e }):
		return "", errs.List{errs.Invalid("rayToken", "C10", ref.Name+"/"+ref.Key, "a Ray token is printable ASCII with no spaces: it goes in an HTTP header")}.ToError()
	}
	ttl := s.TTL
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	s.mu.Lock()
	if s.kept == nil {
		s.kept = map[tokenKey]keptToken{}
	}
	if len(s.kept) >= s.pruneAt {
		// Forget what expired (a deleted cluster's), at most once per
		// doubling: amortised, no pass over every token per read.
		for key, t := range s.kept {
			if !now.Before(t.until) {
				delete(s.kept, key)
			}
		}
		s.pruneAt = max(64, 2*len(s.kept))
	}
	s.kept[k] = keptToken{token: string(v), until: now.Add(ttl)}
	s.mu.Unlock()
	return string(v), nil
}
