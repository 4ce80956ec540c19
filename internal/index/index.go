// Package index holds the rules of hopper's Index service (Taskcluster's
// Index API v1): how index paths are spelled and split, which entries a
// completed task's `index.<path>` routes produce (rank, expiry and data from
// the task's `extra.index`), which of two entries at one path wins, and
// which namespaces an entry keeps alive. It is plain Go with no I/O: the
// store applies these rules inside its transactions and the HTTP skin
// (package indexapi) answers with them.
package index

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// RoutePrefix starts the task routes that ask for indexing; the rest of
// the route is the index path.
const RoutePrefix = "index."

// pathPattern is the spelling of an index path or namespace: dot-separated
// non-empty words of URL-safe characters (as Taskcluster's index). The
// empty string, the root namespace, is allowed only where a namespace is
// optional, which callers check themselves.
var pathPattern = regexp.MustCompile(`^([a-zA-Z0-9_!~*'()%-]+\.)*[a-zA-Z0-9_!~*'()%-]+$`)

// MaxPathLength bounds an index path (the reply schemas allow 255
// characters).
const MaxPathLength = 255

// ValidPath reports whether p is a well-formed, non-empty index path.
// PathPattern is the pattern of an index path, without its length limit
// (error messages quote it).
func PathPattern() *regexp.Regexp { return pathPattern }

func ValidPath(p string) bool {
	return len(p) <= MaxPathLength && pathPattern.MatchString(p)
}

// Split cuts an index path into its namespace and the entry's name within
// it: "a.b.c" is ("a.b", "c") and "a" is ("", "a").
func Split(path string) (namespace, name string) {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return "", path
	}
	return path[:i], path[i+1:]
}

// Join is the inverse of Split.
func Join(namespace, name string) string {
	if namespace == "" || name == "" {
		return namespace + name
	}
	return namespace + "." + name
}

// Entry is one indexed task: the task found at Namespace.Name.
type Entry struct {
	Namespace string
	Name      string
	Rank      float64
	TaskID    string
	// Data is the JSON object stored with the entry.
	Data    json.RawMessage
	Expires time.Time
}

// Path is the entry's full index path.
func (e *Entry) Path() string { return Join(e.Namespace, e.Name) }

// Replaces reports whether next takes the place of existing at the same
// path at time now: an entry gives way to one of equal or higher rank, so
// among equals the latest insert wins (Taskcluster's rule). Nothing is
// replaced by a lower rank (such an insert is accepted and ignored) unless
// the entry has expired: it can no longer be found, so keeping it would
// drop every later insert of lower rank until data expiry deletes it, which
// Taskcluster does.
func Replaces(existing *Entry, next *Entry, now time.Time) bool {
	return existing == nil || existing.Rank <= next.Rank || !existing.Expires.After(now)
}

// Ref names one namespace: Name within Parent ("" is the root).
type Ref struct {
	Parent, Name string
}

// Namespace is a namespace with the expiry of the latest entry keeping it.
type Namespace struct {
	Ref
	Expires time.Time
}

// Path is the namespace's full path.
func (n *Namespace) Path() string { return Join(n.Parent, n.Name) }

// Ancestors lists the namespaces an entry in namespace lives under, from
// the top: "a.b.c" gives ("", "a"), ("a", "b"), ("a.b", "c"); the root
// gives none. Taking row locks in this order (after sorting entries by
// path) keeps two transactions from waiting on each other in a cycle.
func Ancestors(namespace string) []Ref {
	if namespace == "" {
		return nil
	}
	parts := strings.Split(namespace, ".")
	out := make([]Ref, len(parts))
	for i, p := range parts {
		out[i] = Ref{Parent: strings.Join(parts[:i], "."), Name: p}
	}
	return out
}

// NamespaceExpiry is how long an entry expiring at entryExpires keeps its
// namespaces listed: until the end of that UTC day, so inserts in one day
// rarely need to touch the namespace rows again.
func NamespaceExpiry(entryExpires time.Time) time.Time {
	y, m, d := entryExpires.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// emptyObject is the data of an entry inserted without any.
var emptyObject = json.RawMessage(`{}`)

// options is the `extra.index` section of a task definition.
type options struct {
	Rank    json.RawMessage `json:"rank"`
	Expires json.RawMessage `json:"expires"`
	Data    json.RawMessage `json:"data"`
}

// ForCompletedTask returns the entries a task that resolved completed is
// indexed with: one per route `index.<path>` with a well-formed path
// (others are ignored, duplicates counted once), sorted by path. Rank comes
// from `extra.index.rank` (a number, default 0), expiry from
// `extra.index.expires` (a date-time, default the task's expires) and data
// from `extra.index.data` (an object, default {}). A task whose
// `extra.index` has a value of the wrong kind is not indexed at all, as
// Taskcluster's index refuses such a task.
func ForCompletedTask(taskID string, t *queue.Task) []Entry {
	var paths []string
	for _, r := range t.Routes {
		p, ok := strings.CutPrefix(r, RoutePrefix)
		if ok && ValidPath(p) && !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return nil
	}
	rank, expires, data, ok := taskOptions(t)
	if !ok {
		return nil
	}
	slices.Sort(paths)
	out := make([]Entry, len(paths))
	for i, p := range paths {
		ns, name := Split(p)
		out[i] = Entry{Namespace: ns, Name: name, Rank: rank, TaskID: taskID, Data: data, Expires: expires}
	}
	return out
}

// taskOptions reads rank, expiry and data from the task's extra.index.
func taskOptions(t *queue.Task) (rank float64, expires time.Time, data json.RawMessage, ok bool) {
	expires, data = t.Expires.Time, emptyObject
	var extra struct {
		Index json.RawMessage `json:"index"`
	}
	if len(t.Extra) == 0 || json.Unmarshal(t.Extra, &extra) != nil || isNull(extra.Index) {
		return 0, expires, data, true
	}
	var o options
	if json.Unmarshal(extra.Index, &o) != nil {
		return 0, time.Time{}, nil, false
	}
	if !isNull(o.Rank) {
		if json.Unmarshal(o.Rank, &rank) != nil {
			return 0, time.Time{}, nil, false
		}
	}
	if !isNull(o.Expires) {
		var when queue.Time
		if json.Unmarshal(o.Expires, &when) != nil || when.IsZero() {
			return 0, time.Time{}, nil, false
		}
		expires = when.Time
	}
	if !isNull(o.Data) {
		if trimmed := bytes.TrimSpace(o.Data); len(trimmed) == 0 || trimmed[0] != '{' {
			return 0, time.Time{}, nil, false
		}
		data = o.Data
	}
	return rank, expires, data, true
}

func isNull(raw json.RawMessage) bool {
	trimmed := bytes.TrimSpace(raw)
	return len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null"))
}
