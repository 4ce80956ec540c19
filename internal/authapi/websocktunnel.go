package authapi

import (
	"net/http"
	"regexp"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/queue"
)

// websocktunnelToken's URL parameters (Taskcluster's patterns).
var (
	wstAudiencePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,38}$`)
	wstClientPattern   = regexp.MustCompile(`^[a-zA-Z0-9_~.%-]+$`)
)

// websocktunnelRoute is auth.websocktunnelToken: a JWT with which a worker
// registers with a websocktunnel server (hopper's own, internal/tunnel,
// honours audience tunnel.Audience).
func (h *handlers) websocktunnelRoute(p func(...string) []string) api.Route {
	return api.Route{Name: "websocktunnelToken", Method: http.MethodGet, Paths: p("/websocktunnel/{wstAudience}/{wstClient}"),
		Scopes: api.Scope("auth:websocktunnel-token:<wstAudience>/<wstClient>"), EarlyScopes: true, Handle: h.websocktunnelToken}
}

type websocktunnelTokenReply struct {
	WstClient   string     `json:"wstClient"`
	WstAudience string     `json:"wstAudience"`
	Token       string     `json:"token"`
	Expires     queue.Time `json:"expires"`
}

func (h *handlers) websocktunnelToken(c *api.Call) (any, error) {
	audience, err := param(c, "wstAudience", wstAudiencePattern)
	if err != nil {
		return nil, err
	}
	client, err := param(c, "wstClient", wstClientPattern)
	if err != nil {
		return nil, err
	}
	if len(h.TunnelSecret) == 0 {
		return nil, api.Errorf(api.CodeResourceNotFound, "this deployment has no websocktunnel")
	}
	who, err := h.Caller(c)
	if err != nil {
		return nil, err
	}
	now := c.Now.Truncate(time.Second)
	expires := now.Add(auth.TunnelTokenLifetime)
	token := auth.SignTunnelToken(h.TunnelSecret, auth.TunnelClaims{TunnelID: client, Audience: audience, Subject: who.ClientID,
		IssuedAt: now.Unix(), Expires: expires.Unix(), NotBefore: now.Add(-auth.TunnelTokenDrift).Unix(), Issuer: "taskcluster-auth"})
	return websocktunnelTokenReply{WstClient: client, WstAudience: audience, Token: token, Expires: queue.NewTime(expires)}, nil
}
