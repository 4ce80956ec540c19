package worker

// Error kinds of a run's preparation, shared by both engines (the process
// engine's mounts, the docker engine's images).

import "fmt"

// mountError is a mount failure: malformed-payload when a rerun would fail
// the same way, resource-unavailable for temporary trouble.
type mountError struct {
	temporary bool
	err       error
}

func (e *mountError) Error() string { return e.err.Error() }

func (e *mountError) Unwrap() error { return e.err }

func permanent(format string, args ...any) error {
	return &mountError{err: fmt.Errorf(format, args...)}
}

func temporary(format string, args ...any) error {
	return &mountError{temporary: true, err: fmt.Errorf(format, args...)}
}
