package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hopper-ci/hopper/internal/jsone"
	"github.com/hopper-ci/hopper/internal/schema"
)

// Defaults of Taskcluster's github service.
const (
	SchedulerID = "taskcluster-github"
	RouteStatus = "statuses"
	RouteChecks = "checks"
	// ReportingChecks is the one reporting value besides statuses.
	ReportingChecks = "checks-v1"
)

// Limits on what one event may create: a template that renders a huge
// list is refused whole rather than flooding the queue.
const (
	MaxTasks      = 1000
	MaxConfigSize = 1 << 20
)

// ConfigError is a `.taskcluster.yml` that cannot be used: it does not
// parse, does not match its version's schema, or does not render. Its
// message is what the repository's users are shown.
type ConfigError struct {
	// Stage is "yaml", "schema" or "render".
	Stage   string
	Message string
}

func (e *ConfigError) Error() string { return e.Message }

func configErrorf(stage, format string, args ...any) *ConfigError {
	return &ConfigError{Stage: stage, Message: fmt.Sprintf(format, args...)}
}

// Config is a parsed, validated `.taskcluster.yml`.
type Config struct {
	Version int
	// body is the file as JSON values, schema defaults filled, without
	// `version` and `hooks`.
	body  map[string]any
	Hooks []HookCall
}

// HookCall is a hook `.taskcluster.yml` asks to trigger.
type HookCall struct {
	Name    string         `json:"name"`
	Context map[string]any `json:"context"`
}

// ParseConfig parses a `.taskcluster.yml` and checks it against the
// schema of its version (1, or the deprecated 0).
func ParseConfig(schemas *schema.Registry, text []byte) (*Config, error) {
	if len(text) > MaxConfigSize {
		return nil, configErrorf("yaml", ".taskcluster.yml is larger than %d bytes", MaxConfigSize)
	}
	var doc any
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, configErrorf("yaml", "YAMLException: %v", yamlProblemLine(text, err))
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, configErrorf("yaml", ".taskcluster.yml holds values JSON cannot: %v", err)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, configErrorf("schema", ".taskcluster.yml must hold an object")
	}
	name := "taskcluster-github-config-v1"
	version := 1
	if v, ok := top["version"].(int); ok && v == 0 {
		name, version = "taskcluster-github-config-v0", 0
	}
	filled, err := schemas.Validate(name, raw)
	if err != nil {
		return nil, configErrorf("schema", "%v", err)
	}
	var body map[string]any
	if err := decodeJSON(filled, &body); err != nil {
		return nil, configErrorf("schema", "%v", err)
	}
	c := &Config{Version: version, body: body}
	if hooks, ok := body["hooks"]; ok {
		b, _ := json.Marshal(hooks)
		if err := json.Unmarshal(b, &c.Hooks); err != nil {
			return nil, configErrorf("schema", "hooks: %v", err)
		}
	}
	delete(body, "version")
	delete(body, "hooks")
	return c, nil
}

// PullRequestPolicy is the config's `policy.pullRequests` (v0:
// `allowPullRequests`), with Taskcluster's defaults.
func (c *Config) PullRequestPolicy() string {
	if c.Version == 0 {
		if p, _ := c.body["allowPullRequests"].(string); p != "" {
			return p
		}
		return PolicyCollaborators
	}
	if p := str(c.body, "policy", "pullRequests"); p != "" {
		return p
	}
	return PolicyCollaborators
}

// AllowComments is the config's `policy.allowComments` ("" when comments
// may not start tasks).
func (c *Config) AllowComments() string { return str(c.body, "policy", "allowComments") }

// RenderParams are what a render needs besides the config.
type RenderParams struct {
	Event *Event
	// TasksFor overrides the event's own (an untrusted pull request).
	TasksFor string
	RootURL  string
	Now      time.Time
	// ID returns the slugid of a label; the same label gives the same id
	// within one event, and a replay of the event gives the same ids.
	ID func(label string) string
}

// Task is a task to create.
type Task struct {
	TaskID string
	// Definition is the createTask body (no taskId).
	Definition map[string]any
}

// Rendered is what an event's `.taskcluster.yml` asks for.
type Rendered struct {
	Tasks []Task
	// Scopes are the scopes the tasks are created with (the role of the
	// event and the reporting route and scheduler id).
	Scopes []string
	Hooks  []HookCall
	// Reporting is "" (statuses) or ReportingChecks.
	Reporting string
	// AutoCancel says whether pending builds of the same pull request are
	// cancelled once these tasks exist.
	AutoCancel bool
	// Route is the reporting route the tasks carry.
	Route string
}

