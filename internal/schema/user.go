package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// userSchemaURL is where a user-supplied schema is registered while it is
// compiled; nothing is ever fetched from it.
const userSchemaURL = "https://hopper.invalid/user-schema.json"

// UserSchema is a JSON schema supplied by a user (a hook's triggerSchema),
// compiled for validating values against it. It is immutable and safe for
// concurrent use.
type UserSchema struct {
	sch *jsonschema.Schema
}

// noLoader refuses every external reference, so a user's "$ref" can never
// make hopper read a local file or fetch a URL.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external references are not allowed (%s)", url)
}

// CompileUser compiles a user-supplied schema the way Taskcluster's hooks
// service (ajv with formats) reads one: draft-07 unless the schema names
// its own draft, formats asserted, external references refused. An
// invalid schema yields a *ValidationError whose problems say what is
// wrong with it.
func CompileUser(raw []byte) (*UserSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("decoding schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	c.RegisterFormat(&jsonschema.Format{Name: "date-time", Validate: validateDateTime})
	c.UseLoader(noLoader{})
	if err := c.AddResource(userSchemaURL, doc); err != nil {
		return nil, &ValidationError{Schema: "triggerSchema", Problems: []string{rootLocation + ": " + err.Error()}}
	}
	sch, err := c.Compile(userSchemaURL)
	if err != nil {
		var sve *jsonschema.SchemaValidationError
		var ve *jsonschema.ValidationError
		if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
			return nil, &ValidationError{Schema: "the JSON schema meta-schema", Problems: problems(ve), Taskcluster: ajvLines(ve, false)}
		}
		return nil, &ValidationError{Schema: "the JSON schema meta-schema", Problems: []string{rootLocation + ": " + oneLine(err.Error())}}
	}
	return &UserSchema{sch: sch}, nil
}

// Validate checks a JSON value against the schema; a mismatch is a
// *ValidationError listing every problem.
func (u *UserSchema) Validate(raw []byte) error {
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("decoding value: %w", err)
	}
	return u.ValidateValue(value)
}

// ValidateValue checks an already decoded value (as encoding/json or
// jsonschema.UnmarshalJSON decode it) against the schema.
func (u *UserSchema) ValidateValue(value any) error {
	value = normalizeNumbers(value)
	if err := u.sch.Validate(value); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return fmt.Errorf("validating: %w", err)
		}
		return &ValidationError{Schema: "triggerSchema", Problems: problems(ve), Taskcluster: ajvLines(ve, false)}
	}
	return nil
}

// normalizeNumbers turns float64 numbers (encoding/json's) into
// json.Number, which the validator reads exactly.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case float64:
		b, _ := json.Marshal(x)
		return json.Number(b)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeNumbers(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeNumbers(e)
		}
		return out
	}
	return v
}

// Summary renders the problems on one line, separated by "; ", the way
// ajv's errorsText does.
func (e *ValidationError) Summary() string {
	return strings.Join(e.Problems, "; ")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
