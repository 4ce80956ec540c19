package auth

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/hopper-ci/hopper/internal/jsvalue"
	"github.com/stretchr/testify/require"
)

// scopeVectors mirrors testdata/scopes.json, produced by testdata/gen with
// taskcluster-lib-scopes 11.0.0.
type scopeVectors struct {
	Satisfaction []struct {
		Held      []string        `json:"held"`
		Required  json.RawMessage `json:"required"`
		Satisfied bool            `json:"satisfied"`
		Missing   json.RawMessage `json:"missing"`
		Note      string          `json:"note"`
	} `json:"satisfaction"`
	ValidScopes []struct {
		Scope string `json:"scope"`
		Valid bool   `json:"valid"`
	} `json:"validScopes"`
	ExprValidity []struct {
		Expr  json.RawMessage `json:"expr"`
		Valid bool            `json:"valid"`
	} `json:"exprValidity"`
	SortNormalize []struct {
		Input      []string `json:"input"`
		Sorted     []string `json:"sorted"`
		Normalized []string `json:"normalized"`
	} `json:"sortNormalize"`
	Merges []struct {
		A      []string `json:"a"`
		B      []string `json:"b"`
		Merged []string `json:"merged"`
	} `json:"merges"`
	Stringify []struct {
		Value json.RawMessage `json:"value"`
		JSON  string          `json:"json"`
	} `json:"stringify"`
}

func loadScopeVectors(t *testing.T) scopeVectors {
	t.Helper()
	raw, err := os.ReadFile("testdata/scopes.json")
	require.NoError(t, err)
	var v scopeVectors
	require.NoError(t, json.Unmarshal(raw, &v))
	require.NotEmpty(t, v.Satisfaction)
	return v
}

func TestVectorSatisfaction(t *testing.T) {
	t.Parallel()
	v := loadScopeVectors(t)
	spec := 0
	for i, tc := range v.Satisfaction {
		if tc.Note == "spec 3.9" {
			spec++
		}
		expr, err := ParseExpr(tc.Required)
		require.NoError(t, err, "case %d", i)
		held := tc.Held
		if held == nil {
			held = []string{}
		}
		require.Equal(t, tc.Satisfied, expr.SatisfiedBy(held), "case %d: %v vs %s", i, held, tc.Required)
		missing, lacking := expr.Missing(held)
		if string(tc.Missing) == "null" {
			require.False(t, lacking, "case %d: %v vs %s", i, held, tc.Required)
		} else {
			require.True(t, lacking, "case %d: %v vs %s", i, held, tc.Required)
			got, err := json.Marshal(missing)
			require.NoError(t, err)
			require.JSONEq(t, string(tc.Missing), string(got), "case %d: %v vs %s", i, held, tc.Required)
		}
		// A missing expression is exactly a non-satisfied one.
		require.Equal(t, !tc.Satisfied, lacking, "case %d", i)
	}
	require.Equal(t, 24, spec, "all §3.9 rows are in the vectors")
}

func TestVectorValidity(t *testing.T) {
	t.Parallel()
	v := loadScopeVectors(t)
	for _, tc := range v.ValidScopes {
		require.Equal(t, tc.Valid, ValidScope(tc.Scope), "%q", tc.Scope)
	}
	for _, tc := range v.ExprValidity {
		_, err := ParseExpr(tc.Expr)
		require.Equal(t, tc.Valid, err == nil, "%s: %v", tc.Expr, err)
	}
}

