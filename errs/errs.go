// Package errs holds the typed errors that every dlc package returns: the
// sentinels (ErrNotFound, ErrConflict, ErrInvalid, ErrState, ErrQuota,
// ErrUnavailable, ErrForbidden), the error types that carry detail (FieldError,
// StateError, NotFoundError, ConflictError, QuotaError, UnavailableError,
// RefusedError) and the field paths that validation reports.
//
// Callers usually reach these through package dlc, which re-exports them.
// Every error here works with errors.Is against its sentinel and with
// errors.As against its own type, also when it is one of many in a
// validation result.
package errs

import (
	"errors"
	"fmt"
	"strings"
)

// The sentinels. Test an error with errors.Is(err, errs.ErrX).
var (
	// ErrNotFound means the named object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the object changed since it was read (a stale
	// write), or an object of that name already exists.
	ErrConflict = errors.New("conflict")
	// ErrInvalid means the input breaks a rule; the error lists every
	// problem as a *FieldError.
	ErrInvalid = errors.New("invalid")
	// ErrState means the operation is not allowed in the object's current
	// state; the error is a *StateError naming the states that allow it.
	ErrState = errors.New("not allowed in this state")
	// ErrQuota means the resource group cannot allocate what was asked.
	ErrQuota = errors.New("quota exceeded")
	// ErrUnavailable means a backend could not answer now (a timeout,
	// throttling, a server error); the call may be retried.
	ErrUnavailable = errors.New("unavailable")
	// ErrForbidden means the client's authorizer refused the caller the
	// operation; the error is a *ForbiddenError naming the action and the
	// resource asked for.
	ErrForbidden = errors.New("forbidden")
)

// ForbiddenError says that a user may not do an action on a resource. It
// names only what the caller asked for (the action, and the resource by
// kind and the id the caller gave), never the object's attributes, which
// the caller may not be allowed to read.
type ForbiddenError struct {
	User     string // the user refused
	Action   string // e.g. "dlc:StartCluster"
	Resource string // e.g. "cluster/cls-1"
	Reason   string // optional: why, when the authorizer may say (e.g. "denied by statement 2")
}

// Error implements error.
func (e *ForbiddenError) Error() string {
	s := fmt.Sprintf("forbidden: user %q may not %s on %s", e.User, e.Action, e.Resource)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is reports whether target is ErrForbidden.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

// UnavailableError says which backend operation could not be done now,
// and why. It is errors.Is ErrUnavailable and unwraps to its cause.
type UnavailableError struct {
	Op  string // e.g. "store update cluster/cls-1"
	Err error  // the cause
}

// Error implements error.
func (e *UnavailableError) Error() string { return e.Op + ": unavailable: " + e.Err.Error() }

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Unavailable returns an *UnavailableError for op caused by err.
func Unavailable(op string, err error) error { return &UnavailableError{Op: op, Err: err} }

// NotFoundError says which object was not found.
type NotFoundError struct {
	Kind string // e.g. "cluster", "job", "group"
	ID   string
}

// Error implements error.
func (e *NotFoundError) Error() string { return fmt.Sprintf("%s %q not found", e.Kind, e.ID) }

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// NotFound returns a *NotFoundError.
func NotFound(kind, id string) error { return &NotFoundError{Kind: kind, ID: id} }

// ConflictError says which object conflicted and why.
type ConflictError struct {
	Kind   string
	ID     string
	Reason string // e.g. "stale version 3, current 4" or "name already used"
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s %q: conflict: %s", e.Kind, e.ID, e.Reason)
}

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Conflict returns a *ConflictError.
func Conflict(kind, id, reason string) error {
	return &ConflictError{Kind: kind, ID: id, Reason: reason}
}

// StateError says that an operation is not allowed in an object's current
// state, and which states would allow it.
type StateError struct {
	Kind    string   // "cluster", "run", ...
	ID      string   // the object's id
	Op      string   // the refused operation, e.g. "start"
	State   string   // the current state
	Allowed []string // the states in which Op is allowed
	Reason  string   // optional extra explanation
}

// Error implements error.
func (e *StateError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q: cannot %s in state %s", e.Kind, e.ID, e.Op, e.State)
	if len(e.Allowed) > 0 {
		fmt.Fprintf(&b, " (allowed in: %s)", strings.Join(e.Allowed, ", "))
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Is reports whether target is ErrState.
func (e *StateError) Is(target error) bool { return target == ErrState }

// QuotaError says that a resource group cannot allocate a request.
type QuotaError struct {
	ResourceGroup string
	Requested     string // what was asked, as text (e.g. "cpu=8 memory=32Gi gpu=0")
	Available     string // what is still allocatable, as text
	Reason        string
}

// Error implements error.
func (e *QuotaError) Error() string {
	s := fmt.Sprintf("resource group %q: quota exceeded: requested %s, allocatable %s",
		e.ResourceGroup, e.Requested, e.Available)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is reports whether target is ErrQuota.
func (e *QuotaError) Is(target error) bool { return target == ErrQuota }

// IsNotFound reports whether err is errors.Is ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// RefusedError says that a backend's far side (a Ray head) answered a
// request with a refusal that no retry changes: the request itself breaks
// one of its rules (Ray's runtime environment validation, an unknown
// field). It is errors.Is ErrInvalid. Reason is what the far side said,
// clipped.
type RefusedError struct {
	Op     string // the refused call, e.g. "submit ray job run-1"
	Status int    // the far side's status code, when it answered over HTTP
	Reason string // what it said
}

// Error implements error.
func (e *RefusedError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s: refused (%d): %s", e.Op, e.Status, e.Reason)
	}
	return e.Op + ": refused: " + e.Reason
}

// Is reports whether target is ErrInvalid.
func (e *RefusedError) Is(target error) bool { return target == ErrInvalid }
