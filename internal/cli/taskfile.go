package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// Identifier patterns of docs/contract/queue.md §1.2 and §2, checked locally so that a
// typo is a clear usage error instead of a round trip and a 400.
var (
	slugIDPattern    = ident.SlugID()
	taskQueuePattern = ident.TaskQueueID()
)

// checkTaskID returns a usage error unless id is a slugid; what names the
// argument ("taskId", "taskGroupId") in the message.
func checkTaskID(what, id string) error {
	if !slugIDPattern.MatchString(id) {
		return usagef("%q is not a valid %s (expected a 22-character slugid such as %s)", id, what, "fN1SbArXTPSVFNUvaOlinQ")
	}
	return nil
}

// checkTaskQueueID returns a usage error unless q is provisionerId/workerType.
func checkTaskQueueID(q string) error {
	if !taskQueuePattern.MatchString(q) {
		return usagef("%q is not a valid task queue id (expected <provisionerId>/<workerType>, e.g. %s)", q, DefaultTaskQueue)
	}
	return nil
}

// ParseTaskDocument decodes a task definition written in JSON or YAML into
// a JSON-shaped tree (maps, slices, strings, json.Number, bools, nil).
// JSON is recognised by a leading '{'; anything else is read as YAML (of
// which JSON is nearly a subset, but the JSON decoder keeps big numbers and
// gives better messages). name labels errors.
func ParseTaskDocument(name string, data []byte) (map[string]any, error) {
	trimmed := bytes.TrimSpace(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")))
	if len(trimmed) == 0 {
		return nil, usagef("%s is empty: expected a task definition in YAML or JSON", name)
	}
	var (
		doc any
		err error
	)
	if trimmed[0] == '{' {
		doc, err = parseJSON(trimmed)
		if err != nil {
			return nil, usagef("%s: invalid JSON: %v", name, err)
		}
	} else {
		doc, err = parseYAML(trimmed)
		if err != nil {
			return nil, usagef("%s: invalid YAML: %v", name, err)
		}
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, usagef("%s: a task definition must be a mapping (object), not %s", name, kindOf(doc))
	}
	return m, nil
}

func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the top-level value")
	}
	return doc, nil
}

func parseYAML(data []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, errors.New("more than one YAML document; a task file holds exactly one")
	}
	return yamlToJSON(&root, 0)
}

// yamlToJSON converts a YAML node into the value JSON would give. It walks
// nodes rather than decoding into `any` because yaml.v3 turns timestamps
// into time.Time (losing the author's text) and allows non-string keys.
func yamlToJSON(n *yaml.Node, depth int) (any, error) {
	if depth > 100 {
		return nil, errors.New("nesting too deep (alias loop?)")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return yamlToJSON(n.Content[0], depth+1)
	case yaml.AliasNode:
		return yamlToJSON(n.Alias, depth+1)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := yamlToJSON(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := map[string]any{}
		var merges []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
				merges = append(merges, v)
				continue
			}
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: mapping keys must be plain strings", k.Line)
			}
			val, err := yamlToJSON(v, depth+1)
			if err != nil {
				return nil, err
			}
			out[k.Value] = val
		}
		// Merge keys ("<<: *base") fill only keys the mapping does not set
		// itself, earlier merges winning, as YAML 1.1 specifies.
		for _, m := range merges {
			sources := []*yaml.Node{m}
			if m.Kind == yaml.SequenceNode {
				sources = m.Content
			}
			for _, src := range sources {
				v, err := yamlToJSON(src, depth+1)
				if err != nil {
					return nil, err
				}
				mm, ok := v.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("line %d: << must merge a mapping", m.Line)
				}
				for k, val := range mm {
					if _, set := out[k]; !set {
						out[k] = val
					}
				}
			}
		}
		return out, nil
	case yaml.ScalarNode:
		return yamlScalar(n)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

func yamlScalar(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return b, nil
	case "!!int":
		var i big.Int
		var v int64
		if err := n.Decode(&v); err == nil {
			return json.Number(strconv.FormatInt(v, 10)), nil
		}
		var u uint64
		if err := n.Decode(&u); err == nil {
			return json.Number(strconv.FormatUint(u, 10)), nil
		}
		if _, ok := i.SetString(strings.ReplaceAll(n.Value, "_", ""), 0); ok {
			return json.Number(i.String()), nil
		}
		return nil, fmt.Errorf("line %d: cannot read integer %q", n.Line, n.Value)
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("line %d: %s has no JSON representation", n.Line, n.Value)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	default:
		// Strings, timestamps (kept as written: the queue parses them),
		// binary and custom tags all travel as their text.
		return n.Value, nil
	}
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// Defaults are the inputs of FillDefaults besides the document.
type Defaults struct {
	// TaskID overrides the document's taskId key; empty means use the
	// document's or generate one.
	TaskID string
	// TaskQueueID overrides the document's queue; empty means use the
	// document's (taskQueueId or provisionerId/workerType) or
	// DefaultTaskQueue.
	TaskQueueID string
	// Now is the creation time.
	Now time.Time
	// RootURL names the deployment (for the default metadata.source).
	RootURL string
	// Name, Description and Owner are metadata defaults.
	Name, Description, Owner string
}

// DefaultDeadline is how long after creation a task's deadline is when the
// definition sets none.
const DefaultDeadline = 24 * time.Hour

