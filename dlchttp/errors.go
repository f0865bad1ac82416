package dlchttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/errs"
)

// The error codes of an Error, one per kind of failure.
const (
	CodeBadRequest           = "bad_request"           // 400: the body is not JSON (or YAML), a query parameter is wrong
	CodeUnauthenticated      = "unauthenticated"       // 401: the Authenticator did not name a user
	CodeForbidden            = "forbidden"             // 403: ErrForbidden, the client's authorizer refused
	CodeNotFound             = "not_found"             // 404: ErrNotFound, or no such route
	CodeMethodNotAllowed     = "method_not_allowed"    // 405
	CodeConflict             = "conflict"              // 409: ErrConflict (a name taken, a write that lost a race)
	CodeState                = "state"                 // 409: ErrState, with State
	CodeQuota                = "quota"                 // 409: ErrQuota, with Quota
	CodePreconditionFailed   = "precondition_failed"   // 412: If-Match names a version that is not the stored one
	CodeTooLarge             = "too_large"             // 413: the body is over Options.MaxBodyBytes
	CodeUnsupportedMedia     = "unsupported_media"     // 415: a Content-Type the route does not read
	CodeInvalid              = "invalid"               // 422: ErrInvalid, with Fields
	CodePreconditionRequired = "precondition_required" // 428: a PUT without If-Match
	CodeInternal             = "internal"              // 500: anything else; the cause is logged, not sent
	CodeUnavailable          = "unavailable"           // 503: ErrUnavailable; Retry-After says when to retry
)

// Error is the body of every answer that is not a success: a status, a
// code (one of the Code constants), a message, and the detail of the
// SDK's typed errors. A 500 says no more than "internal error".
type Error struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Fields are every problem of an ErrInvalid (422), each with its
	// field path and product rule.
	Fields []FieldError `json:"fields,omitempty"`
	// State is the detail of an ErrState (409, code "state").
	State *StateDetail `json:"state,omitempty"`
	// Quota is the detail of an ErrQuota (409, code "quota").
	Quota *QuotaDetail `json:"quota,omitempty"`
	// Forbidden is the detail of an ErrForbidden (403).
	Forbidden *ForbiddenDetail `json:"forbidden,omitempty"`
	// NotFound names the object that does not exist (404), when the SDK
	// says.
	NotFound *NotFoundDetail `json:"notFound,omitempty"`

	logged bool // the cause is logged, not sent (Message says less)
}

// Error implements error.
func (e *Error) Error() string { return strconv.Itoa(e.Status) + " " + e.Code + ": " + e.Message }

// FieldError is an errs.FieldError on the wire.
type FieldError struct {
	Path     string `json:"path"`           // e.g. "workerGroups[2].instances.max"; "" for the whole document
	Rule     string `json:"rule,omitempty"` // the product rule's ID, e.g. "C8" (docs/rules.md)
	Type     string `json:"type"`           // e.g. "Invalid value", "Required value", "Unknown field"
	Detail   string `json:"detail,omitempty"`
	BadValue any    `json:"badValue,omitempty"`
}

// StateDetail is an errs.StateError on the wire.
type StateDetail struct {
	Kind    string   `json:"kind"`
	ID      string   `json:"id"`
	Op      string   `json:"op"`
	State   string   `json:"state"`
	Allowed []string `json:"allowed,omitempty"`
	Reason  string   `json:"reason,omitempty"`
}

// QuotaDetail is an errs.QuotaError on the wire.
type QuotaDetail struct {
	ResourceGroup string `json:"resourceGroup,omitempty"`
	Requested     string `json:"requested,omitempty"`
	Available     string `json:"available,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// ForbiddenDetail is an errs.ForbiddenError on the wire: the action and
// the resource asked for, never the object's attributes.
type ForbiddenDetail struct {
	User     string `json:"user"`
	Action   string `json:"action"`
	Resource string `json:"resource"`
	Reason   string `json:"reason,omitempty"`
}

// NotFoundDetail is an errs.NotFoundError on the wire.
type NotFoundDetail struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// httpError is an error of the handler's own (a bad query, a body too
// large, a missing If-Match): it is sent as it is.
func httpError(status int, code, msg string) *Error {
	return &Error{Status: status, Code: code, Message: msg}
}

// toError maps an error of the SDK to its answer. ErrForbidden is tested
// first, so that a refusal never says more than the refusal does.
func toError(err error) *Error {
	var he *Error
	if errors.As(err, &he) {
		return he
	}
	switch {
	case errors.Is(err, dlc.ErrForbidden):
		e := httpError(http.StatusForbidden, CodeForbidden, err.Error())
		var fe *errs.ForbiddenError
		if errors.As(err, &fe) {
			e.Forbidden = &ForbiddenDetail{User: fe.User, Action: fe.Action, Resource: fe.Resource, Reason: fe.Reason}
		}
		return e
	case errors.Is(err, dlc.ErrInvalid):
		e := httpError(http.StatusUnprocessableEntity, CodeInvalid, err.Error())
		for _, f := range dlc.Fields(err) {
			e.Fields = append(e.Fields, FieldError{Path: f.Path.String(), Rule: f.Rule, Type: string(f.Type), Detail: f.Detail, BadValue: wireValue(f.BadValue)})
		}
		var re *errs.RefusedError
		if len(e.Fields) == 0 && !errors.As(err, &re) {
			// Not a problem of the input the SDK names (a backend's own
			// refusal, e.g. the API server's text about its objects): the
			// cause is logged, not sent.
			e.Message = "the platform refused the request as invalid"
			e.logged = true
		}
		return e
	case errors.Is(err, dlc.ErrNotFound):
		e := httpError(http.StatusNotFound, CodeNotFound, err.Error())
		var nf *errs.NotFoundError
		if errors.As(err, &nf) {
			e.NotFound = &NotFoundDetail{Kind: nf.Kind, ID: nf.ID}
		}
		return e
	case errors.Is(err, dlc.ErrState):
		e := httpError(http.StatusConflict, CodeState, err.Error())
		var se *errs.StateError
		if errors.As(err, &se) {
			e.State = &StateDetail{Kind: se.Kind, ID: se.ID, Op: se.Op, State: se.State, Allowed: se.Allowed, Reason: se.Reason}
		}
		return e
	case errors.Is(err, dlc.ErrQuota):
		e := httpError(http.StatusConflict, CodeQuota, err.Error())
		var qe *errs.QuotaError
		if errors.As(err, &qe) {
			e.Quota = &QuotaDetail{ResourceGroup: qe.ResourceGroup, Requested: qe.Requested, Available: qe.Available, Reason: qe.Reason}
		}
		return e
	case errors.Is(err, dlc.ErrConflict):
		return httpError(http.StatusConflict, CodeConflict, err.Error())
	case errors.Is(err, dlc.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The cause may name hosts and addresses of the backend: it is
		// logged, not sent.
		return httpError(http.StatusServiceUnavailable, CodeUnavailable, "the platform cannot answer now; retry later")
	}
	return httpError(http.StatusInternalServerError, CodeInternal, "internal error")
}

// wireValue returns a bad value as JSON carries it; one that JSON cannot
// hold (a NaN, a channel) is sent as its text.
func wireValue(v any) any {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return json.RawMessage(b)
}
