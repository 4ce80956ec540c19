package login_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/login"
)

func TestRegistrationsRefused(t *testing.T) {
	t.Parallel()
	for name, reg := range map[string]string{
		"no callback":         `{"clientId": "a", "redirectUri": [], "scope": ["x"]}`,
		"plain http callback": `{"clientId": "a", "redirectUri": ["http://site.example/cb"], "scope": ["x"]}`,
		"callback fragment":   `{"clientId": "a", "redirectUri": ["https://site.example/cb#x"], "scope": ["x"]}`,
		"no scope":            `{"clientId": "a", "redirectUri": ["https://site.example/cb"], "scope": []}`,
		"bad clientId":        `{"clientId": "a b", "redirectUri": ["https://site.example/cb"], "scope": ["x"]}`,
		"maxExpires too long": `{"clientId": "a", "redirectUri": ["https://site.example/cb"], "scope": ["x"], "maxExpires": "40 days"}`,
		"maxExpires unread":   `{"clientId": "a", "redirectUri": ["https://site.example/cb"], "scope": ["x"], "maxExpires": "soon"}`,
	} {
		_, err := login.ParseConfig([]byte(`{"providers": [], "registeredClients": [`+reg+`]}`), nil)
		require.Error(t, err, name)
	}
	_, err := login.ParseConfig([]byte(`{"registeredClients": [
		{"clientId": "a", "redirectUri": ["https://site.example/cb"], "scope": ["x"]},
		{"clientId": "a", "redirectUri": ["http://localhost:8080/cb"], "scope": ["x"]}]}`), nil)
	require.ErrorContains(t, err, "two registered clients")
}

func TestGrantLifetime(t *testing.T) {
	t.Parallel()
	r := login.Registration{ClientID: "a", MaxExpires: "2 days"}
	for asked, want := range map[string]time.Duration{
		"": 48 * time.Hour, "1 day": 24 * time.Hour, "3 days": 48 * time.Hour, "90m": 90 * time.Minute,
		"1 hour 30 minutes": 90 * time.Minute, "nonsense": 48 * time.Hour, "-1h": 48 * time.Hour,
	} {
		require.Equal(t, want, r.GrantLifetime(asked), asked)
	}
	require.Equal(t, login.DefaultMaxExpires, (&login.Registration{}).GrantLifetime(""))
}

func TestRegistrationScopes(t *testing.T) {
	t.Parallel()
	r := login.Registration{Scope: []string{"queue:rerun-task:*", "secrets:get:th/x"}, Whitelisted: true}
	require.NoError(t, r.CheckScopes([]string{"queue:rerun-task:abc"}))
	require.Error(t, r.CheckScopes([]string{"secrets:get:th/*"}))
	require.Error(t, r.CheckScopes(nil))
	require.True(t, r.SkipsConsent([]string{"secrets:get:th/x", "queue:rerun-task:*"}))
	require.False(t, r.SkipsConsent([]string{"queue:rerun-task:*"}))
	require.False(t, (&login.Registration{Scope: r.Scope}).SkipsConsent(r.Scope), "not whitelisted")
}

func TestIntersect(t *testing.T) {
	t.Parallel()
	tests := []struct{ held, wanted, want []string }{
		{[]string{"a:*"}, []string{"a:b", "c"}, []string{"a:b"}},
		{[]string{"a:b/1", "a:b/2", "c:d"}, []string{"a:b/*"}, []string{"a:b/1", "a:b/2"}},
		{[]string{"*"}, []string{"x", "y:*"}, []string{"x", "y:*"}},
		{[]string{"a"}, []string{"b"}, []string{}},
	}
	for _, tc := range tests {
		got := login.Intersect(tc.held, tc.wanted)
		if len(got) == 0 {
			got = []string{}
		}
		require.Equal(t, tc.want, got, "%v ∩ %v", tc.held, tc.wanted)
	}
}