// Render renders the config for an event, applies Taskcluster's task
// defaults and returns the tasks with the scopes they are created with.
func (c *Config) Render(p RenderParams) (*Rendered, error) {
	if p.TasksFor == "" {
		p.TasksFor = p.Event.TasksFor
	}
	body := cloneJSON(c.body).(map[string]any)
	var out *Rendered
	var err error
	if c.Version == 0 {
		out, err = renderV0(body, p)
	} else {
		out, err = renderV1(body, p)
	}
	if err != nil {
		return nil, err
	}
	out.Hooks = c.Hooks
	if len(out.Tasks) > MaxTasks {
		return nil, configErrorf("render", ".taskcluster.yml rendered %d tasks; at most %d may be created for one event", len(out.Tasks), MaxTasks)
	}
	return out, nil
}

func renderV1(body map[string]any, p RenderParams) (*Rendered, error) {
	slugids := map[string]string{}
	asSlugid := jsone.Func(func(args []any) (any, error) {
		label := ""
		if len(args) > 0 {
			label = fmt.Sprint(args[0])
		}
		if id, ok := slugids[label]; ok {
			return id, nil
		}
		id := p.ID("as_slugid:" + label)
		slugids[label] = id
		return id, nil
	})
	ctx := map[string]any{
		"taskcluster_root_url": p.RootURL,
		"tasks_for":            p.TasksFor,
		"event":                p.Event.Body,
		"as_slugid":            asSlugid,
	}
	rendered, err := jsone.RenderAt(body, ctx, p.Now)
	if err != nil {
		return nil, configErrorf("render", "%v", err)
	}
	cfg, _ := rendered.(map[string]any)
	if cfg == nil {
		cfg = map[string]any{}
	}
	out := &Rendered{AutoCancel: true, Route: RouteStatus}
	if r, _ := cfg["reporting"].(string); r != "" {
		out.Reporting, out.Route = r, RouteChecks
	}
	if a, ok := cfg["autoCancelPreviousChecks"].(bool); ok {
		out.AutoCancel = a
	}
	var tasks []any
	switch t := cfg["tasks"].(type) {
	case nil:
	case []any:
		tasks = t
	default:
		return nil, configErrorf("render", "tasks field  of .taskcluster.yml must be array of tasks or empty array")
	}
	defs := make([]map[string]any, 0, len(tasks))
	for i, t := range tasks {
		def, ok := t.(map[string]any)
		if !ok {
			return nil, configErrorf("render", "tasks[%d] of .taskcluster.yml must render to an object", i)
		}
		defs = append(defs, def)
	}
	out.Tasks, err = compileV1(defs, out.Route, p)
	if err != nil {
		return nil, err
	}
	out.Scopes = v1Scopes(p, out.Route)
	return out, nil
}

// compileV1 applies Taskcluster's defaults: a sole task is its own group
// (the decision-task convention), several tasks share a fresh group id
// none of them has; created, schedulerId and the reporting route are
// added; tasks come ordered so that dependencies are created first.
func compileV1(defs []map[string]any, route string, p RenderParams) ([]Task, error) {
	if len(defs) == 0 {
		return nil, nil
	}
	var defaultTaskID, defaultGroupID string
	if len(defs) == 1 {
		sole := defs[0]
		tid, gid := stringOf(sole["taskId"]), stringOf(sole["taskGroupId"])
		switch {
		case tid != "" && gid != "":
		case tid != "":
			defaultGroupID = tid
		case gid != "":
			defaultTaskID = gid
		default:
			defaultTaskID = p.ID("task:0")
			defaultGroupID = defaultTaskID
		}
	} else {
		defaultTaskID = p.ID("task:0")
		defaultGroupID = p.ID("group")
	}
	now := jsone.DateJSON(p.Now)
	byID := map[string]map[string]any{}
	var order []string
	deps := map[string][]string{}
	for i, def := range defs {
		routes := []any{}
		if r, ok := def["routes"].([]any); ok {
			routes = append(routes, r...)
		}
		if !slices.Contains(routes, any(route)) {
			routes = append(routes, route)
		}
		task := map[string]any{"schedulerId": SchedulerID, "taskGroupId": defaultGroupID, "created": now}
		taskID := defaultTaskID
		for k, v := range def {
			task[k] = v
		}
		task["routes"] = dedupe(routes)
		if id := stringOf(task["taskId"]); id != "" {
			taskID = id
		}
		delete(task, "taskId")
		if task["taskGroupId"] == "" || task["taskGroupId"] == nil {
			delete(task, "taskGroupId")
		}
		defaultTaskID = p.ID(fmt.Sprintf("task:%d", i+1))
		if taskID == "" {
			return nil, configErrorf("render", "tasks[%d] has no taskId", i)
		}
		if _, dup := byID[taskID]; !dup {
			order = append(order, taskID)
		}
		byID[taskID] = task
		if d, ok := task["dependencies"].([]any); ok {
			for _, x := range d {
				deps[taskID] = append(deps[taskID], stringOf(x))
			}
		}
	}
	sorted, err := dependenciesFirst(order, deps, byID)
	if err != nil {
		return nil, err
	}
	out := make([]Task, 0, len(sorted))
	for _, id := range sorted {
		out = append(out, Task{TaskID: id, Definition: byID[id]})
	}
	return out, nil
}