// FillDefaults completes a task document the way the Taskcluster CLI
// does before createTask, and returns the taskId to create it under:
//   - taskId: d.TaskID, else a top-level "taskId" key (removed, since the
//     queue's schema has no such field), else a fresh slugid;
//   - the queue: d.TaskQueueID (replacing any provisionerId/workerType),
//     else what the document says, else DefaultTaskQueue;
//   - created: now; deadline: now + 24 h; expires is left to the queue.
//     Each of the three may also be written relative to now, e.g.
//     "2 hours", "+1d", "-5 minutes" or a Go duration "90m";
//   - metadata: name, description, owner and source when missing;
//   - payload must be present (it is the worker's business, so it is not
//     otherwise checked here).
func FillDefaults(doc map[string]any, d Defaults) (string, error) {
	taskID := d.TaskID
	if raw, ok := doc["taskId"]; ok {
		s, isString := raw.(string)
		if !isString {
			return "", usagef("taskId must be a string")
		}
		if taskID == "" {
			taskID = s
		}
		delete(doc, "taskId")
	}
	if taskID == "" {
		taskID = tcclient.NewTaskID()
	}
	if err := checkTaskID("taskId", taskID); err != nil {
		return "", err
	}

	switch {
	case d.TaskQueueID != "":
		if err := checkTaskQueueID(d.TaskQueueID); err != nil {
			return "", err
		}
		doc["taskQueueId"] = d.TaskQueueID
		delete(doc, "provisionerId")
		delete(doc, "workerType")
	case doc["taskQueueId"] == nil && doc["provisionerId"] == nil && doc["workerType"] == nil:
		doc["taskQueueId"] = DefaultTaskQueue
	}

	now := d.Now.UTC()
	created := now
	for _, field := range []string{"created", "deadline", "expires"} {
		raw, ok := doc[field]
		if !ok || raw == nil {
			continue
		}
		s, isString := raw.(string)
		if !isString {
			return "", usagef("%s must be a date-time string or a time relative to now, got %s", field, kindOf(raw))
		}
		t, err := resolveTime(s, now)
		if err != nil {
			return "", usagef("%s: %v", field, err)
		}
		doc[field] = tcclient.NewTime(t).String()
		if field == "created" {
			created = t
		}
	}
	if doc["created"] == nil {
		doc["created"] = tcclient.NewTime(created).String()
	}
	if doc["deadline"] == nil {
		doc["deadline"] = tcclient.NewTime(now.Add(DefaultDeadline)).String()
	}
	if doc["expires"] == nil {
		delete(doc, "expires")
	}

	if _, ok := doc["payload"]; !ok {
		return "", usagef("the task definition has no payload: the worker needs one (for hopper's worker: {command: [[...]], maxRunTime: N})")
	}

	meta, ok := doc["metadata"].(map[string]any)
	switch {
	case doc["metadata"] == nil:
		meta = map[string]any{}
		doc["metadata"] = meta
	case !ok:
		return "", usagef("metadata must be a mapping with name, description, owner and source, got %s", kindOf(doc["metadata"]))
	}
	defaults := map[string]string{
		"name":        d.Name,
		"description": d.Description,
		"owner":       d.Owner,
		"source":      strings.TrimRight(d.RootURL, "/") + "/api/queue/v1/task/" + taskID,
	}
	for _, k := range []string{"name", "description", "owner", "source"} {
		if meta[k] == nil {
			meta[k] = defaults[k]
		}
	}
	return taskID, nil
}

// resolveTime parses an absolute RFC 3339 date-time or a time relative to
// now.
func resolveTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s)); err == nil {
		return t, nil
	}
	off, err := ParseRelative(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 date-time nor a time relative to now (e.g. \"2 hours\", \"-5m\"): %w", s, err)
	}
	return now.Add(off), nil
}

// relativeUnits maps the unit words of Taskcluster's fromNow notation (and
// their abbreviations) to durations. Months and years are approximations
// (30 and 365 days), which is what fromNow-style offsets mean for
// deadlines and expiry.
var relativeUnits = map[string]time.Duration{
	"y": 365 * 24 * time.Hour, "yr": 365 * 24 * time.Hour, "yrs": 365 * 24 * time.Hour, "year": 365 * 24 * time.Hour, "years": 365 * 24 * time.Hour,
	"mo": 30 * 24 * time.Hour, "month": 30 * 24 * time.Hour, "months": 30 * 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "wk": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
}

var relativeTerm = regexp.MustCompile(`^\s*(\d+)\s*([a-z]+)\s*`)

// ParseRelative parses an offset such as "1 day", "2 hours 30 minutes",
// "+1d", "-5 min" or a Go duration ("1h30m").
func ParseRelative(s string) (time.Duration, error) {
	rest := strings.ToLower(strings.TrimSpace(s))
	sign := time.Duration(1)
	switch {
	case strings.HasPrefix(rest, "-"):
		sign, rest = -1, strings.TrimSpace(rest[1:])
	case strings.HasPrefix(rest, "+"):
		rest = strings.TrimSpace(rest[1:])
	}
	if rest == "" {
		return 0, errors.New("empty offset")
	}
	if d, err := time.ParseDuration(rest); err == nil {
		return sign * d, nil
	}
	var total time.Duration
	for rest != "" {
		m := relativeTerm.FindStringSubmatch(rest)
		if m == nil {
			return 0, fmt.Errorf("cannot read %q", rest)
		}
		n, err := strconv.ParseInt(m[1], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("number %s too large", m[1])
		}
		unit, ok := relativeUnits[m[2]]
		if !ok {
			return 0, fmt.Errorf("unknown unit %q", m[2])
		}
		total += time.Duration(n) * unit
		rest = rest[len(m[0]):]
	}
	return sign * total, nil
}

// displayName is the label of a file in messages and default metadata.
func displayName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return filepath.Base(path)
}
