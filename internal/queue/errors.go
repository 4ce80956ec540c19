package queue

import "fmt"

// ErrorKind classifies a refused transition so the HTTP layer can map it onto
// Taskcluster's error codes in one place.
type ErrorKind int

// Error kinds.
const (
	KindConflict ErrorKind = iota + 1 // 409 RequestConflict
	KindNotFound                      // 404 ResourceNotFound
	KindInput                         // 400 InputError
)

// Error is a transition or request refused by the domain rules.
type Error struct {
	Kind    ErrorKind
	Message string
	// Details carries structured extra data (for example the missing
	// dependencies of a createTask), rendered into the error body.
	Details map[string]any
}

func (e *Error) Error() string { return e.Message }

// ErrorCode is Taskcluster's error code the refusal is answered with
// (the API framework maps any error that names one, without importing
// the queue).
func (e *Error) ErrorCode() string {
	switch e.Kind {
	case KindConflict:
		return "RequestConflict"
	case KindNotFound:
		return "ResourceNotFound"
	case KindInput:
		return "InputError"
	}
	return "InternalServerError"
}

// ErrorDetails is what the answer's details say (Details, as it is).
func (e *Error) ErrorDetails() map[string]any { return e.Details }

// Conflictf builds a KindConflict error.
func Conflictf(format string, args ...any) *Error {
	return &Error{Kind: KindConflict, Message: fmt.Sprintf(format, args...)}
}

// NotFoundf builds a KindNotFound error.
func NotFoundf(format string, args ...any) *Error {
	return &Error{Kind: KindNotFound, Message: fmt.Sprintf(format, args...)}
}

// InputErrorf builds a KindInput error.
func InputErrorf(format string, args ...any) *Error {
	return &Error{Kind: KindInput, Message: fmt.Sprintf(format, args...)}
}
