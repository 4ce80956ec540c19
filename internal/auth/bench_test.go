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
	a, _ := setupAuth(b)
	ctx := context.Background()
	res, err := a.Authenticate(ctx, req)
	require.NoError(b, err)
	require.Equal(b, wantClient, res.ClientID)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
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
	b.Run("temporary", func(b *testing.B) {
		creds, err := TaskCredentials(TaskCredentialsOptions{
			TaskID: "fN1SbArXTPSVFNUvaOlinQ", RunID: 0, WorkerGroup: "wg", WorkerID: "w1",
			TakenUntil: testNow.Add(20 * time.Minute), Now: testNow,
			TaskScopes: []string{"secrets:get:x/y", "queue:get-artifact:private/*"},
			Issuer:     Credentials{ClientID: rootID, AccessToken: rootToken},
		})
		require.NoError(b, err)
		req := signedRequest(b, creds, mustExt(b, creds.Certificate, nil), "POST", statusPath, nil, "", false)
		benchmarkAuthenticate(b, req, creds.ClientID)
	})
	b.Run("anonymous", func(b *testing.B) {
		benchmarkAuthenticate(b, Request{Method: "GET", RequestURI: statusPath}, "")
	})
}