func TestVectorSortNormalizeMerge(t *testing.T) {
	t.Parallel()
	v := loadScopeVectors(t)
	for _, tc := range v.SortNormalize {
		sorted := append([]string{}, tc.Input...)
		SortScopes(sorted)
		require.Equal(t, nonNilStrings(tc.Sorted), sorted, "sort %q", tc.Input)
		require.Equal(t, nonNilStrings(tc.Normalized), NormalizeSorted(sorted), "normalize %q", tc.Input)
		require.Equal(t, nonNilStrings(tc.Normalized), Normalize(tc.Input), "normalize %q", tc.Input)
	}
	for _, tc := range v.Merges {
		require.Equal(t, nonNilStrings(tc.Merged), Merge(tc.A, tc.B), "merge %q %q", tc.A, tc.B)
		require.Equal(t, nonNilStrings(tc.Merged), Merge(tc.B, tc.A), "merge %q %q", tc.B, tc.A)
	}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestVectorStringify(t *testing.T) {
	t.Parallel()
	for _, tc := range loadScopeVectors(t).Stringify {
		expr, err := ParseExpr(tc.Value)
		if err != nil {
			// Strings with characters outside scopes are still rendered.
			var s string
			require.NoError(t, json.Unmarshal(tc.Value, &s))
			expr = Scope(s)
		}
		if expr.Kind() == KindScope {
			require.Equal(t, expr.ScopeString(), expr.String())
			require.Equal(t, tc.JSON, jsvalue.QuoteJSON(expr.ScopeString()))
			continue
		}
		require.Equal(t, tc.JSON, expr.String())
	}
}

func TestScopeSpecExamples(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"*", "", "a*", "a", "a(", "aa", "ab", "b"}, sortedCopy([]string{"b", "a", "a*", "ab", "*", "", "aa", "a("}))
	require.Equal(t, []string{"*"}, Normalize([]string{"b", "a", "a*", "ab", "*", "", "aa", "a("}))
	require.Equal(t, []string{"a*", "b"}, Normalize([]string{"a", "a*", "ab", "b"}))
	require.Equal(t, []string{"a*", "b", "c", "d*"}, Merge([]string{"a*", "c"}, []string{"ab", "b", "c", "d*"}))
	require.True(t, ValidScope(""))
	require.False(t, ValidScope("a\tb"))
	require.False(t, ValidScope("é"))
	_, err := ParseExpr([]byte(`{"AnyOf":["a"],"AllOf":["b"]}`))
	require.Error(t, err)

	tests := []struct {
		held     string
		required string
		want     bool
	}{
		{"foo:**", "foo:*", true},
		{"foo:**", "foo:*x", true},
		{"foo:**", "foo:abc", false},
		{"a*b", "axb", false},
		{"a*b", "a*b", true},
		{"*", "", true},
		{"", "", true},
		{"", "a", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, ScopeSatisfies(tt.held, tt.required), "%q satisfies %q", tt.held, tt.required)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	SortScopes(out)
	return out
}

func TestExprJSONRoundTrip(t *testing.T) {
	t.Parallel()
	e := AllOf(Scope("a"), AnyOf(Scope("b"), AllOf()), AnyOf())
	raw, err := json.Marshal(e)
	require.NoError(t, err)
	require.Equal(t, `{"AllOf":["a",{"AnyOf":["b",{"AllOf":[]}]},{"AnyOf":[]}]}`, string(raw))
	var back Expr
	require.NoError(t, json.Unmarshal(raw, &back))
	require.True(t, e.Equal(back))
	require.False(t, e.Equal(AllOf(Scope("a"))))

	for _, bad := range []string{`5`, `null`, `["a"]`, `{}`, `{"OneOf":["a"]}`, `{"AllOf":"a"}`, `{"AllOf":[5]}`, `"a\tb"`, `"a" "b"`} {
		var x Expr
		require.Error(t, json.Unmarshal([]byte(bad), &x), bad)
	}
}

func TestInsufficientScopesMessage(t *testing.T) {
	t.Parallel()
	required := AllOfScopes("queue:get-artifact:private/build.log")
	missing, lacking := required.Missing([]string{"queue:get-artifact:public/*"})
	require.True(t, lacking)
	require.Equal(t,
		"Client ID tester does not have sufficient scopes and is missing the following scopes:\n\n```\nqueue:get-artifact:private/build.log\n```\n\nThis request requires the client to satisfy the following scope expression:\n\n```\n{\n  \"AllOf\": [\n    \"queue:get-artifact:private/build.log\"\n  ]\n}\n```",
		InsufficientScopesMessage("tester", true, required, missing))
	require.Equal(t,
		"This request requires Taskcluster credentials that satisfy the following scope expression:\n\n```\n{\n  \"AllOf\": [\n    \"queue:get-artifact:private/build.log\"\n  ]\n}\n```",
		InsufficientScopesMessage("", false, required, missing))

	nested := AllOf(AnyOf(Scope("a"), Scope("b")), Scope("c"))
	m, _ := nested.Missing(nil)
	err := &InsufficientScopesError{ClientID: "x", HasCredentials: true, Required: nested, Missing: m}
	require.Contains(t, err.Error(), "```\n{\n  \"AllOf\": [\n    {\n      \"AnyOf\": [\n        \"a\",\n        \"b\"\n      ]\n    },\n    \"c\"\n  ]\n}\n```")
}
