// Package hooks holds the rules of hopper's Hooks service (Taskcluster's
// Hooks API v1): what a hook definition may be, when a schedule is due,
// how a fire turns a hook's JSON-e template into a task definition, and
// what a trigger payload must be. It is pure Go with an injected clock and
// no I/O: storage (package store), HTTP (package hooksapi) and the
// background scheduler call into it.
package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"time"

	"github.com/hopper-ci/hopper/internal/schema"
)

// Error codes, as Taskcluster's hooks service answers them.
const (
	CodeInputError         = "InputError"
	CodeNotFound           = "ResourceNotFound"
	CodeConflict           = "RequestConflict"
	CodeInsufficientScopes = "InsufficientScopes"
	CodeAuthFailed         = "AuthenticationFailed"
)

// Error is a refusal the API answers with Taskcluster's error body.
type Error struct {
	Code    string
	Message string
	Details map[string]any
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func inputError(format string, args ...any) *Error {
	return &Error{Code: CodeInputError, Message: fmt.Sprintf(format, args...)}
}

// Identifier patterns of the API's URL parameters.
var (
	GroupIDPattern = regexp.MustCompile(`^[a-zA-Z0-9-_]{1,1000}$`)
	HookIDPattern  = regexp.MustCompile(`^[a-zA-Z0-9-_/]{1,1000}$`)
)

// Binding is one Pulse binding of a hook.
type Binding struct {
	Exchange          string `json:"exchange"`
	RoutingKeyPattern string `json:"routingKeyPattern"`
}

// Definition is a hook as createHook receives it (with schema defaults
// filled in) and as the hook method returns it.
type Definition struct {
	HookGroupID   string          `json:"hookGroupId"`
	HookID        string          `json:"hookId"`
	Metadata      json.RawMessage `json:"metadata"`
	Bindings      []Binding       `json:"bindings"`
	Schedule      []string        `json:"schedule"`
	Task          json.RawMessage `json:"task"`
	TriggerSchema json.RawMessage `json:"triggerSchema"`
}

// Metadata is the part of a hook's metadata the service reads.
type Metadata struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	Owner        string `json:"owner"`
	EmailOnError bool   `json:"emailOnError"`
}

// DefinitionInput is the validated body of createHook or updateHook.
type DefinitionInput struct {
	HookGroupID   string          `json:"hookGroupId"`
	HookID        string          `json:"hookId"`
	Metadata      json.RawMessage `json:"metadata"`
	Bindings      *[]Binding      `json:"bindings"`
	Schedule      []string        `json:"schedule"`
	Task          json.RawMessage `json:"task"`
	TriggerSchema json.RawMessage `json:"triggerSchema"`
}

// DefineOptions are what Define needs besides the input.
type DefineOptions struct {
	// HookGroupID and HookID come from the URL.
	HookGroupID, HookID string
	// Existing is the hook being updated (nil for createHook): updateHook
	// keeps its bindings when the input has none.
	Existing *Definition
	// PulseAvailable says whether bindings can be honoured (an AMQP
	// broker is configured).
	PulseAvailable bool
}

// Define checks a createHook or updateHook body and returns the hook it
// defines, with its parsed schedule. Refusals are *Error values carrying
// Taskcluster's messages.
func Define(in DefinitionInput, opts DefineOptions) (*Definition, *Schedule, error) {
	if in.HookGroupID != "" && in.HookGroupID != opts.HookGroupID {
		return nil, nil, inputError("Hook Group Ids do not match")
	}
	if in.HookID != "" && in.HookID != opts.HookID {
		return nil, nil, inputError("Hook Ids do not match")
	}
	def := &Definition{
		HookGroupID: opts.HookGroupID, HookID: opts.HookID, Metadata: in.Metadata,
		Schedule: in.Schedule, Task: in.Task, TriggerSchema: in.TriggerSchema,
	}
	if def.Schedule == nil {
		def.Schedule = []string{}
	}
	sched, err := ParseSchedule(def.Schedule)
	if err != nil {
		return nil, nil, err
	}
	if _, err := CompileTriggerSchema(def.TriggerSchema); err != nil {
		return nil, nil, err
	}
	switch {
	case in.Bindings != nil:
		def.Bindings = *in.Bindings
	case opts.Existing != nil:
		def.Bindings = opts.Existing.Bindings
	}
	if def.Bindings == nil {
		def.Bindings = []Binding{}
	}
	if len(def.Bindings) > 0 && !opts.PulseAvailable {
		return nil, nil, inputError("This hook has Pulse bindings, but this deployment has no AMQP broker (start hopper with --amqp), so they could never fire it. Remove the bindings or configure a broker.")
	}
	return def, sched, nil
}

// CompileTriggerSchema compiles a hook's triggerSchema, refusing one that
// is not a valid JSON schema with Taskcluster's message.
func CompileTriggerSchema(raw json.RawMessage) (*schema.UserSchema, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object","additionalProperties":false}`)
	}
	sch, err := schema.CompileUser(raw)
	if err != nil {
		var ve *schema.ValidationError
		if errors.As(err, &ve) {
			msg := "triggerSchema is not a valid JSON schema:"
			for _, p := range ve.Problems {
				msg += "\n * Property " + p
			}
			return nil, inputError("%s", msg)
		}
		return nil, inputError("triggerSchema is not a valid JSON schema: %v", err)
	}
	return sch, nil
}

// Same reports whether two definitions are the same hook, so that a
// repeated createHook with an identical body succeeds.
func Same(a, b *Definition) bool {
	ja, errA := canonical(a)
	jb, errB := canonical(b)
	return errA == nil && errB == nil && reflect.DeepEqual(ja, jb)
}

func canonical(d *Definition) (any, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err = dec.Decode(&v)
	return v, err
}

// Schedule is a hook's parsed schedule: the union of its patterns' due
// times, each counted once however many patterns name it.
type Schedule struct {
	patterns []*CronPattern
}

// ParseSchedule parses every pattern, refusing the first bad one with
// Taskcluster's "<message> in <pattern>".
func ParseSchedule(patterns []string) (*Schedule, error) {
	s := &Schedule{}
	for _, text := range patterns {
		p, err := ParseCron(text)
		if err != nil {
			return nil, inputError("%s in %s", err.Error(), text)
		}
		s.patterns = append(s.patterns, p)
	}
	return s, nil
}

// Empty reports whether the schedule never fires.
func (s *Schedule) Empty() bool { return len(s.patterns) == 0 }

// Next returns the first due time after the whole second containing
// after, and false when the schedule has none.
func (s *Schedule) Next(after time.Time) (time.Time, bool) {
	var best time.Time
	found := false
	for _, p := range s.patterns {
		if t, ok := p.Next(after); ok && (!found || t.Before(best)) {
			best, found = t, true
		}
	}
	return best, found
}
