package api

import (
	"encoding/json"
	"strings"
)

// Scope-expression templates are written in Taskcluster's JSON form; these
// helpers keep the route table readable.

func scope(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func allOf(items ...string) string { return `{"AllOf":[` + strings.Join(items, ",") + `]}` }

func anyOf(items ...string) string { return `{"AnyOf":[` + strings.Join(items, ",") + `]}` }

// forEach expands to one scope per element of the list parameter in.
func forEach(variable, in, each string) string {
	b, _ := json.Marshal(map[string]string{"for": variable, "in": in, "each": each})
	return string(b)
}
