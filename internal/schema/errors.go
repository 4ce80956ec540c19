package schema

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

const (
	// rootLocation names the whole body in problem lines, where a JSON
	// pointer would be the empty string.
	rootLocation = "(root)"

	// maxProblems caps the lines of one ValidationError: a body with 10000
	// bad dependencies should get a readable 400, not a 10000-line one.
	maxProblems = 50
)

// ValidationError describes why a request body does not match its schema. The
// API shows it to callers inside a 400 InputValidationError, so every problem
// is a self-contained, human-readable line.
type ValidationError struct {
	// Schema is the name of the schema the body was checked against.
	Schema string
	// Problems holds one line per failure, "<instance path>: <message>",
	// where the path is a JSON pointer into the body ("/metadata/source") or
	// "(root)" for the body itself. Lines are sorted and distinct; past
	// maxProblems the rest is summarised in one final line.
	Problems []string
	// Taskcluster holds the same failures worded as Taskcluster's
	// validator (ajv) words them, "data/metadata must have required
	// property 'source'", for callers that match on those sentences.
	Taskcluster []string
}

// Error implements error with a multi-line message listing every problem.
func (e *ValidationError) Error() string {
	return fmt.Sprintf("request body does not match schema %s:\n  * %s",
		e.Schema, strings.Join(e.Problems, "\n  * "))
}

// problem is one failure before formatting.
type problem struct {
	at  string // JSON pointer or rootLocation
	msg string
}

// problems flattens the library's error tree into sorted, distinct lines.
func problems(err *jsonschema.ValidationError) []string {
	// A message.Printer is not safe for concurrent use, so each failed
	// validation gets its own.
	p := message.NewPrinter(language.English)
	var lines []string
	for _, pr := range collect(err, p, nil) {
		lines = append(lines, pr.at+": "+pr.msg)
	}
	sort.Strings(lines)
	lines = slices.Compact(lines)
	if len(lines) == 0 {
		// Never expected: the library reports at least one leaf per
		// failure. Say something rather than an empty list.
		lines = append(lines, rootLocation+": does not match the schema")
	}
	if len(lines) > maxProblems {
		more := len(lines) - maxProblems
		lines = append(lines[:maxProblems], fmt.Sprintf("... and %d more problems", more))
	}
	return lines
}

// collect appends the problems of err and its causes to out.
func collect(err *jsonschema.ValidationError, p *message.Printer, out []problem) []problem {
	switch k := err.ErrorKind.(type) {
	case *kind.OneOf:
		if len(k.Subschemas) > 0 {
			return append(out, problem{pointer(err.InstanceLocation), "matches more than one of the allowed forms"})
		}
		return collectAlternatives(err, p, out)
	case *kind.AnyOf:
		return collectAlternatives(err, p, out)
	}
	if len(err.Causes) > 0 {
		// Structural nodes (schema, group, $ref, allOf, not): the problems
		// are in the causes.
		for _, cause := range err.Causes {
			out = collect(cause, p, out)
		}
		return out
	}
	return append(out, problem{pointer(err.InstanceLocation), err.ErrorKind.LocalizedString(p)})
}

// collectAlternatives explains a oneOf/anyOf that no alternative matched.
// Listing the failures of every alternative would bury the real mistake: an
// error artifact with a bad reason would also be told it is not an s3
// artifact. Alternatives are usually told apart by a tag member with a single
// allowed value (storageType), so alternatives whose tag did not match are set
// aside and the problems of the one alternative whose tag matched are
// reported. If no tag matched, the tags' allowed values are reported; if no
// tag could be checked (say, storageType is missing), the problems of every
// remaining alternative are reported, labelled by position.
func collectAlternatives(err *jsonschema.ValidationError, p *message.Printer, out []problem) []problem {
	type candidate struct {
		form     int
		problems []problem
	}
	var candidates []candidate
	tagWants := map[string][]string{} // tag location -> allowed values
	var tagLocations []string
	for i, cause := range err.Causes {
		tags := tagMismatches(cause, len(err.InstanceLocation))
		if len(tags) == 0 {
			candidates = append(candidates, candidate{form: i + 1, problems: collect(cause, p, nil)})
			continue
		}
		for _, t := range tags {
			at := pointer(t.InstanceLocation)
			if _, seen := tagWants[at]; !seen {
				tagLocations = append(tagLocations, at)
			}
			for _, want := range t.ErrorKind.(*kind.Enum).Want {
				tagWants[at] = append(tagWants[at], fmt.Sprintf("%q", fmt.Sprint(want)))
			}
		}
	}
	switch {
	case len(candidates) == 1:
		return append(out, candidates[0].problems...)
	case len(candidates) == 0 && len(tagLocations) > 0:
		for _, at := range tagLocations {
			values := slices.Compact(slices.Sorted(slices.Values(tagWants[at])))
			out = append(out, problem{at, "value must be one of " + strings.Join(values, ", ")})
		}
		return out
	default:
		out = append(out, problem{pointer(err.InstanceLocation), "does not match any of the allowed forms"})
		for _, c := range candidates {
			for _, pr := range c.problems {
				out = append(out, problem{pr.at, fmt.Sprintf("(as form %d) %s", c.form, pr.msg)})
			}
		}
		return out
	}
}

// tagMismatches returns the leaf errors of an alternative saying that a direct
// member of the value has the wrong single allowed value: the sign that the
// body was never meant to be this alternative.
func tagMismatches(err *jsonschema.ValidationError, depth int) []*jsonschema.ValidationError {
	if len(err.Causes) > 0 {
		var out []*jsonschema.ValidationError
		for _, cause := range err.Causes {
			out = append(out, tagMismatches(cause, depth)...)
		}
		return out
	}
	if e, ok := err.ErrorKind.(*kind.Enum); ok && len(e.Want) == 1 && len(err.InstanceLocation) == depth+1 {
		return []*jsonschema.ValidationError{err}
	}
	return nil
}

// pointer renders an instance location as a JSON pointer, or rootLocation.
func pointer(location []string) string {
	if len(location) == 0 {
		return rootLocation
	}
	var sb strings.Builder
	for _, token := range location {
		token = strings.ReplaceAll(token, "~", "~0")
		sb.WriteByte('/')
		sb.WriteString(strings.ReplaceAll(token, "/", "~1"))
	}
	return sb.String()
}
