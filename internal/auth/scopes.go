// Package auth implements Taskcluster's authorization model for hopper:
// scopes and scope expressions (with the endpoint templates that render
// them), roles and their expansion, temporary credentials, and the
// authentication of Hawk-signed requests down to a final scope set.
//
// The package is a pure library: clients and roles come from the caller
// through small interfaces (ClientLookup, ExpanderSource), and all failure
// messages reproduce Taskcluster's, because users and tests grep for them.
package auth

import (
	"slices"
	"strings"
)

// ValidScope reports whether s is a syntactically valid scope: any string
// of printable ASCII characters (0x20–0x7E), including the empty string.
func ValidScope(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// ValidScopes reports whether every member of scopes is a valid scope.
func ValidScopes(scopes []string) bool {
	for _, s := range scopes {
		if !ValidScope(s) {
			return false
		}
	}
	return true
}

// ScopeSatisfies reports whether the held scope satisfies the required
// one: they are equal, or held ends in "*" and required starts with the
// rest of held. Only one trailing star is special.
func ScopeSatisfies(held, required string) bool {
	if held == required {
		return true
	}
	if prefix, ok := strings.CutSuffix(held, "*"); ok {
		return strings.HasPrefix(required, prefix)
	}
	return false
}

// SetSatisfies reports whether some member of held satisfies required.
// Roles are not expanded: callers pass already expanded scope sets.
func SetSatisfies(held []string, required string) bool {
	for _, h := range held {
		if ScopeSatisfies(h, required) {
			return true
		}
	}
	return false
}

// CompareScopes orders scopes as Taskcluster does: one trailing "*" is
// stripped from each before a plain byte-wise comparison, and on a tie
// the starred scope comes first. A sorted list thus puts "p*" right before
// "p" and everything starting with "p", which is what makes Normalize a
// single pass.
func CompareScopes(a, b string) int {
	a, aStar := strings.CutSuffix(a, "*")
	b, bStar := strings.CutSuffix(b, "*")
	if c := strings.Compare(a, b); c != 0 {
		return c
	}
	switch {
	case aStar == bStar:
		return 0
	case aStar:
		return -1
	default:
		return 1
	}
}

// SortScopes sorts scopes in place with CompareScopes.
func SortScopes(scopes []string) {
	slices.SortFunc(scopes, CompareScopes)
}

// NormalizeSorted removes, from a list already sorted with CompareScopes,
// duplicates and every scope satisfied by another member. It returns a new
// slice; the input is not modified.
func NormalizeSorted(sorted []string) []string {
	out := make([]string, 0, len(sorted))
	for i := 0; i < len(sorted); {
		s := sorted[i]
		out = append(out, s)
		i++
		for i < len(sorted) && sorted[i] == s {
			i++
		}
		if prefix, ok := strings.CutSuffix(s, "*"); ok {
			for i < len(sorted) && strings.HasPrefix(sorted[i], prefix) {
				i++
			}
		}
	}
	return out
}

// Normalize returns the normalized form of scopes: sorted with
// CompareScopes, without duplicates and without members satisfied by other
// members. The input is not modified.
func Normalize(scopes []string) []string {
	sorted := slices.Clone(scopes)
	SortScopes(sorted)
	return NormalizeSorted(sorted)
}

// Merge returns the normalized union of two normalized scope sets,
// computed in one merge walk.
func Merge(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	skip := func(prefix string) {
		for i < len(a) && strings.HasPrefix(a[i], prefix) {
			i++
		}
		for j < len(b) && strings.HasPrefix(b[j], prefix) {
			j++
		}
	}
	for i < len(a) || j < len(b) {
		var s string
		switch {
		case j >= len(b):
			s = a[i]
			i++
		case i >= len(a):
			s = b[j]
			j++
		case a[i] == b[j]:
			s = a[i]
			i++
			j++
		case CompareScopes(a[i], b[j]) < 0:
			s = a[i]
			i++
		default:
			s = b[j]
			j++
		}
		out = append(out, s)
		if prefix, ok := strings.CutSuffix(s, "*"); ok {
			skip(prefix)
		}
		// Exact duplicates left in either input (inputs are normalized,
		// so only the other list can repeat s) are skipped here.
		for i < len(a) && a[i] == s {
			i++
		}
		for j < len(b) && b[j] == s {
			j++
		}
	}
	return out
}
