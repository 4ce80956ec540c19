package auth

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Role is a role as expansion sees it: an id and the scopes it grants to
// every holder of a scope reaching "assume:<RoleID>".
type Role struct {
	RoleID string
	Scopes []string
}

// Role-set validation failure codes, as Taskcluster names them.
const (
	CodeInvalidScope    = "InvalidScopeError"
	CodeDependencyCycle = "DependencyCycleError"
)

// RoleSetError explains why a set of roles is not acceptable (HTTP 400
// InputError on createRole/updateRole). Error returns Taskcluster's
// message.
type RoleSetError struct {
	// Code is CodeInvalidScope or CodeDependencyCycle.
	Code string
	// Scope is the offending parameterized scope (CodeInvalidScope).
	Scope string
	// Cycle lists the role patterns ("assume:<roleId>") of the reported
	// cycle, first repeated last (CodeDependencyCycle).
	Cycle   []string
	message string
}

// Error returns the Taskcluster message.
func (e *RoleSetError) Error() string { return e.message }

const (
	assumePrefix = "assume:"
	paramToken   = "<..>"
	// paramMark stands for the first "<..>" of a parameterized scope while
	// validating; it is the character Taskcluster uses, and it sorts before
	// every printable character, which decides which error is reported first.
	paramMark = "\x1a"
)

// compiledRole is a role split for expansion.
type compiledRole struct {
	id      string
	pattern string // "assume:" + id
	star    bool   // id ends in "*": parameterized
	key     string // id without its trailing "*"
	// fixed are the grants that do not depend on the parameter (all of
	// them for roles without a trailing "*").
	fixed []string
	// paramed are grants containing "<..>" (star roles only), split at
	// its first occurrence.
	paramed []paramGrant
	// closure is expand(fixed), precomputed.
	closure []string
}

type paramGrant struct{ before, after string }

// instantiate substitutes param for "<..>": a param ending in "*" cuts
// the scope there (the star already covers any suffix).
func (g paramGrant) instantiate(param string) string {
	if strings.HasSuffix(param, "*") {
		return g.before + param
	}
	return g.before + param + g.after
}

// Expander computes expand(S): the least superset of S closed under the
// grants of every role reached by a member, normalized. It is built once
// per role set (NewExpander precomputes lookup structures and the
// expansion of every role's fixed grants), is immutable, and is safe for
// concurrent use.
type Expander struct {
	roles []compiledRole
	// exact maps the id of each role without a trailing "*" to its indexes.
	exact map[string][]int
	// stars is a trie over the keys of the "*" roles.
	stars *starNode
	// byKey holds every role's key, sorted, for prefix-range lookups of
	// scopes ending in "*".
	byKey []keyedRole
}

type starNode struct {
	roles    []int
	children map[byte]*starNode
}

type keyedRole struct {
	key string
	idx int
}

// reach is a role reached by a scope, with the parameter it receives.
type reach struct {
	idx   int
	param string
}

// NewExpander validates roles (see ValidateRoles) and builds an Expander.
func NewExpander(roles []Role) (*Expander, error) {
	if err := ValidateRoles(roles); err != nil {
		return nil, err
	}
	return buildExpander(roles, true), nil
}

func buildExpander(roles []Role, withClosures bool) *Expander {
	e := &Expander{
		roles: make([]compiledRole, len(roles)),
		exact: map[string][]int{},
		stars: &starNode{},
		byKey: make([]keyedRole, len(roles)),
	}
	for i, r := range roles {
		c := compiledRole{id: r.RoleID, pattern: assumePrefix + r.RoleID}
		c.key, c.star = strings.CutSuffix(r.RoleID, "*")
		if !c.star {
			c.fixed = Normalize(r.Scopes)
			e.exact[c.key] = append(e.exact[c.key], i)
		} else {
			var fixed []string
			for _, s := range r.Scopes {
				before, after, found := strings.Cut(s, paramToken)
				if found {
					c.paramed = append(c.paramed, paramGrant{before: before, after: after})
				} else {
					fixed = append(fixed, s)
				}
			}
			c.fixed = Normalize(fixed)
			n := e.stars
			for j := 0; j < len(c.key); j++ {
				if n.children == nil {
					n.children = map[byte]*starNode{}
				}
				child := n.children[c.key[j]]
				if child == nil {
					child = &starNode{}
					n.children[c.key[j]] = child
				}
				n = child
			}
			n.roles = append(n.roles, i)
		}
		e.roles[i] = c
		e.byKey[i] = keyedRole{key: c.key, idx: i}
	}
	sort.Slice(e.byKey, func(a, b int) bool { return e.byKey[a].key < e.byKey[b].key })
	// Closures are computed without using other closures; validated role
	// sets are acyclic, and the worklist's seen-set terminates anyway.
	if withClosures {
		for i := range e.roles {
			e.roles[i].closure = e.expand(e.roles[i].fixed, false)
		}
	}
	return e
}

