package queue

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// Flow control (README "Flow control"): a task declares it in its
// definition's extra, which Taskcluster's task schema leaves free-form, so
// the official client and any Taskcluster tooling accept it unchanged:
//
//	"extra": {"flow": {"key": "deploy-prod", "limit": 1,
//	                   "supersede": true, "cancelInProgress": true,
//	                   "failFast": true}}
//
// The key may be left out when the task has exactly one route
// "coalesce.v1.<key>" (the built-in superseder's convention). Keys are
// scoped by task queue: tasks of one key in two task queues are unrelated.

// FlowRoutePrefix is the route prefix that names a flow key when the flow
// block has none.
const FlowRoutePrefix = "coalesce.v1."

// Flow limits.
const (
	MaxFlowKeyLength = 200
	MaxFlowLimit     = 10000
)

// FlowPolicy is what a task declares in extra.flow.
type FlowPolicy struct {
	// Key groups tasks of one task queue under the policies below ("" when
	// the task only opts its group into FailFast).
	Key string
	// Limit is the most runs of the key running at once (0: no limit).
	Limit int
	// Supersede makes a claim hand out the key's newest pending task and
	// resolve the older pending ones exception/superseded.
	Supersede bool
	// CancelInProgress makes a new task of the key cancel its running
	// tasks.
	CancelInProgress bool
	// FailFast opts the task's group in: the first task of the group that
	// fails cancels the group's unresolved tasks.
	FailFast bool
}

// Keyed reports whether the policy applies to a key.
func (p *FlowPolicy) Keyed() bool { return p != nil && p.Key != "" }

// flowBlock is extra.flow as sent; pointers tell absent from zero.
type flowBlock struct {
	Key              *string `json:"key"`
	Limit            *int    `json:"limit"`
	Supersede        *bool   `json:"supersede"`
	CancelInProgress *bool   `json:"cancelInProgress"`
	FailFast         *bool   `json:"failFast"`
}

// ParseFlow reads a definition's flow policy: nil when extra has no "flow"
// member, an InputValidationError (KindInput) saying what is wrong when the
// block is malformed.
func ParseFlow(t *Task) (*FlowPolicy, error) {
	// Most tasks have no flow block: skip decoding their extra.
	if len(t.Extra) == 0 || !bytes.Contains(t.Extra, []byte(`"flow"`)) {
		return nil, nil
	}
	var extra map[string]json.RawMessage
	if err := json.Unmarshal(t.Extra, &extra); err != nil {
		return nil, nil // extra is not an object: no flow block to read
	}
	raw, ok := extra["flow"]
	if !ok {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var b flowBlock
	if err := dec.Decode(&b); err != nil {
		return nil, InputErrorf("task.extra.flow must be an object with only key (string), limit (integer), supersede, cancelInProgress and failFast (booleans): %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	p := &FlowPolicy{}
	if b.Limit != nil {
		if *b.Limit < 1 || *b.Limit > MaxFlowLimit {
			return nil, InputErrorf("task.extra.flow.limit must be between 1 and %d, got %d", MaxFlowLimit, *b.Limit)
		}
		p.Limit = *b.Limit
	}
	p.Supersede = b.Supersede != nil && *b.Supersede
	p.CancelInProgress = b.CancelInProgress != nil && *b.CancelInProgress
	p.FailFast = b.FailFast != nil && *b.FailFast
	keyed := p.Limit > 0 || p.Supersede || p.CancelInProgress
	switch {
	case b.Key != nil:
		p.Key = *b.Key
		if err := checkFlowKey(p.Key); err != nil {
			return nil, err
		}
	case keyed:
		key, err := flowKeyFromRoutes(t.Routes)
		if err != nil {
			return nil, err
		}
		p.Key = key
	}
	if p.Key != "" && !keyed {
		return nil, InputErrorf("task.extra.flow.key %q is given without a policy: set limit, supersede or cancelInProgress", p.Key)
	}
	if !keyed && !p.FailFast {
		return nil, InputErrorf("task.extra.flow declares nothing: set limit, supersede, cancelInProgress or failFast")
	}
	return p, nil
}

func checkFlowKey(key string) error {
	switch {
	case key == "":
		return InputErrorf("task.extra.flow.key must not be empty")
	case len(key) > MaxFlowKeyLength:
		return InputErrorf("task.extra.flow.key is %d bytes long; at most %d are allowed", len(key), MaxFlowKeyLength)
	case !utf8.ValidString(key):
		return InputErrorf("task.extra.flow.key must be valid UTF-8")
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return InputErrorf("task.extra.flow.key must not contain control characters")
		}
	}
	return nil
}

// flowKeyFromRoutes finds the key a task names by a coalesce.v1.<key>
// route, for a flow block without a key.
func flowKeyFromRoutes(routes []string) (string, error) {
	var keys []string
	for _, r := range routes {
		if k, ok := strings.CutPrefix(r, FlowRoutePrefix); ok {
			keys = append(keys, k)
		}
	}
	switch len(keys) {
	case 0:
		return "", InputErrorf("task.extra.flow has a policy but no key: set task.extra.flow.key or add a route %s<key>", FlowRoutePrefix)
	case 1:
		if err := checkFlowKey(keys[0]); err != nil {
			return "", InputErrorf("route %s%s names the flow key: %s", FlowRoutePrefix, keys[0], err.Error())
		}
		return keys[0], nil
	}
	return "", InputErrorf("task.extra.flow has no key and the task has %d %s routes (%s): set task.extra.flow.key", len(keys), FlowRoutePrefix, strings.Join(keys, ", "))
}

// Supersede resolves a pending task exception/superseded: a claim of its
// flow key handed out a newer task in its place. It reports whether it
// changed anything (only a pending task is superseded).
func (t *TaskState) Supersede(now time.Time, tr *Transition) bool {
	if t.State() != StatePending {
		return false
	}
	return t.resolveAsException(ReasonSuperseded, now, tr)
}
