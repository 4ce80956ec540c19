package auth

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// benchmarkAuthenticate measures Authenticate on the same signed request
// over and over, as a worker's repeated calls with one claim's credentials
// (or a client's permanent credentials) look to the server.
func benchmarkAuthenticate(b *testing.B, req Request, wantClient string) {
	benchmarkAuthenticateCache(b, req, wantClient, false)
}

// benchmarkAuthenticateCache is benchmarkAuthenticate, optionally
// forgetting resolved credentials before every call (a credential's first
// use, such as a claim's first call).
func benchmarkAuthenticateCache(b *testing.B, req Request, wantClient string, forget bool) {
	a, _ := setupAuth(b)
	ctx := context.Background()
	res, err := a.Authenticate(ctx, req)
	require.NoError(b, err)
	require.Equal(b, wantClient, res.ClientID)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if forget {
			a.verified = newCredentialCache()
		}
		if _, err := a.Authenticate(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	tester := Credentials{ClientID: "tester", AccessToken: "no-secret"}
	b.Run("permanent", func(b *testing.B) {
		benchmarkAuthenticate(b, signedRequest(b, tester, "", "GET", statusPath, nil, "", false), "tester")
	})
	creds, err := TaskCredentials(TaskCredentialsOptions{
		TaskID: "fN1SbArXTPSVFNUvaOlinQ", RunID: 0, WorkerGroup: "wg", WorkerID: "w1",
		TakenUntil: testNow.Add(20 * time.Minute), Now: testNow,
		TaskScopes: []string{"secrets:get:x/y", "queue:get-artifact:private/*"},
		Issuer:     Credentials{ClientID: rootID, AccessToken: rootToken},
	})
	require.NoError(b, err)
	temporary := signedRequest(b, creds, mustExt(b, creds.Certificate, nil), "POST", statusPath, nil, "", false)
	b.Run("temporary", func(b *testing.B) {
		benchmarkAuthenticate(b, temporary, creds.ClientID)
	})
	b.Run("temporary-first-use", func(b *testing.B) {
		benchmarkAuthenticateCache(b, temporary, creds.ClientID, true)
	})
	b.Run("anonymous", func(b *testing.B) {
		benchmarkAuthenticate(b, Request{Method: "GET", RequestURI: statusPath}, "")
	})
}
