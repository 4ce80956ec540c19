package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hopper-ci/hopper/internal/jsvalue"
)

// ExprKind says which of the three forms a scope expression has.
type ExprKind uint8

// The forms of a scope expression.
const (
	// KindScope is a single required scope.
	KindScope ExprKind = iota
	// KindAllOf is satisfied when every member is ({"AllOf": []} always is).
	KindAllOf
	// KindAnyOf is satisfied when some member is ({"AnyOf": []} never is).
	KindAnyOf
)

// Expr is a scope expression: a scope string, {"AllOf": [...]} or
// {"AnyOf": [...]}. The zero value is the scope "" (satisfied by "*").
// Build expressions with Scope, AllOf and AnyOf, or decode them from JSON.
type Expr struct {
	kind    ExprKind
	scope   string
	members []Expr
}

// Scope returns the expression requiring the single scope s.
func Scope(s string) Expr { return Expr{kind: KindScope, scope: s} }

// AllOf returns the expression satisfied when every member is.
func AllOf(members ...Expr) Expr {
	return Expr{kind: KindAllOf, members: nonNil(members)}
}

// AnyOf returns the expression satisfied when at least one member is.
func AnyOf(members ...Expr) Expr {
	return Expr{kind: KindAnyOf, members: nonNil(members)}
}

// AllOfScopes returns {"AllOf": scopes}.
func AllOfScopes(scopes ...string) Expr {
	members := make([]Expr, len(scopes))
	for i, s := range scopes {
		members[i] = Scope(s)
	}
	return AllOf(members...)
}

func nonNil(members []Expr) []Expr {
	if members == nil {
		return []Expr{}
	}
	return members
}

// Kind returns the form of the expression.
func (e Expr) Kind() ExprKind { return e.kind }

// ScopeString returns the scope of a KindScope expression ("" otherwise).
func (e Expr) ScopeString() string { return e.scope }

// Members returns the members of an AllOf or AnyOf expression.
func (e Expr) Members() []Expr { return e.members }

// Valid reports whether every scope in the expression is valid.
func (e Expr) Valid() bool {
	if e.kind == KindScope {
		return ValidScope(e.scope)
	}
	for _, m := range e.members {
		if !m.Valid() {
			return false
		}
	}
	return true
}

// SatisfiedBy reports whether the (already role-expanded) scope set held
// satisfies the expression.
func (e Expr) SatisfiedBy(held []string) bool {
	switch e.kind {
	case KindAllOf:
		for _, m := range e.members {
			if !m.SatisfiedBy(held) {
				return false
			}
		}
		return true
	case KindAnyOf:
		for _, m := range e.members {
			if m.SatisfiedBy(held) {
				return true
			}
		}
		return false
	default:
		return SetSatisfies(held, e.scope)
	}
}

// Missing simplifies the expression to what held lacks, for error
// messages: satisfied scopes disappear, an AllOf keeps its unsatisfied
// members (a single one unwrapped), and an AnyOf vanishes if any member is
// satisfied and otherwise keeps all its members. ok is false when nothing
// is missing (the expression is satisfied).
func (e Expr) Missing(held []string) (missing Expr, ok bool) {
	switch e.kind {
	case KindAllOf:
		var rest []Expr
		for _, m := range e.members {
			if sub, ok := m.Missing(held); ok {
				rest = append(rest, sub)
			}
		}
		switch len(rest) {
		case 0:
			return Expr{}, false
		case 1:
			return rest[0], true
		}
		return AllOf(rest...), true
	case KindAnyOf:
		rest := make([]Expr, 0, len(e.members))
		for _, m := range e.members {
			sub, ok := m.Missing(held)
			if !ok {
				return Expr{}, false
			}
			rest = append(rest, sub)
		}
		if len(rest) == 1 {
			return rest[0], true
		}
		return AnyOf(rest...), true
	default:
		if SetSatisfies(held, e.scope) {
			return Expr{}, false
		}
		return e, true
	}
}

// Equal reports whether two expressions are structurally identical.
func (e Expr) Equal(o Expr) bool {
	if e.kind != o.kind || e.scope != o.scope || len(e.members) != len(o.members) {
		return false
	}
	for i := range e.members {
		if !e.members[i].Equal(o.members[i]) {
			return false
		}
	}
	return true
}

// MarshalJSON encodes the expression in Taskcluster's JSON form.
func (e Expr) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	e.writeJSON(&b, "", "")
	return b.Bytes(), nil
}

// String returns the expression as it appears in error messages: a scope
// verbatim, anything else as JSON indented by two spaces (the layout of
// JavaScript's JSON.stringify(v, null, 2)).
func (e Expr) String() string {
	if e.kind == KindScope {
		return e.scope
	}
	var b bytes.Buffer
	e.writeJSON(&b, "\n", "  ")
	return b.String()
}