// dependenciesFirst orders task ids so that each comes after the tasks of
// this set it depends on. It sorts as Taskcluster's service does (Kahn's
// algorithm with a stack, over every id named, then reversed) so the
// preview lists tasks in Taskcluster's order, and it refuses a cycle in
// Taskcluster's words, naming every task that waits on it.
func dependenciesFirst(order []string, deps map[string][]string, known map[string]map[string]any) ([]string, error) {
	var nodes []string
	ins := map[string]int{}
	touch := func(id string) {
		if _, ok := ins[id]; !ok {
			nodes = append(nodes, id)
			ins[id] = 0
		}
	}
	edges := map[string][]string{}
	for _, id := range order {
		touch(id)
		for _, d := range deps[id] {
			touch(d)
			ins[d]++
		}
		edges[id] = append(edges[id], deps[id]...)
	}
	nodes = jsKeyOrder(nodes)
	var stack, sorted []string
	for _, id := range nodes {
		if ins[id] == 0 {
			stack = append(stack, id)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		sorted = append(sorted, n)
		for _, m := range edges[n] {
			if ins[m]--; ins[m] == 0 {
				stack = append(stack, m)
			}
		}
	}
	if len(sorted) != len(nodes) {
		var circular []string
		for _, id := range nodes {
			if ins[id] != 0 {
				circular = append(circular, id)
			}
		}
		return nil, configErrorf("render", "At least 1 circular dependency in nodes: \n\n%s\n\nGraph cannot be sorted!", strings.Join(circular, "\n"))
	}
	out := make([]string, 0, len(order))
	for i := len(sorted) - 1; i >= 0; i-- {
		if _, ok := known[sorted[i]]; ok {
			out = append(out, sorted[i])
		}
	}
	return out, nil
}

// jsKeyOrder orders ids as a JavaScript object's keys are: array indexes
// (canonical integers below 2^32-1) first, ascending, then the rest in
// insertion order.
func jsKeyOrder(ids []string) []string {
	var idx []uint64
	var rest []string
	for _, id := range ids {
		n, err := strconv.ParseUint(id, 10, 32)
		if err == nil && n < 1<<32-1 && strconv.FormatUint(n, 10) == id {
			idx = append(idx, n)
			continue
		}
		rest = append(rest, id)
	}
	if len(idx) == 0 {
		return ids
	}
	slices.Sort(idx)
	out := make([]string, 0, len(ids))
	for _, n := range idx {
		out = append(out, strconv.FormatUint(n, 10))
	}
	return append(out, rest...)
}

// v1Scopes are the scopes a v1 render's tasks are created with.
func v1Scopes(p RenderParams, route string) []string {
	e, role := p.Event, "assume:"+p.Event.Role()
	var scopes []string
	switch p.TasksFor {
	case TasksForPullRequest, TasksForIssueComment:
		scopes = append(scopes, role+":pull-request")
	case TasksForPullRequestUntrusted:
		scopes = append(scopes, role+":pull-request-untrusted")
	case TasksForPush:
		if e.Type == "tag" {
			scopes = append(scopes, role+":tag:"+e.Tag)
		} else {
			scopes = append(scopes, role+":branch:"+e.Branch)
		}
	case TasksForMergeGroup:
		scopes = append(scopes, role+":merge-group:"+e.Branch)
	case TasksForRelease:
		action := e.Action
		if action == "" {
			action = "published"
		}
		scopes = append(scopes, role+":release:"+action)
	}
	return append(scopes, "queue:route:"+route, "queue:scheduler-id:"+SchedulerID)
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

func dedupe(xs []any) []any {
	out := make([]any, 0, len(xs))
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// decodeJSON decodes keeping numbers' spelling.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

func cloneJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = cloneJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneJSON(e)
		}
		return out
	}
	return v
}

// IsConfigError reports whether err is a `.taskcluster.yml` problem the
// repository's users must be told about.
func IsConfigError(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}

var yamlLineError = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlProblemLine makes a YAML syntax error name the line where the
// problem is: the parser names the line where the collection around it
// starts, often a line or two earlier. The problem's line is the first
// line whose prefix of the file fails to parse the same way (found by
// bisection); the start of the collection is said after it.
func yamlProblemLine(text []byte, err error) error {
	m := yamlLineError.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	lines := bytes.SplitAfter(text, []byte("\n"))
	fails := func(k int) bool {
		var doc any
		err := yaml.Unmarshal(bytes.Join(lines[:k], nil), &doc)
		if err == nil {
			return false
		}
		pm := yamlLineError.FindStringSubmatch(err.Error())
		return pm != nil && pm[2] == m[2]
	}
	lo, hi := reported, len(lines) // fails(hi) holds: the whole file
	if lo < 1 || lo > hi {
		return err
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo == reported {
		return err
	}
	return fmt.Errorf("yaml: line %d: %s (in the block that starts on line %d)", lo, m[2], reported)
}
