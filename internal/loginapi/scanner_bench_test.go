package loginapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/loginapi"
	"github.com/hopper-ci/hopper/internal/server"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// BenchmarkScannerPass is one credential scanner pass over 10,000
// enabled clients of people, none of which exceeds its person (the
// steady state: every client is read, expanded and compared; nothing is
// written but the people). stored-roles: 2,500 people whose provider
// gave nothing to ask with (the scanner goes by their last sign-in's
// roles); github: 200 people who signed in through the local GitHub,
// each asked again (GET /user, /user/teams, /user/memberships/orgs on
// loopback) once per pass.
func BenchmarkScannerPass(b *testing.B) {
	for _, driver := range apitest.Drivers() {
		b.Run("stored-roles/"+driver, func(b *testing.B) { benchScan(b, driver, 2500, false) })
	}
	b.Run("github/sqlite", func(b *testing.B) { benchScan(b, "sqlite", 200, true) })
}

func benchScan(b *testing.B, driver string, people int, github bool) {
	const clients = 10000
	bb := setupGitHub(b, driver, false)
	ctx := b.Context()
	_, err := bb.s.Root.CreateRole(ctx, "gh-team:acme/builders", &tcclient.RoleRequest{Description: "team", Scopes: []string{"secrets:get:acme/*"}})
	require.NoError(b, err)
	now := bb.clock.Now()
	for i := range people {
		login := fmt.Sprintf("user%d", i)
		identity := fmt.Sprintf("gh/%d|%s", 1000+i, login)
		if github {
			bb.gh.Put(forgetestUser(int64(1000+i), login, "acme/builders"))
			bb.signIn(b, login)
		} else {
			require.NoError(b, bb.s.Store.PutLoginIdentity(ctx, store.LoginIdentity{Identity: identity, Provider: "gh",
				Roles: []string{"gh-team:acme/builders"}, Updated: now}))
		}
		for j := range clients / people {
			_, err := bb.s.Store.CreateClient(ctx, &store.Client{ClientID: fmt.Sprintf("%s/c%d", identity, j), AccessToken: "x",
				Scopes: []string{"secrets:get:acme/" + login}, Created: now, LastModified: now, Expires: now.Add(24 * time.Hour)}, nil)
			require.NoError(b, err)
		}
	}
	sc := &loginapi.Scanner{Server: bb.srv, Store: bb.s.Store, Roles: bb.s.Security.Roles, Holder: "bench", Actor: server.LoginClientID,
		Interval: time.Nanosecond, LeaseFor: time.Hour}
	b.ResetTimer()
	for range b.N {
		rep, err := sc.RunOnce(ctx)
		if err != nil || rep.Scanned != clients || rep.Disabled != 0 {
			b.Fatalf("pass: %+v %v", rep, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*clients), "µs/client")
}

// BenchmarkGitHubSignIn is a whole sign-in round trip through the local
// GitHub (Enterprise layout) on loopback: start, GitHub's authorize, the
// callback (code exchange with PKCE; GET /user, /user/teams,
// /user/memberships/orgs; the person and session on SQLite) and the
// console's credentials.
func BenchmarkGitHubSignIn(b *testing.B) {
	bb := setupGitHub(b, "sqlite", false)
	b.ResetTimer()
	for range b.N {
		c := bb.signIn(b, "alice")
		if status, _ := bb.credentials(b, c); status != http.StatusOK {
			b.Fatalf("credentials: %d", status)
		}
	}
}
