package auth

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func roleSet(pairs ...any) []Role {
	var roles []Role
	for i := 0; i < len(pairs); i += 2 {
		roles = append(roles, Role{RoleID: pairs[i].(string), Scopes: pairs[i+1].([]string)})
	}
	return roles
}

// TestExpandSpecVectors runs the role-expansion table of
// docs/contract/auth.md §3.10.
func TestExpandSpecVectors(t *testing.T) {
	t.Parallel()
	r1 := roleSet(
		"group:admins", []string{"admin-scope-1", "admin-scope-2", "assume:group:devs"},
		"group:devs", []string{"dev-scope"},
	)
	r2 := roleSet("project-admin:*", []string{"auth:create-role:project-<..>/*", "secrets:get:project/<..>/*", "plain-scope"})
	repo := roleSet("repo:github.com/*", []string{"secrets:get:github/<..>/repo-secrets"})
	chained := roleSet("a*", []string{"assume:b<..>"}, "bx", []string{"got-bx"}, "b*", []string{"b-star:<..>"})
	both := roleSet("a", []string{"x"}, "a*", []string{"y"})
	literal := roleSet("literal", []string{"x:<..>"})

	tests := []struct {
		name  string
		roles []Role
		input []string
		want  []string
	}{
		{"R1 admins", r1, []string{"assume:group:admins", "my-scope"}, []string{"admin-scope-1", "admin-scope-2", "assume:group:admins", "assume:group:devs", "dev-scope", "my-scope"}},
		{"R1 group star", r1, []string{"assume:group:*"}, []string{"admin-scope-1", "admin-scope-2", "assume:group:*", "dev-scope"}},
		{"R1 dev star", r1, []string{"assume:group:dev*"}, []string{"assume:group:dev*", "dev-scope"}},
		{"R1 no prefix match", r1, []string{"assume:group:devsX"}, []string{"assume:group:devsX"}},
		{"R1 assume star", r1, []string{"assume*"}, []string{"admin-scope-1", "admin-scope-2", "assume*", "dev-scope"}},
		{"R1 a star", r1, []string{"a*"}, []string{"a*", "dev-scope"}},
		{"R1 assume colon", r1, []string{"assume:"}, []string{"assume:"}},
		{"R1 star", r1, []string{"*"}, []string{"*"}},
		{"R1 empty", r1, nil, []string{}},
		{"R2 zap", r2, []string{"assume:project-admin:zap"}, []string{"assume:project-admin:zap", "auth:create-role:project-zap/*", "plain-scope", "secrets:get:project/zap/*"}},
		{"R2 ops star", r2, []string{"assume:project-admin:ops*"}, []string{"assume:project-admin:ops*", "auth:create-role:project-ops*", "plain-scope", "secrets:get:project/ops*"}},
		{"R2 empty param", r2, []string{"assume:project-admin:"}, []string{"assume:project-admin:", "auth:create-role:project-/*", "plain-scope", "secrets:get:project//*"}},
		{"R2 prefix star", r2, []string{"assume:project-*"}, []string{"assume:project-*", "auth:create-role:project-*", "plain-scope", "secrets:get:project/*"}},
		{"R2 no colon", r2, []string{"assume:project-admin"}, []string{"assume:project-admin"}},
		{"repo", repo, []string{"assume:repo:github.com/mozilla/gecko"}, []string{"assume:repo:github.com/mozilla/gecko", "secrets:get:github/mozilla/gecko/repo-secrets"}},
		{"repo star", repo, []string{"assume:repo:github.com/mozilla/*"}, []string{"assume:repo:github.com/mozilla/*", "secrets:get:github/mozilla/*"}},
		{"chained", chained, []string{"assume:ax"}, []string{"assume:ax", "assume:bx", "b-star:x", "got-bx"}},
		{"chained star", chained, []string{"assume:ax*"}, []string{"assume:ax*", "assume:bx*", "b-star:x*", "got-bx"}},
		{"exact and star roles", both, []string{"assume:a"}, []string{"assume:a", "x", "y"}},
		{"literal", literal, []string{"assume:literal"}, []string{"assume:literal", "x:<..>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, err := NewExpander(tt.roles)
			require.NoError(t, err)
			require.Equal(t, tt.want, e.Expand(tt.input))
			require.Equal(t, tt.want, naiveExpand(tt.roles, tt.input))
		})
	}
}

