package authapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/apitest"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/authapi"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestWebsocktunnelToken: auth.websocktunnelToken signs a token for the
// audience and tunnel client asked, valid 96 hours (from 15 minutes
// before), which a tunnel with the same secret accepts; it takes
// auth:websocktunnel-token:<wstAudience>/<wstClient>.
func TestWebsocktunnelToken(t *testing.T) {
	t.Parallel()
	secret := []byte("the tunnel's secret")
	srv := apitest.Start(t, apitest.Options{Routes: func(s *apitest.Server) []api.Route {
		sec := s.Security
		return authapi.Routes(authapi.Deps{Store: s.Store, Sealer: sec.Sealer, Clients: sec.Clients, IsStatic: sec.Clients.IsStatic,
			Roles: sec.Roles, Authenticator: sec.Authenticator, Caller: sec.Authorizer.Caller, Logger: s.Logger, TunnelSecret: secret})
	}})
	ctx := context.Background()
	get := func(c *tcclient.Client, path string) (*tcclient.WebsocktunnelToken, error) {
		aud, client, _ := strings.Cut(strings.TrimPrefix(path, "/websocktunnel/"), "/")
		return c.WebsocktunnelToken(ctx, aud, client)
	}
	before := time.Now().Truncate(time.Second)
	out, err := get(srv.Root, "/websocktunnel/hopper/workers.w-1")
	require.NoError(t, err)
	require.Equal(t, "hopper", out.WstAudience)
	require.Equal(t, "workers.w-1", out.WstClient)
	require.WithinDuration(t, before.Add(96*time.Hour), out.Expires.Time, time.Minute)
	tok := out.Token
	require.NoError(t, auth.VerifyTunnelToken(secret, tok, "workers.w-1", "hopper", time.Now()))
	require.Error(t, auth.VerifyTunnelToken(secret, tok, "workers.w-2", "hopper", time.Now()))

	cl, err := srv.Root.CreateClient(ctx, "tunnel-user", &tcclient.ClientRequest{Expires: tcclient.NewTime(time.Now().Add(time.Hour)),
		Description: "d", Scopes: []string{"auth:websocktunnel-token:hopper/workers.*"}})
	require.NoError(t, err)
	user := srv.Client("tunnel-user", cl.AccessToken)
	_, err = get(user, "/websocktunnel/hopper/workers.w-9")
	require.NoError(t, err)
	_, err = get(user, "/websocktunnel/elsewhere/workers.w-9")
	require.Equal(t, http.StatusForbidden, tcclient.StatusCode(err), "%v", err)
	_, err = get(srv.Client("", ""), "/websocktunnel/hopper/workers.w-9")
	require.Equal(t, http.StatusForbidden, tcclient.StatusCode(err), "%v", err)
	_, err = get(srv.Root, "/websocktunnel/hopper/bad*client")
	require.Equal(t, http.StatusBadRequest, tcclient.StatusCode(err), "%v", err)
}
