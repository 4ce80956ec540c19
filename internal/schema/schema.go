// Package schema holds the JSON schemas of every request body accepted by
// hopper's Queue and Auth APIs, embedded in the binary, and validates bodies
// against them the way Taskcluster does: schema defaults are filled in first,
// then the result is validated (draft-06 semantics, formats asserted,
// date-times need a time zone), and the filled-in body is handed back.
//
// The schema files live in schemas/, one per request body, named after the
// body (create-task-request.json is the schema "create-task-request").
// common.json holds shared definitions and is not itself a request schema.
//
// Values are decoded with json.Number rather than float64 so that numbers
// keep their original spelling (and their precision) when the body is
// re-encoded; at places a schema types as integer, an integral value written
// with a fraction or exponent (5.0, 5e0) is rewritten as a plain integer (5)
// so that it unmarshals into Go integer fields.
package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed schemas/*.json
var schemaFiles embed.FS

const (
	// baseURL is the (never fetched) location the embedded files are
	// registered under, so that relative $refs such as
	// "common.json#/definitions/slugid" resolve between them. The .invalid
	// top-level domain guarantees nobody mistakes it for a real address.
	baseURL = "https://hopper.invalid/schemas/v1/"

	// commonFile holds shared definitions only; it is registered for $ref
	// resolution but not offered as a request schema.
	commonFile = "common.json"

	// draft06 is the only dialect the files may declare: Taskcluster's
	// schemas are draft-06, and mixing dialects would change the meaning of
	// keywords next to $ref.
	draft06 = "http://json-schema.org/draft-06/schema#"

	// maxFillDepth bounds the default-filling walk. The embedded schemas are
	// not recursive, so reaching it means a schema bug, not a deep body.
	maxFillDepth = 64
)

// Registry holds the compiled request schemas. It is immutable after New and
// safe for concurrent use.
type Registry struct {
	schemas map[string]*jsonschema.Schema
	// members caches, per schema and property, the encoded member
	// ("name":value) its default adds to a body's top-level object.
	members sync.Map // memberKey → []byte
	// order caches each schema's property names, sorted (see filler).
	order sync.Map
	// repeats remembers, per schema, the bodies that ValidateRepeated
	// validated lately (repeat.go); repeatEntries overrides the size of
	// a generation (tests).
	repeats       sync.Map // schema name → *repeats
	repeatEntries int
}

type memberKey struct {
	schema *jsonschema.Schema
	name   string
}

// UnknownSchemaError reports a Validate call naming a schema the registry
// does not have. It is a programming error in the caller, not a client
// mistake, so the API should answer 500 rather than 400.
type UnknownSchemaError struct {
	// Name is the schema name that was asked for.
	Name string
}

// Error implements error.
func (e *UnknownSchemaError) Error() string {
	return fmt.Sprintf("unknown schema %q", e.Name)
}

// New compiles every embedded schema and checks that each default a schema
// declares is itself valid where it is declared. Any problem is returned as an
// error: a broken schema must stop the server at start-up, not surface as
// puzzling 400s.
func New() (*Registry, error) {
	files, err := fs.Sub(schemaFiles, "schemas")
	if err != nil {
		return nil, fmt.Errorf("opening embedded schemas: %w", err)
	}
	return newRegistry(files)
}

// newRegistry compiles the *.json schema files at the top of files.
func newRegistry(files fs.FS) (*Registry, error) {
	compiler := jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft6)
	compiler.AssertFormat()
	compiler.RegisterFormat(&jsonschema.Format{Name: "date-time", Validate: validateDateTime})

	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, fmt.Errorf("listing schema files: %w", err)
	}
	var names []string
	for _, entry := range entries {
		file := entry.Name()
		if entry.IsDir() || path.Ext(file) != ".json" {
			continue
		}
		doc, err := loadSchemaFile(files, file)
		if err != nil {
			return nil, err
		}
		if err := compiler.AddResource(baseURL+file, doc); err != nil {
			return nil, fmt.Errorf("registering schema file %s: %w", file, err)
		}
		if file != commonFile {
			names = append(names, strings.TrimSuffix(file, ".json"))
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no schema files found")
	}

	r := &Registry{schemas: make(map[string]*jsonschema.Schema, len(names))}
	for _, name := range names {
		sch, err := compiler.Compile(baseURL + name + ".json")
		if err != nil {
			return nil, fmt.Errorf("compiling schema %s: %w", name, err)
		}
		if err := checkDefaults(sch, map[*jsonschema.Schema]bool{}); err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		r.schemas[name] = sch
	}
	return r, nil
}

// loadSchemaFile reads and decodes one schema file, insisting on the draft-06
// dialect.
func loadSchemaFile(files fs.FS, file string) (any, error) {
	raw, err := fs.ReadFile(files, file)
	if err != nil {
		return nil, fmt.Errorf("reading schema file %s: %w", file, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("decoding schema file %s: %w", file, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema file %s: top level is not an object", file)
	}
	if obj["$schema"] != draft06 {
		return nil, fmt.Errorf("schema file %s: $schema must be %q, got %v", file, draft06, obj["$schema"])
	}
	return doc, nil
}

// checkDefaults walks a compiled schema and validates every declared default
// against the schema node that declares it.
func checkDefaults(sch *jsonschema.Schema, seen map[*jsonschema.Schema]bool) error {
	if sch == nil || seen[sch] {
		return nil
	}
	seen[sch] = true
	if sch.Default != nil {
		if err := sch.Validate(*sch.Default); err != nil {
			return fmt.Errorf("default at %s is invalid: %w", sch.Location, err)
		}
	}
	var children []*jsonschema.Schema
	children = append(children, sch.Ref)
	children = append(children, sch.AllOf...)
	children = append(children, sch.AnyOf...)
	children = append(children, sch.OneOf...)
	for _, name := range sortedKeys(sch.Properties) {
		children = append(children, sch.Properties[name])
	}
	for _, p := range sch.PatternProperties {
		children = append(children, p)
	}
	if s, ok := sch.AdditionalProperties.(*jsonschema.Schema); ok {
		children = append(children, s)
	}
	switch items := sch.Items.(type) {
	case *jsonschema.Schema:
		children = append(children, items)
	case []*jsonschema.Schema:
		children = append(children, items...)
	}
	if s, ok := sch.AdditionalItems.(*jsonschema.Schema); ok {
		children = append(children, s)
	}
	for _, child := range children {
		if err := checkDefaults(child, seen); err != nil {
			return err
		}
	}
	return nil
}

// Names lists the request schemas the registry holds, sorted.
func (r *Registry) Names() []string {
	return sortedKeys(r.schemas)
}

// Validate checks a request body against the named schema and returns the
// body with schema defaults filled in, re-encoded as compact JSON ready to be
// unmarshalled into a Go struct.
//
// raw must be a single JSON value; an empty or all-whitespace body is treated
// as {} (docs/contract/queue.md §1.3). Defaults are filled for absent properties before
// validation, recursively through properties, array items and, for oneOf and
// anyOf, the first alternative that validates once filled. The returned bytes
// have object keys sorted and numbers in their original spelling (see the
// package comment for the integer exception).
//
// A body that does not match yields a *ValidationError listing every problem.
// An unknown name yields an *UnknownSchemaError; undecodable input yields a
// plain error.
func (r *Registry) Validate(name string, raw []byte) ([]byte, error) {
	sch, ok := r.schemas[name]
	if !ok {
		return nil, &UnknownSchemaError{Name: name}
	}
	value, err := decodeBody(raw)
	if err != nil {
		return nil, fmt.Errorf("decoding %s body: %w", name, err)
	}
	f := &filler{order: &r.order, track: true}
	value = f.fill(sch, value, 0, true)
	if err := sch.Validate(value); err != nil {
		var verr *jsonschema.ValidationError
		if !errors.As(err, &verr) {
			return nil, fmt.Errorf("validating %s body: %w", name, err)
		}
		return nil, &ValidationError{Schema: name, Problems: problems(verr), Taskcluster: ajvLines(verr, true)}
	}
	if !f.deep {
		// The common case: at most some defaults were added to the
		// top-level object. Appending them to the body as sent is much
		// cheaper than encoding the whole decoded value again.
		if out, ok := r.addMembers(sch, raw, value, f.added); ok {
			return out, nil
		}
	}
	out, err := encodeBody(value)
	if err != nil {
		return nil, fmt.Errorf("encoding validated %s body: %w", name, err)
	}
	return out, nil
}

// decodeBody parses one JSON value with numbers kept as json.Number.
func decodeBody(raw []byte) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		return nil, fmt.Errorf("parsing JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("parsing JSON: unexpected data after the top-level value")
	}
	return value, nil
}

// addMembers returns the JSON object raw with the named members of value
// appended, or false if raw is not an object written with braces.
func (r *Registry) addMembers(sch *jsonschema.Schema, raw []byte, value any, names []string) ([]byte, bool) {
	body := bytes.TrimSpace(raw)
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return nil, false
	}
	if len(names) == 0 {
		return body, true
	}
	obj, ok := value.(map[string]any)
	if !ok {
		return nil, false
	}
	out := make([]byte, 0, len(body)+24*len(names))
	out = append(out, body[:len(body)-1]...)
	empty := len(bytes.TrimSpace(body[1:len(body)-1])) == 0
	for i, name := range names {
		key := memberKey{sch, name}
		member, cached := r.members.Load(key)
		if !cached {
			k, err := encodeBody(name)
			if err != nil {
				return nil, false
			}
			v, err := encodeBody(obj[name])
			if err != nil {
				return nil, false
			}
			member, _ = r.members.LoadOrStore(key, append(append(k, ':'), v...))
		}
		if i > 0 || !empty {
			out = append(out, ',')
		}
		out = append(out, member.([]byte)...)
	}
	return append(out, '}'), true
}

// encodeBody serialises a validated value compactly. HTML escaping is turned
// off so that strings such as "<b>" in payloads come back byte-for-byte.
func encodeBody(value any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(value); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// dateTimeShape is the RFC 3339 date-time grammar with upper-case separators;
// field ranges are left to time.Parse.
var dateTimeShape = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$`)

// validateDateTime is the "date-time" format: RFC 3339 with a mandatory time
// zone, which is also parseable by time.Parse(time.RFC3339Nano, …) so that
// handlers never meet a second failure mode. It replaces the library's check
// to refuse what RFC 3339 allows but Go cannot parse (lower-case "t"/"z",
// leap seconds) and what Go parses but RFC 3339 forbids (a comma before the
// fraction); no Taskcluster client produces any of these.
func validateDateTime(v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	if !dateTimeShape.MatchString(s) {
		return errors.New("not an RFC 3339 date-time with time zone, like 2024-05-01T12:34:56.789Z")
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		return fmt.Errorf("out of range: %w", err)
	}
	return nil
}

// sortedKeys returns the keys of m in ascending order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