// writeJSON writes the expression; with newline "" it is compact,
// otherwise each nesting level is indented by indent.
func (e Expr) writeJSON(b *bytes.Buffer, prefix, indent string) {
	if e.kind == KindScope {
		b.WriteString(jsvalue.QuoteJSON(e.scope))
		return
	}
	key := `"AllOf":`
	if e.kind == KindAnyOf {
		key = `"AnyOf":`
	}
	if indent == "" {
		b.WriteString("{" + key + "[")
		for i, m := range e.members {
			if i > 0 {
				b.WriteByte(',')
			}
			m.writeJSON(b, "", "")
		}
		b.WriteString("]}")
		return
	}
	inner := prefix + indent
	b.WriteString("{" + inner + key + " [")
	if len(e.members) == 0 {
		b.WriteString("]" + prefix + "}")
		return
	}
	for i, m := range e.members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(inner + indent)
		m.writeJSON(b, inner+indent, indent)
	}
	b.WriteString(inner + "]" + prefix + "}")
}

// UnmarshalJSON decodes a scope expression, rejecting anything
// taskcluster-lib-scopes would not accept as valid: objects must have
// exactly one key, AllOf or AnyOf, holding an array of valid expressions,
// and scopes must be valid.
func (e *Expr) UnmarshalJSON(data []byte) error {
	parsed, err := ParseExpr(data)
	if err != nil {
		return err
	}
	*e = parsed
	return nil
}

// ParseExpr decodes and validates a JSON scope expression.
func ParseExpr(data []byte) (Expr, error) {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return Expr{}, fmt.Errorf("decoding scope expression: %w", err)
	}
	if dec.More() {
		return Expr{}, errors.New("decoding scope expression: trailing data")
	}
	return exprFromValue(raw)
}

func exprFromValue(v any) (Expr, error) {
	switch v := v.(type) {
	case string:
		if !ValidScope(v) {
			return Expr{}, fmt.Errorf("invalid scope %q in scope expression", v)
		}
		return Scope(v), nil
	case map[string]any:
		if len(v) != 1 {
			return Expr{}, fmt.Errorf("scope expression object must have exactly one key, has %d", len(v))
		}
		for key, val := range v {
			kind := KindAllOf
			switch key {
			case "AllOf":
			case "AnyOf":
				kind = KindAnyOf
			default:
				return Expr{}, fmt.Errorf("scope expression key must be AllOf or AnyOf, not %q", key)
			}
			list, ok := val.([]any)
			if !ok {
				return Expr{}, fmt.Errorf("scope expression %s must hold an array", key)
			}
			members := make([]Expr, 0, len(list))
			for _, item := range list {
				m, err := exprFromValue(item)
				if err != nil {
					return Expr{}, err
				}
				members = append(members, m)
			}
			return Expr{kind: kind, members: members}, nil
		}
	}
	return Expr{}, fmt.Errorf("scope expression must be a string or an object, not %s", jsonTypeName(v))
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case []any:
		return "an array"
	case string:
		return "a string"
	}
	return "an object"
}

// InsufficientScopesMessage returns the message of a 403 InsufficientScopes
// error (without the standard footer). For a request with credentials it
// names the client and shows what is missing; for an anonymous request
// it only shows what is required.
func InsufficientScopesMessage(clientID string, hasCredentials bool, required, missing Expr) string {
	var b strings.Builder
	if hasCredentials {
		b.WriteString("Client ID ")
		b.WriteString(clientID)
		b.WriteString(" does not have sufficient scopes and is missing the following scopes:\n\n```\n")
		b.WriteString(missing.String())
		b.WriteString("\n```\n\nThis request requires the client to satisfy the following scope expression:\n\n```\n")
	} else {
		b.WriteString("This request requires Taskcluster credentials that satisfy the following scope expression:\n\n```\n")
	}
	b.WriteString(required.String())
	b.WriteString("\n```")
	return b.String()
}

// InsufficientScopesError is the failure of a scope check (HTTP 403,
// code InsufficientScopes). Error returns the Taskcluster message.
type InsufficientScopesError struct {
	// ClientID is the caller, empty for anonymous requests.
	ClientID string
	// HasCredentials is false for anonymous requests.
	HasCredentials bool
	// Required is the rendered expression that was checked.
	Required Expr
	// Missing is what the caller lacks (Required.Missing).
	Missing Expr
}

// Error returns the Taskcluster InsufficientScopes message.
func (e *InsufficientScopesError) Error() string {
	return InsufficientScopesMessage(e.ClientID, e.HasCredentials, e.Required, e.Missing)
}
