package api

import (
	"encoding/json"
	"strings"
)

// Scope-expression templates are written in Taskcluster's JSON form; these
// helpers keep route tables readable.

// Scope is one scope (a pattern with <param> placeholders).
func Scope(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// AllOf requires every item.
func AllOf(items ...string) string { return `{"AllOf":[` + strings.Join(items, ",") + `]}` }

// AnyOf requires one of the items.
func AnyOf(items ...string) string { return `{"AnyOf":[` + strings.Join(items, ",") + `]}` }

// forEach expands to one scope per element of the list parameter in.
func ForEach(variable, in, each string) string {
	b, _ := json.Marshal(map[string]string{"for": variable, "in": in, "each": each})
	return string(b)
}
