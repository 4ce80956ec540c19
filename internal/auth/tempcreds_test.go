package auth

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/jsvalue"
	"github.com/stretchr/testify/require"
)

type tempCredVector struct {
	Name              string   `json:"name"`
	Issuer            string   `json:"issuer"`
	IssuerAccessToken string   `json:"issuerAccessToken"`
	ClientID          string   `json:"clientId"`
	AccessToken       string   `json:"accessToken"`
	Certificate       string   `json:"certificate"`
	Named             bool     `json:"named"`
	Seed              string   `json:"seed"`
	Start             int64    `json:"start"`
	Expiry            int64    `json:"expiry"`
	Scopes            []string `json:"scopes"`
	Signature         string   `json:"signature"`
}

func loadTempCredVectors(t *testing.T) []tempCredVector {
	t.Helper()
	raw, err := os.ReadFile("testdata/tempcreds.json")
	require.NoError(t, err)
	var v []tempCredVector
	require.NoError(t, json.Unmarshal(raw, &v))
	require.NotEmpty(t, v)
	return v
}

// TestVectorTemporaryCredentials recreates what taskcluster-client's
// createTemporaryCredentials produced, from the same seed.
func TestVectorTemporaryCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range loadTempCredVectors(t) {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			name := ""
			if tc.Named {
				name = tc.ClientID
			}
			got, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{
				ClientID: name,
				Start:    time.UnixMilli(tc.Start),
				Expiry:   time.UnixMilli(tc.Expiry),
				Scopes:   tc.Scopes,
				Issuer:   Credentials{ClientID: tc.Issuer, AccessToken: tc.IssuerAccessToken},
				Seed:     tc.Seed,
			})
			require.NoError(t, err)
			require.Equal(t, tc.ClientID, got.ClientID)
			require.Equal(t, tc.AccessToken, got.AccessToken)
			require.Len(t, got.AccessToken, 43)
			if len(tc.Scopes) > 0 {
				require.Equal(t, tc.Certificate, got.Certificate)
				return
			}
			// Empty scopes: the JS client signs "scopes:\n", hopper (like
			// Taskcluster and the Go client) signs "scopes:".
			var cert Certificate
			require.NoError(t, json.Unmarshal([]byte(got.Certificate), &cert))
			require.NotEqual(t, tc.Signature, cert.Signature)
			require.Equal(t, tc.Certificate, strings.Replace(got.Certificate, cert.Signature, tc.Signature, 1))
			issuer := ""
			if tc.Named {
				issuer = tc.Issuer
			}
			text := SignatureString(name, issuer, tc.Seed, jsvalue.NumberString(float64(tc.Start)), jsvalue.NumberString(float64(tc.Expiry)), nil)
			require.Equal(t, tc.Signature, CertificateSignature(tc.IssuerAccessToken, text+"\n"))
			require.Equal(t, cert.Signature, CertificateSignature(tc.IssuerAccessToken, text))
		})
	}
}

