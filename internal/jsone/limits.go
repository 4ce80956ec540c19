package jsone

import (
	"fmt"
	"strconv"
)

// Limits bound the work of one render. JSON-e has no limits of its own: a
// 1 KB template of nested $map over range() asked for 42 MB of output,
// 1.56 s and 190 MiB from one anonymous renderTaskclusterYml call, and
// the same renderer runs untrusted pull requests' .taskcluster.yml, hook
// templates and notification templates. Every value the renderer returns
// (each rendered part of the template and each evaluated expression) is
// counted, with the elements of the arrays and objects it returns and the
// bytes of the strings: intermediate results too, so the time a render
// takes is bounded with what it builds, without reading a clock.
type Limits struct {
	// Values is how many values (and array elements and object members)
	// a render may produce.
	Values int64
	// Bytes is how many bytes of strings a render may produce.
	Bytes int64
}

// DefaultLimits are the limits of every render (RenderAt). A decision
// task's .taskcluster.yml takes a few thousand values; these allow some
// hundred times more, and keep a render to about a second of CPU and tens
// of MiB at worst.
var DefaultLimits = Limits{Values: 500_000, Bytes: 16 << 20}

// charge counts a value a render produced; beyond the limits it is an
// error the template cannot get past.
func (r *renderer) charge(v any) error {
	r.spent.Values++
	switch x := v.(type) {
	case string:
		r.spent.Bytes += int64(len(x))
	case []any:
		r.spent.Values += int64(len(x))
	case map[string]any:
		r.spent.Values += int64(len(x))
	}
	switch {
	case r.spent.Values > r.limits.Values:
		return templateError("rendering needs more than " + strconv.FormatInt(r.limits.Values, 10) +
			" values, hopper's limit for one render (a loop over a range too large?)")
	case r.spent.Bytes > r.limits.Bytes:
		return templateError(fmt.Sprintf("rendering needs more than %d MiB of strings, hopper's limit for one render", r.limits.Bytes>>20))
	}
	return nil
}
