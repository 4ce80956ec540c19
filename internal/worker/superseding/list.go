package superseding

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hopper-ci/hopper/internal/ident"
)

// List orders a superseder may use (docs/contract/worker.md §5.1).
const (
	// Ascending is seed 001's convention and hopper's default: each task
	// supersedes those earlier in the list; the highest index held wins.
	Ascending = "ascending"
	// Descending is seed 000's (docker-worker's) convention: each task
	// supersedes those later in the list; the lowest index held wins.
	Descending = "descending"
)

// UnusableError says why a superseder answer cannot be used; the worker then
// runs the initial task alone and writes the reason to its log.
type UnusableError struct {
	// Reason is a human-readable explanation.
	Reason string
}

// Error implements error.
func (e *UnusableError) Error() string { return e.Reason }

func unusable(format string, args ...any) error {
	return &UnusableError{Reason: fmt.Sprintf(format, args...)}
}

// ParseList validates the body of a 200 answer (docs/contract/worker.md §5.2 step 4): a
// JSON object whose "supersedes" is an array of distinct taskIds, at most
// maxTasks long, containing initial. Other properties are ignored. An empty
// array is valid (nothing to supersede). Every failure is an
// *UnusableError.
func ParseList(body []byte, initial string, maxTasks int) ([]string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, unusable("the answer is not a JSON object")
	}
	raw, ok := obj["supersedes"]
	if !ok {
		return nil, unusable(`the answer has no "supersedes" property`)
	}
	var items []any
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, unusable(`"supersedes" is not an array`)
	}
	list := make([]string, 0, len(items))
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		id, ok := it.(string)
		if !ok {
			return nil, unusable(`"supersedes"[%d] is not a string`, i)
		}
		if !ident.ValidSlugID(id) {
			return nil, unusable(`"supersedes"[%d] = %q is not a taskId`, i, truncate(id, 64))
		}
		if seen[id] {
			return nil, unusable(`"supersedes" lists %s more than once`, id)
		}
		seen[id] = true
		list = append(list, id)
	}
	if len(list) == 0 {
		return list, nil
	}
	if !seen[initial] {
		return nil, unusable(`"supersedes" does not contain the initial task %s`, initial)
	}
	if len(list) > maxTasks {
		return nil, unusable(`"supersedes" lists %d tasks, more than the worker's limit of %d`, len(list), maxTasks)
	}
	return list, nil
}

// Normalize returns list in ascending order: a copy, reversed when order is
// Descending (docs/contract/worker.md §5.1: everything after receipt works on ascending
// lists).
func Normalize(list []string, order string) []string {
	out := slices.Clone(list)
	if order == Descending {
		slices.Reverse(out)
	}
	return out
}

// ChoosePrimary applies docs/contract/worker.md §5.4 to an ascending list: among the
// entries held says the worker holds a claim on, the highest-indexed is the
// primary and the others, in list order, are its secondaries. Entries above
// the primary that are not held are left alone. It returns -1 and nil when
// nothing is held.
func ChoosePrimary(list []string, held func(taskID string) bool) (primary int, secondaries []int) {
	primary = -1
	for i := len(list) - 1; i >= 0; i-- {
		if !held(list[i]) {
			continue
		}
		if primary < 0 {
			primary = i
			continue
		}
		secondaries = append(secondaries, i)
	}
	slices.Reverse(secondaries)
	return primary, secondaries
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
