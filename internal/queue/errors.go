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