// reached appends to out every role the held scope s reaches, with its
// parameter. A role "r" is reached by "assume:r" and by any "<p>*" whose p
// is a prefix of "assume:r"; a role "r*" is reached by any scope starting
// with "assume:r" (the rest being the parameter) and by any "<p>*" whose p
// is a prefix of "assume:r" (parameter "*"). Hence "*", "a*", … "assume*"
// and "assume:*" reach every role.
func (e *Expander) reached(s string, out []reach) []reach {
	if rest, ok := strings.CutPrefix(s, assumePrefix); ok {
		if idxs, ok := e.exact[rest]; ok {
			for _, i := range idxs {
				out = append(out, reach{idx: i})
			}
		}
		// Star roles whose key is a prefix of rest.
		n := e.stars
		for j := 0; ; j++ {
			for _, i := range n.roles {
				out = append(out, reach{idx: i, param: rest[j:]})
			}
			if j == len(rest) || n.children == nil {
				break
			}
			n = n.children[rest[j]]
			if n == nil {
				break
			}
		}
		if prefix, ok := strings.CutSuffix(rest, "*"); ok {
			out = e.reachedByPrefix(prefix, out)
		}
		return out
	}
	if prefix, ok := strings.CutSuffix(s, "*"); ok && strings.HasPrefix(assumePrefix, prefix) {
		return e.reachedByPrefix("", out)
	}
	return out
}

// reachedByPrefix appends every role whose key starts with prefix; star
// roles get the parameter "*".
func (e *Expander) reachedByPrefix(prefix string, out []reach) []reach {
	start := sort.Search(len(e.byKey), func(i int) bool { return e.byKey[i].key >= prefix })
	for _, kr := range e.byKey[start:] {
		if !strings.HasPrefix(kr.key, prefix) {
			break
		}
		r := reach{idx: kr.idx}
		if e.roles[kr.idx].star {
			r.param = "*"
		}
		out = append(out, r)
	}
	return out
}

// Expand returns expand(scopes), normalized. The input is not modified.
func (e *Expander) Expand(scopes []string) []string {
	if slices.Contains(scopes, "*") {
		// "*" satisfies every scope, so whatever the roles add is
		// normalized away. Root-like clients (the queue's own identity,
		// which issues every claim's credentials) take this path.
		return []string{"*"}
	}
	if e == nil {
		return Normalize(scopes)
	}
	return e.expand(scopes, true)
}

// ExpandRole returns the expanded scopes of a role, as the role endpoints
// report them: expand({"assume:<roleID>"}), which includes that scope.
func (e *Expander) ExpandRole(roleID string) []string {
	return e.Expand([]string{assumePrefix + roleID})
}

func (e *Expander) expand(scopes []string, useClosures bool) []string {
	seen := make(map[string]struct{}, len(scopes)*2)
	result := make([]string, 0, len(scopes)*2)
	work := slices.Clone(scopes)
	var reaches []reach
	for len(work) > 0 {
		s := work[len(work)-1]
		work = work[:len(work)-1]
		if _, ok := seen[s]; ok {
			continue
		}
		seen[s] = struct{}{}
		result = append(result, s)
		reaches = e.reached(s, reaches[:0])
		for _, r := range reaches {
			role := &e.roles[r.idx]
			if useClosures {
				// The closure is closed under expansion: its members need
				// no processing of their own.
				for _, c := range role.closure {
					if _, ok := seen[c]; !ok {
						seen[c] = struct{}{}
						result = append(result, c)
					}
				}
			} else {
				work = append(work, role.fixed...)
			}
			for _, g := range role.paramed {
				work = append(work, g.instantiate(r.param))
			}
		}
	}
	SortScopes(result)
	return NormalizeSorted(result)
}