// TestSpecTemporaryCredentials covers vectors T1–T4 of
// docs/contract/auth.md §2.7.
func TestSpecTemporaryCredentials(t *testing.T) {
	t.Parallel()
	t1Issuer := Credentials{ClientID: "def/ghi@XXX", AccessToken: "tokenABCDEFGH"}
	t1 := TemporaryCredentialsOptions{
		Start: time.UnixMilli(1438964811744), Expiry: time.UnixMilli(1439051211744),
		Scopes: []string{"scope/asd:fhjdf/X", "scope/asd:fhjdf/XYZ*"}, Issuer: t1Issuer,
		Seed: "JYR4wzMCTG6XeDS2cDUCMwH0RFUXGfQjK7LgqD-e6lSQ",
	}
	got, err := CreateTemporaryCredentials(t1)
	require.NoError(t, err)
	require.Equal(t, Credentials{
		ClientID:    "def/ghi@XXX",
		AccessToken: "R4OVHWpIvy6KsqS4AWE51QwbvgLvsstS6e6UW8IfHUY",
		Certificate: `{"version":1,"scopes":["scope/asd:fhjdf/X","scope/asd:fhjdf/XYZ*"],"start":1438964811744,"expiry":1439051211744,"seed":"JYR4wzMCTG6XeDS2cDUCMwH0RFUXGfQjK7LgqD-e6lSQ","signature":"45AlB/hKZZZz4Tf3NaidutasfgBnr4t2AxwBiGDQF9Q="}`,
	}, got)

	t2 := t1
	t2.ClientID = "abc/def/ghi"
	got, err = CreateTemporaryCredentials(t2)
	require.NoError(t, err)
	require.Equal(t, "abc/def/ghi", got.ClientID)
	require.Equal(t, "R4OVHWpIvy6KsqS4AWE51QwbvgLvsstS6e6UW8IfHUY", got.AccessToken)
	require.Equal(t, `{"version":1,"scopes":["scope/asd:fhjdf/X","scope/asd:fhjdf/XYZ*"],"start":1438964811744,"expiry":1439051211744,"seed":"JYR4wzMCTG6XeDS2cDUCMwH0RFUXGfQjK7LgqD-e6lSQ","signature":"nNEaLtZMiw627NuDbF5Z8HDFc57MGWCptXBQSYNFgBk=","issuer":"def/ghi@XXX"}`, got.Certificate)

	root := Credentials{ClientID: "static/hopper/root", AccessToken: "rootAccessTokenRootAccessToken0123456789abcd"}
	t3 := TemporaryCredentialsOptions{
		ClientID: "task-client/abc", Start: time.UnixMilli(1700000000000), Expiry: time.UnixMilli(1700003600000),
		Scopes: []string{"queue:create-artifact:abc/0", "secrets:get:x"}, Issuer: root,
		Seed: "aaaaaaaaQaaaaaaaaaaaaQbbbbbbbbQbbbbbbbbbbbbQ",
	}
	require.Equal(t,
		"version:1\nclientId:task-client/abc\nissuer:static/hopper/root\nseed:aaaaaaaaQaaaaaaaaaaaaQbbbbbbbbQbbbbbbbbbbbbQ\nstart:1700000000000\nexpiry:1700003600000\nscopes:\nqueue:create-artifact:abc/0\nsecrets:get:x",
		SignatureString(t3.ClientID, root.ClientID, t3.Seed, "1700000000000", "1700003600000", t3.Scopes))
	got, err = CreateTemporaryCredentials(t3)
	require.NoError(t, err)
	require.Equal(t, Credentials{
		ClientID:    "task-client/abc",
		AccessToken: "wKR5KEExRTlBtaO-tm75uZN9x9tS-41Cynzgm--Fb70",
		Certificate: `{"version":1,"scopes":["queue:create-artifact:abc/0","secrets:get:x"],"start":1700000000000,"expiry":1700003600000,"seed":"aaaaaaaaQaaaaaaaaaaaaQbbbbbbbbQbbbbbbbbbbbbQ","signature":"9RyRqaptcPnRGr24QzM1/4VMWjMS9PyXUyGXMp9N9hA=","issuer":"static/hopper/root"}`,
	}, got)

	t4 := t3
	t4.ClientID = ""
	t4.Scopes = nil
	got, err = CreateTemporaryCredentials(t4)
	require.NoError(t, err)
	var cert Certificate
	require.NoError(t, json.Unmarshal([]byte(got.Certificate), &cert))
	require.Equal(t, "8Be0jqqCQSGkWWVMPw58uFqLTpmPo4ZuMY2s0wOSJk8=", cert.Signature)
	require.Contains(t, got.Certificate, `"scopes":[]`)
	text := SignatureString("", "", t4.Seed, "1700000000000", "1700003600000", nil)
	require.Equal(t, "a1mFLJceZWZHLlEVrgelgkieCQPewKrqWBZEloL65C0=", CertificateSignature(root.AccessToken, text+"\n"))
}

