package cli

import "strconv"

// count says "1 task", "2 tasks", "0 tasks": n with its noun, in the
// plural (the noun and "s", or plural[0] when given) unless n is one.
func count(n int, noun string, plural ...string) string {
	if n != 1 {
		noun += "s"
		if len(plural) > 0 {
			noun = plural[0]
		}
	}
	return strconv.Itoa(n) + " " + noun
}