// ValidateRoles checks a complete role set as createRole and updateRole
// must before storing it. Roles ending in "*" may use "<..>" at most once
// per scope and not as "*<..>" at the end (an ambiguous star), and no role
// may depend on itself through any chain of roles (with "<..>" taken as
// "*"). Consequently no role may grant "*" or "assume:*". The first
// problem found is returned as a *RoleSetError with Taskcluster's message;
// which cycle is reported depends on the order of roles, so callers should
// pass them in a stable order (for example sorted by roleId).
func ValidateRoles(roles []Role) error {
	// Scope checks come first, for every role, as in Taskcluster.
	for _, r := range roles {
		if !strings.HasSuffix(r.RoleID, "*") {
			continue
		}
		var marked []string
		for _, s := range r.Scopes {
			if strings.Contains(s, paramToken) {
				marked = append(marked, strings.Replace(s, paramToken, paramMark, 1))
			}
		}
		for _, s := range Normalize(marked) {
			original := strings.Replace(s, paramMark, paramToken, 1)
			if strings.Contains(s, paramToken) {
				return &RoleSetError{Code: CodeInvalidScope, Scope: original,
					message: fmt.Sprintf("parameterized scope '%s' contains multiple '<..>'", original)}
			}
			if strings.HasSuffix(s, "*"+paramMark) {
				return &RoleSetError{Code: CodeInvalidScope, Scope: original,
					message: fmt.Sprintf("parameterized scope '%s' ends with '*<..>' which implies an ambiguous kleene", original)}
			}
		}
	}
	return findCycle(buildExpander(roles, false))
}

// findCycle runs a depth-first search over role dependencies in role
// order. A role depends on every role reached by one of its grants, with
// "<..>" instantiated as "*" (the worst case).
func findCycle(e *Expander) error {
	deps := func(i int) []int {
		role := &e.roles[i]
		var grants []string
		grants = append(grants, role.fixed...)
		inst := make([]string, 0, len(role.paramed))
		for _, g := range role.paramed {
			inst = append(inst, g.instantiate("*"))
		}
		grants = append(grants, Normalize(inst)...)
		var out []int
		seen := map[int]bool{}
		var reaches []reach
		for _, s := range grants {
			reaches = e.reached(s, reaches[:0])
			// Taskcluster collects the reached rule indexes as a sorted
			// scope set of decimal strings; keep that order so the same
			// cycle is reported.
			names := make([]string, 0, len(reaches))
			for _, r := range reaches {
				names = append(names, strconv.Itoa(r.idx))
			}
			for _, name := range Normalize(names) {
				idx, _ := strconv.Atoi(name)
				if !seen[idx] {
					seen[idx] = true
					out = append(out, idx)
				}
			}
		}
		return out
	}

	done := make([]bool, len(e.roles))
	onStack := make([]bool, len(e.roles))
	// visited records every role entered, in order, and is never popped:
	// Taskcluster reports the cycle as everything entered since the
	// repeated role, which can include finished side branches.
	var visited []int
	var visit func(i int) error
	visit = func(i int) error {
		if done[i] {
			return nil
		}
		if onStack[i] {
			start := slices.Index(visited, i)
			cycle := make([]string, 0, len(visited)-start+1)
			for _, j := range visited[start:] {
				cycle = append(cycle, e.roles[j].pattern)
			}
			cycle = append(cycle, e.roles[i].pattern)
			return &RoleSetError{Code: CodeDependencyCycle, Cycle: cycle,
				message: "Roles may not contain dependency cycles, found: '" + strings.Join(cycle, "' -> '") + "'"}
		}
		onStack[i] = true
		visited = append(visited, i)
		for _, d := range deps(i) {
			if err := visit(d); err != nil {
				return err
			}
		}
		done[i] = true
		return nil
	}
	for i := range e.roles {
		if err := visit(i); err != nil {
			return err
		}
	}
	return nil
}
