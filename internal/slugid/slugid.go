// Package slugid recognises Taskcluster's task and task-group ids: v4
// slugids, 22 characters of URL-safe base64 encoding a random UUID. It is a
// leaf, shared by the HTTP API, the built-in superseder, the worker's
// superseding flow and the CLI, so the pattern is written once.
package slugid

import "regexp"

// pattern is the queue's taskId parameter pattern: the version nibble of a
// v4 UUID fixes the 9th character, its variant bits the 11th, and the
// padding bits the last.
var pattern = regexp.MustCompile(`^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$`)

// Valid reports whether id is a well-formed v4 slugid.
func Valid(id string) bool { return pattern.MatchString(id) }

// Regexp returns the compiled pattern, for tables of parameter patterns.
// Callers must not modify it (a *regexp.Regexp has no mutating method).
func Regexp() *regexp.Regexp { return pattern }