func TestExpandRoleAndNil(t *testing.T) {
	t.Parallel()
	e, err := NewExpander(roleSet("anonymous", []string{"queue:get-artifact:public/*", "auth:current-scopes"}))
	require.NoError(t, err)
	require.Equal(t, []string{"assume:anonymous", "auth:current-scopes", "queue:get-artifact:public/*"}, e.ExpandRole("anonymous"))
	input := []string{"b", "a", "a"}
	require.Equal(t, []string{"a", "b"}, (*Expander)(nil).Expand(input))
	require.Equal(t, []string{"b", "a", "a"}, input, "input untouched")
}

func TestValidateRoles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		roles []Role
		code  string
		msg   string
	}{
		{"self loop", roleSet("a", []string{"assume:a"}), CodeDependencyCycle, "Roles may not contain dependency cycles, found: 'assume:a' -> 'assume:a'"},
		{"two cycle", roleSet("a", []string{"assume:b"}, "b", []string{"assume:a"}), CodeDependencyCycle, "Roles may not contain dependency cycles, found: 'assume:a' -> 'assume:b' -> 'assume:a'"},
		{"grants star", roleSet("admin", []string{"*"}), CodeDependencyCycle, "Roles may not contain dependency cycles, found: 'assume:admin' -> 'assume:admin'"},
		{"grants assume star", roleSet("admin", []string{"assume:*"}), CodeDependencyCycle, "Roles may not contain dependency cycles, found: 'assume:admin' -> 'assume:admin'"},
		{"multiple params", roleSet("p*", []string{"x:<..>/<..>"}), CodeInvalidScope, "parameterized scope 'x:<..>/<..>' contains multiple '<..>'"},
		{"ambiguous kleene", roleSet("p*", []string{"x*<..>"}), CodeInvalidScope, "parameterized scope 'x*<..>' ends with '*<..>' which implies an ambiguous kleene"},
		{"star role reaching itself via param", roleSet("p*", []string{"assume:p<..>"}), CodeDependencyCycle, "Roles may not contain dependency cycles, found: 'assume:p*' -> 'assume:p*'"},
		{"three cycle through star", roleSet("a", []string{"assume:b1"}, "b*", []string{"assume:c"}, "c", []string{"assume:a"}), CodeDependencyCycle, "Roles may not contain dependency cycles, found: 'assume:a' -> 'assume:b*' -> 'assume:c' -> 'assume:a'"},
		{"scope errors precede cycles", roleSet("a", []string{"assume:a"}, "p*", []string{"x*<..>"}), CodeInvalidScope, "parameterized scope 'x*<..>' ends with '*<..>' which implies an ambiguous kleene"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateRoles(tt.roles)
			require.EqualError(t, err, tt.msg)
			var rerr *RoleSetError
			require.ErrorAs(t, err, &rerr)
			require.Equal(t, tt.code, rerr.Code)
			_, err = NewExpander(tt.roles)
			require.EqualError(t, err, tt.msg)
		})
	}

	accepted := [][]Role{
		roleSet("p*", []string{"x*<..>y"}),
		roleSet("literal", []string{"x:<..>/<..>", "y*<..>"}),
		roleSet("a", []string{"assume:b"}, "b", []string{"assume:c"}, "c", []string{"x"}),
		roleSet("a*", []string{"assume:b<..>"}, "bx", []string{"got-bx"}, "b*", []string{"b-star:<..>"}),
		nil,
	}
	for _, roles := range accepted {
		require.NoError(t, ValidateRoles(roles), "%v", roles)
	}
}

