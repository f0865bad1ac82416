package kubetest

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// authExempt are the paths token authentication lets through. Cite:
// python/ray/_private/authentication/http_token_authentication.py
// get_token_auth_middleware (fact 42).
var authExempt = map[string]bool{"/": true, "/favicon.ico": true, "/api/authentication_mode": true, "/api/authenticate": true,
	"/api/healthz": true, "/api/gcs_healthz": true, "/api/local_raylet_healthz": true, "/-/healthz": true}

// authenticate is Ray's token authentication middleware, first after the
// metrics one. Cite: http_token_authentication.py
// get_token_auth_middleware and C++ AuthenticationToken::FromMetadata
// (facts 39-41): Authorization, or only when that is empty
// X-Ray-Authorization, or the ray-authentication-token cookie; it must be
// exactly "Bearer <token>"; missing → 401, wrong → 403.
func (h *RayHead) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		token := h.token
		h.mu.Unlock()
		if token == "" || authExempt[r.URL.Path] || strings.HasPrefix(r.URL.Path, "/static/") {
			next.ServeHTTP(w, r)
			return
		}
		got := r.Header.Get("Authorization")
		if got == "" {
			got = r.Header.Get("X-Ray-Authorization")
		}
		if got == "" {
			if c, err := r.Cookie("ray-authentication-token"); err == nil && c.Value != "" {
				got = "Bearer " + c.Value
			}
		}
		if got == "" {
			text(w, http.StatusUnauthorized, "Unauthorized: Missing authentication token")
			return
		}
		sent, ok := strings.CutPrefix(got, "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(sent), []byte(token)) != 1 {
			text(w, http.StatusForbidden, "Forbidden: Invalid authentication token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// noBrowserPosts refuses a browser's POST and PUT. Cite:
// python/ray/dashboard/http_server_head.py browsers_no_post_put_middleware
// (fact 43).
func noBrowserPosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.HasPrefix(r.UserAgent(), "Mozilla") &&
			r.URL.Path != "/api/authenticate" {
			text(w, http.StatusMethodNotAllowed, "Method Not Allowed for browser traffic.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authMode answers GET /api/authentication_mode. Cite:
// http_token_authentication.py (fact 42).
func (h *RayHead) authMode(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	mode := "disabled"
	if h.token != "" {
		mode = "token"
	}
	h.mu.Unlock()
	pyReply(w, http.StatusOK, newPyDict().set("authentication_mode", mode))
}