func TestCreateTemporaryCredentialsErrors(t *testing.T) {
	t.Parallel()
	issuer := Credentials{ClientID: "i", AccessToken: "tok"}
	now := time.Unix(1700000000, 0)
	tests := []struct {
		name string
		opts TemporaryCredentialsOptions
	}{
		{"no issuer", TemporaryCredentialsOptions{Start: now, Expiry: now.Add(time.Hour)}},
		{"temporary issuer", TemporaryCredentialsOptions{Start: now, Expiry: now.Add(time.Hour), Issuer: Credentials{ClientID: "i", AccessToken: "t", Certificate: "{}"}}},
		{"no expiry", TemporaryCredentialsOptions{Start: now, Issuer: issuer}},
		{"too long", TemporaryCredentialsOptions{Start: now, Expiry: now.Add(MaxTemporaryCredentialsSpan + time.Millisecond), Issuer: issuer}},
		{"name equals issuer", TemporaryCredentialsOptions{ClientID: "i", Start: now, Expiry: now.Add(time.Hour), Issuer: issuer}},
		{"invalid scope", TemporaryCredentialsOptions{Start: now, Expiry: now.Add(time.Hour), Issuer: issuer, Scopes: []string{"a\nb"}}},
		{"bad seed", TemporaryCredentialsOptions{Start: now, Expiry: now.Add(time.Hour), Issuer: issuer, Seed: "short"}},
	}
	for _, tt := range tests {
		_, err := CreateTemporaryCredentials(tt.opts)
		require.Error(t, err, tt.name)
	}
	got, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{Start: now, Expiry: now.Add(MaxTemporaryCredentialsSpan), Issuer: issuer})
	require.NoError(t, err)
	var cert Certificate
	require.NoError(t, json.Unmarshal([]byte(got.Certificate), &cert))
	require.Len(t, cert.Seed, 44)
	other, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{Start: now, Expiry: now.Add(time.Hour), Issuer: issuer})
	require.NoError(t, err)
	require.NotEqual(t, got.AccessToken, other.AccessToken, "random seeds")
}

func TestTaskCredentials(t *testing.T) {
	t.Parallel()
	var vector tempCredVector
	for _, v := range loadTempCredVectors(t) {
		if v.Name == "named task credentials" {
			vector = v
		}
	}
	require.NotEmpty(t, vector.Name)
	got, err := TaskCredentials(TaskCredentialsOptions{
		TaskID: "abc", RunID: 0, WorkerGroup: "g", WorkerID: "w",
		TakenUntil: time.UnixMilli(vector.Expiry), TaskScopes: []string{"secrets:get:x"},
		Now:    time.UnixMilli(vector.Start),
		Issuer: Credentials{ClientID: vector.Issuer, AccessToken: vector.IssuerAccessToken},
		Seed:   vector.Seed,
	})
	require.NoError(t, err)
	require.Equal(t, Credentials{ClientID: vector.ClientID, AccessToken: vector.AccessToken, Certificate: vector.Certificate}, got)

	whole, err := TaskCredentials(TaskCredentialsOptions{
		TaskID: "fN1SbArXTPSVFNUvaOlinQ", RunID: 3, WorkerGroup: "us-east-1", WorkerID: "i-123",
		TakenUntil: time.Unix(1700001200, 0), Now: time.Unix(1700000000, 0),
		Issuer: Credentials{ClientID: "static/taskcluster/queue", AccessToken: "q"},
	})
	require.NoError(t, err)
	require.Equal(t, "task-client/fN1SbArXTPSVFNUvaOlinQ/3/on/us-east-1/i-123/until/1700001200", whole.ClientID)
	var cert Certificate
	require.NoError(t, json.Unmarshal([]byte(whole.Certificate), &cert))
	require.Equal(t, []string{"queue:reclaim-task:fN1SbArXTPSVFNUvaOlinQ/3", "queue:resolve-task:fN1SbArXTPSVFNUvaOlinQ/3", "queue:create-artifact:fN1SbArXTPSVFNUvaOlinQ/3"}, cert.Scopes)
	require.Equal(t, int64(1700001200000), cert.Expiry)
	require.Equal(t, "static/taskcluster/queue", cert.Issuer)
}
