package api

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// A NUL (U+0000) reaches JSON only as the escape \u0000. Most of what a
// request body carries ends up in text columns, and PostgreSQL's text
// cannot hold a NUL (the statement fails: a 500), so a body with a NUL
// anywhere is refused before its handler runs, on every store alike,
// unless its route declares that it keeps NULs (Route.KeepsNUL: it stores
// the values that may hold one as JSON, as createTask stores a task's
// definition). The store refuses a NUL in any text value as well
// (store.ErrTextNUL), for what reaches it another way.

// refuseNUL is the 400 for a body with a NUL, naming where the first is.
func refuseNUL(body []byte) *Error {
	if !holdsNUL(body) {
		return nil
	}
	where := "the request body"
	var v any
	if json.Unmarshal(body, &v) == nil {
		if p, ok := nulPath(v, "body"); ok {
			where = p
		}
	}
	return &Error{Code: CodeInputValidationError, Message: fmt.Sprintf(
		"%s holds a NUL character (\\u0000): hopper keeps NULs only inside task definitions, hook definitions, index data and secrets", where)}
}

// holdsNUL reports whether a JSON text has a \u0000 escape in a string
// (a key or a value): an escaped backslash followed by "u0000" is text,
// not a NUL.
func holdsNUL(b []byte) bool {
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(b):
			if b[i+1] == 'u' && i+5 < len(b) && string(b[i+2:i+6]) == "0000" {
				return true
			}
			i++ // the escaped character
		}
	}
	return false
}

// nulPath finds the first string (key or value) of a decoded body holding
// a NUL, as a path from prefix ("body.metadata.name", "body.routes[2]").
func nulPath(v any, prefix string) (string, bool) {
	switch x := v.(type) {
	case string:
		return prefix, strings.IndexByte(x, 0) >= 0
	case []any:
		for i, e := range x {
			if p, ok := nulPath(e, fmt.Sprintf("%s[%d]", prefix, i)); ok {
				return p, true
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if strings.IndexByte(k, 0) >= 0 {
				return fmt.Sprintf("a key of %s (%q)", prefix, k), true
			}
			if p, ok := nulPath(x[k], prefix+"."+k); ok {
				return p, true
			}
		}
	}
	return "", false
}
