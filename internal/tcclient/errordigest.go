package tcclient

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Bounds of an error digest: an API message can list thousands of schema
// problems or a scope expression of hundreds of scopes, and whoever reads
// it needs what to fix, not a screenful.
const (
	digestMaxLines    = 25
	digestMaxLineSize = 300
)

// ErrorDigest turns the message of a Taskcluster API error into what a
// person needs to act on it: its first line, then the lines that say what
// to fix (each schema violation, each missing scope), bounded in number and
// length. Cutting such a message at its first line or paragraph stops at
// "…is missing the following scopes:" or "…does not match schema
// create-task-request:", just before the part that matters.
//
// It drops the details block Taskcluster appends after "---" (method,
// error code, time), hopper's second wording of schema failures in
// Taskcluster's validator's words (kept when it is the only wording, as
// from Taskcluster itself), and, once the missing scopes are listed, the
// whole scope expression they came from. A fenced scope expression is
// rendered one scope a line, "one of:" introducing alternatives.
func ErrorDigest(message string) (summary string, details []string) {
	msg := message
	if i := strings.Index(msg, "\n---"); i >= 0 {
		msg = msg[:i]
	}
	if i := strings.Index(msg, "\nSchema Validation Failed!"); i > 0 {
		msg = msg[:i]
	}
	lines := strings.Split(strings.ReplaceAll(msg, "\r\n", "\n"), "\n")
	var out []string
	missingScopes := false
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], " \t")
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			// A fenced block: up to the closing fence.
			j := i + 1
			for j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "```") {
				j++
			}
			out = append(out, fencedLines(lines[i+1:min(j, len(lines))])...)
			i = j
			if missingScopes {
				// What follows is the expression the missing scopes
				// came from: the missing ones are what to fix.
				break
			}
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.Contains(line, "is missing the following scopes:") {
			missingScopes = true
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return "", nil
	}
	summary = strings.TrimSpace(out[0])
	for _, line := range out[1:] {
		if len(details) == digestMaxLines {
			details = append(details, fmt.Sprintf("… and %d more lines", len(out)-1-digestMaxLines))
			break
		}
		if len(line) > digestMaxLineSize {
			line = line[:digestMaxLineSize] + "…"
		}
		details = append(details, line)
	}
	return summary, details
}

// fencedLines renders a fenced block: a scope expression one scope a line
// (indented, as a list under the sentence before it), anything else as it
// is.
func fencedLines(block []string) []string {
	var expr any
	if err := json.Unmarshal([]byte(strings.Join(block, "\n")), &expr); err == nil {
		if lines, ok := scopeLines(expr, "  "); ok {
			return lines
		}
	}
	if len(block) == 1 && strings.TrimSpace(block[0]) != "" && !strings.ContainsAny(block[0], "{}[]\"") {
		// A bare scope, as Taskcluster prints a single one.
		return []string{"  " + strings.TrimSpace(block[0])}
	}
	var out []string
	for _, l := range block {
		if strings.TrimSpace(l) != "" {
			out = append(out, "  "+strings.TrimRight(l, " \t"))
		}
	}
	return out
}

// scopeLines renders a scope expression ({"AllOf": [...]}, {"AnyOf":
// [...]} or a scope): every scope of an AllOf is needed, so they are
// listed at one level; an AnyOf needs one of its members, listed under
// "one of:".
func scopeLines(expr any, indent string) ([]string, bool) {
	switch e := expr.(type) {
	case string:
		return []string{indent + e}, true
	case map[string]any:
		if len(e) != 1 {
			return nil, false
		}
		for key, v := range e {
			members, ok := v.([]any)
			if !ok || key != "AllOf" && key != "AnyOf" {
				return nil, false
			}
			var out []string
			inner := indent
			if key == "AnyOf" {
				out = append(out, indent+"one of:")
				inner += "  "
			}
			for _, m := range members {
				lines, ok := scopeLines(m, inner)
				if !ok {
					return nil, false
				}
				out = append(out, lines...)
			}
			return out, true
		}
	}
	return nil, false
}

// OneLine is the digest on one line, for log lines: the summary, then the
// details joined with "; ", alternatives as "one of (a | b)".
func OneLine(message string) string {
	summary, details := ErrorDigest(message)
	if len(details) == 0 {
		return summary
	}
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	var parts []string
	for i := 0; i < len(details); i++ {
		text := strings.TrimPrefix(strings.TrimSpace(details[i]), "* ")
		if text == "one of:" {
			var alts []string
			base := indent(details[i])
			for i+1 < len(details) && indent(details[i+1]) > base {
				i++
				alts = append(alts, strings.TrimSpace(details[i]))
			}
			text = "one of (" + strings.Join(alts, " | ") + ")"
		}
		parts = append(parts, text)
	}
	return summary + " " + strings.Join(parts, "; ")
}
