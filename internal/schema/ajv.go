package schema

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Taskcluster validates with ajv, and its callers (its own tests among them)
// match on ajv's sentences: "data/bindings/0 must have required property
// 'routingKeyPattern'", "must be array". hopper's problem lines read better
// but say it differently, so an API error carries both: hopper's lines, then
// the same failures worded as Taskcluster words them (TaskclusterText).

// ajvLines words every leaf failure of err as ajv's errorsText does:
// "data<JSON pointer> <message>", sorted (the validator visits properties
// in no fixed order; ajv follows the schema's), without repeats.
// nameExtra adds the name of an additional property to its line, as
// Taskcluster's API validator does (ajv alone does not).
func ajvLines(err *jsonschema.ValidationError, nameExtra bool) []string {
	p := message.NewPrinter(language.English)
	var lines []string
	seen := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		msgs := ajvMessages(e.ErrorKind, p, nameExtra)
		for _, m := range msgs {
			line := "data" + ajvPointer(e.InstanceLocation) + " " + m
			if !seen[line] {
				seen[line] = true
				lines = append(lines, line)
			}
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(err)
	sort.Strings(lines)
	if len(lines) > maxProblems {
		lines = append(lines[:maxProblems], fmt.Sprintf("... and %d more", len(lines)-maxProblems))
	}
	return lines
}

// ajvMessages is ajv's (v8, English) message for one failure; structural
// nodes whose causes carry the failures have none.
func ajvMessages(k jsonschema.ErrorKind, p *message.Printer, nameExtra bool) []string {
	switch k := k.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		return nil
	case *kind.OneOf:
		return []string{"must match exactly one schema in oneOf"}
	case *kind.AnyOf:
		return []string{"must match a schema in anyOf"}
	case *kind.Not:
		return []string{"must NOT be valid"}
	case *kind.FalseSchema:
		return []string{"boolean schema is false"}
	case *kind.Required:
		out := make([]string, len(k.Missing))
		for i, m := range k.Missing {
			out[i] = fmt.Sprintf("must have required property '%s'", m)
		}
		return out
	case *kind.AdditionalProperties:
		if !nameExtra {
			return []string{"must NOT have additional properties"}
		}
		out := make([]string, len(k.Properties))
		for i, prop := range k.Properties {
			quoted, _ := json.Marshal(prop)
			out[i] = "must NOT have additional properties: " + string(quoted)
		}
		return out
	case *kind.Type:
		return []string{"must be " + strings.Join(k.Want, ",")}
	case *kind.Enum:
		return []string{"must be equal to one of the allowed values"}
	case *kind.Const:
		return []string{"must be equal to constant"}
	case *kind.Pattern:
		return []string{fmt.Sprintf("must match pattern \"%s\"", k.Want)}
	case *kind.Format:
		return []string{fmt.Sprintf("must match format \"%s\"", k.Want)}
	case *kind.MinLength:
		return []string{fmt.Sprintf("must NOT have fewer than %d characters", k.Want)}
	case *kind.MaxLength:
		return []string{fmt.Sprintf("must NOT have more than %d characters", k.Want)}
	case *kind.MinItems:
		return []string{fmt.Sprintf("must NOT have fewer than %d items", k.Want)}
	case *kind.MaxItems:
		return []string{fmt.Sprintf("must NOT have more than %d items", k.Want)}
	case *kind.MinProperties:
		return []string{fmt.Sprintf("must NOT have fewer than %d properties", k.Want)}
	case *kind.MaxProperties:
		return []string{fmt.Sprintf("must NOT have more than %d properties", k.Want)}
	case *kind.Minimum:
		return []string{"must be >= " + k.Want.RatString()}
	case *kind.Maximum:
		return []string{"must be <= " + k.Want.RatString()}
	case *kind.ExclusiveMinimum:
		return []string{"must be > " + k.Want.RatString()}
	case *kind.ExclusiveMaximum:
		return []string{"must be < " + k.Want.RatString()}
	case *kind.MultipleOf:
		return []string{"must be multiple of " + k.Want.RatString()}
	case *kind.UniqueItems:
		return []string{fmt.Sprintf("must NOT have duplicate items (items ## %d and %d are identical)", k.Duplicates[1], k.Duplicates[0])}
	case *kind.DependentRequired:
		return []string{fmt.Sprintf("must have property %s when property %s is present", strings.Join(k.Missing, ", "), k.Prop)}
	case *kind.PropertyNames:
		return []string{"property name must be valid"}
	}
	return []string{k.LocalizedString(p)}
}

// ajvPointer is ajv's instancePath: a JSON pointer, empty for the root.
func ajvPointer(location []string) string {
	if len(location) == 0 {
		return ""
	}
	return pointer(location)
}

// TaskclusterSummary renders the failures on one line as ajv's errorsText
// does with a "; " separator (Taskcluster's answer to a bad hook payload).
func (e *ValidationError) TaskclusterSummary() string {
	return strings.Join(e.Taskcluster, "; ")
}

// TaskclusterText renders the failures as Taskcluster's validator does
// ("Schema Validation Failed!", the schema, then one "  * data… must …" line
// per failure); empty when the failures were not worded that way.
func (e *ValidationError) TaskclusterText() string {
	if len(e.Taskcluster) == 0 {
		return ""
	}
	return "Schema Validation Failed!\nRejecting Schema: " + e.Schema + "\nErrors:\n  * " + strings.Join(e.Taskcluster, "\n  * ")
}