// naiveExpand is expand(S) straight from the definition in
// docs/contract/auth.md §3.7: repeat "add every scope granted by every
// role reached by a member" until nothing changes.
func naiveExpand(roles []Role, input []string) []string {
	set := map[string]bool{}
	for _, s := range input {
		set[s] = true
	}
	for changed := true; changed; {
		changed = false
		for s := range set {
			for _, r := range roles {
				for _, g := range naiveGrants(r, s) {
					if !set[g] {
						set[g] = true
						changed = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	return Normalize(out)
}

func naiveGrants(r Role, s string) []string {
	if !strings.HasSuffix(r.RoleID, "*") {
		if ScopeSatisfies(s, "assume:"+r.RoleID) {
			return r.Scopes
		}
		return nil
	}
	q := "assume:" + strings.TrimSuffix(r.RoleID, "*")
	var params []string
	if strings.HasPrefix(s, q) {
		params = append(params, s[len(q):])
	}
	if strings.HasSuffix(s, "*") && strings.HasPrefix(q, s[:len(s)-1]) {
		params = append(params, "*")
	}
	var out []string
	for _, param := range params {
		for _, g := range r.Scopes {
			before, after, found := strings.Cut(g, "<..>")
			switch {
			case !found:
				out = append(out, g)
			case strings.HasSuffix(param, "*"):
				out = append(out, before+param)
			default:
				out = append(out, before+param+after)
			}
		}
	}
	return out
}

// TestExpandMatchesNaive compares the precomputed expander with the
// definition on random role sets and inputs.
func TestExpandMatchesNaive(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", ":", "*", "<..>"}
	word := func(n int) string {
		var b strings.Builder
		for range rng.IntN(n + 1) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	scope := func() string {
		switch rng.IntN(4) {
		case 0:
			return word(3)
		case 1:
			return "assume" + word(2)
		default:
			return "assume:" + strings.ReplaceAll(word(3), "<..>", "")
		}
	}
	checked := 0
	for range 3000 {
		var roles []Role
		seen := map[string]bool{}
		for range rng.IntN(5) {
			id := strings.ReplaceAll(strings.ReplaceAll(word(3), "<..>", ""), "*", "")
			if rng.IntN(2) == 0 {
				id += "*"
			}
			if id == "" || seen[id] {
				continue
			}
			seen[id] = true
			var scopes []string
			for range rng.IntN(4) {
				scopes = append(scopes, scope())
			}
			roles = append(roles, Role{RoleID: id, Scopes: scopes})
		}
		e, err := NewExpander(roles)
		if err != nil {
			continue
		}
		checked++
		var input []string
		for range rng.IntN(4) {
			input = append(input, scope())
		}
		require.Equal(t, naiveExpand(roles, input), e.Expand(input), "roles %v input %q", roles, input)
	}
	require.Greater(t, checked, 1000, "enough valid random role sets")
}

func benchRoles(n int) []Role {
	roles := []Role{{RoleID: "anonymous", Scopes: []string{"queue:get-artifact:public/*", "queue:get-task:*", "queue:status:*", "auth:current-scopes"}}}
	for i := range n {
		roles = append(roles,
			Role{RoleID: fmt.Sprintf("project:p%d:admin", i), Scopes: []string{fmt.Sprintf("queue:create-task:project:p%d", i), fmt.Sprintf("assume:project:p%d:dev", i), fmt.Sprintf("assume:repo:github.com/org/p%d:*", i)}},
			Role{RoleID: fmt.Sprintf("project:p%d:dev", i), Scopes: []string{fmt.Sprintf("secrets:get:project/p%d/*", i), fmt.Sprintf("queue:route:index.p%d.*", i)}},
			Role{RoleID: fmt.Sprintf("repo:github.com/org/p%d:*", i), Scopes: []string{"queue:create-task:highest:proj/<..>", fmt.Sprintf("secrets:get:repo/p%d/<..>", i), "queue:scheduler-id:-"}},
		)
	}
	return roles
}

func BenchmarkExpandClient(b *testing.B) {
	e, err := NewExpander(benchRoles(300))
	require.NoError(b, err)
	scopes := []string{"assume:project:p17:admin", "assume:project:p42:dev", "queue:claim-work:proj/*", "assume:anonymous", "auth:create-client:task-client/*"}
	b.ReportAllocs()
	for b.Loop() {
		_ = e.Expand(scopes)
	}
}

func BenchmarkExpandStar(b *testing.B) {
	e, err := NewExpander(benchRoles(300))
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		_ = e.Expand([]string{"assume:project:*"})
	}
}

func BenchmarkNewExpander(b *testing.B) {
	roles := benchRoles(300)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewExpander(roles); err != nil {
			b.Fatal(err)
		}
	}
}

func TestExpandWithStar(t *testing.T) {
	t.Parallel()
	roles := roleSet("a", []string{"b", "assume:c"}, "c", []string{"d*"}, "p*", []string{"x:<..>"})
	e, err := NewExpander(roles)
	require.NoError(t, err)
	inputs := [][]string{{"*"}, {"assume:a", "*"}, {"z", "*", "*"}}
	for _, input := range inputs {
		require.Equal(t, []string{"*"}, e.Expand(input))
		require.Equal(t, naiveExpand(roles, input), e.Expand(input))
		require.Equal(t, []string{"*"}, (*Expander)(nil).Expand(input))
	}
}
