package tcclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

// InteractiveBaseURL returns the base URL of hopper's interactive API
// (the shells of interactive tasks) without a trailing slash.
func (c *Client) InteractiveBaseURL() string {
	return strings.TrimRight(c.RootURL, "/") + "/api/interactive/v1"
}

// DialInteractive opens the WebSocket at path below InteractiveBaseURL,
// the upgrade request signed with the client's credentials. A refusal is
// an *APIError with the server's status and Taskcluster's error body.
func (c *Client) DialInteractive(ctx context.Context, path string) (*websocket.Conn, error) {
	rawURL := c.InteractiveBaseURL() + path
	header := http.Header{}
	if c.Credentials != nil {
		auth, err := AuthorizationHeader(c.Credentials, c.AuthorizedScopes, http.MethodGet, rawURL)
		if err != nil {
			return nil, err
		}
		header.Set("Authorization", auth)
	}
	conn, resp, err := websocket.Dial(ctx, rawURL, &websocket.DialOptions{HTTPClient: c.HTTPClient, HTTPHeader: header})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			apiErr := &APIError{StatusCode: resp.StatusCode, Method: http.MethodGet, URL: rawURL}
			if resp.Body != nil {
				var body struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				}
				b, _ := io.ReadAll(resp.Body)
				if json.Unmarshal(b, &body) == nil {
					apiErr.Code, apiErr.Message = body.Code, body.Message
				}
			}
			return nil, apiErr
		}
		return nil, fmt.Errorf("connecting to %s: %w", rawURL, err)
	}
	return conn, nil
}

// OpenShell opens a shell in the running interactive task taskID (it
// needs interactive:open-shell:<taskQueueId>). Binary messages are the
// terminal's bytes, text messages an interactive.Control.
func (c *Client) OpenShell(ctx context.Context, taskID string) (*websocket.Conn, error) {
	return c.DialInteractive(ctx, "/task/"+EscapePathParam(taskID)+"/shell")
}

// RunPath is the path, below InteractiveBaseURL, of a run's worker routes.
func RunPath(taskID string, runID int) string {
	return "/task/" + EscapePathParam(taskID) + "/runs/" + strconv.Itoa(runID)
}

// WebsocktunnelToken is auth.websocktunnelToken's reply.
type WebsocktunnelToken struct {
	WstClient   string `json:"wstClient"`
	WstAudience string `json:"wstAudience"`
	Token       string `json:"token"`
	Expires     Time   `json:"expires"`
}

// WebsocktunnelToken asks auth.websocktunnelToken for a token with which
// tunnel client wstClient registers with the websocktunnel servers of
// wstAudience (hopper's: "hopper", at <root>/websocktunnel).
func (c *Client) WebsocktunnelToken(ctx context.Context, wstAudience, wstClient string) (*WebsocktunnelToken, error) {
	var out WebsocktunnelToken
	if err := c.doAuth(ctx, http.MethodGet, "/websocktunnel/"+EscapePathParam(wstAudience)+"/"+EscapePathParam(wstClient), nil, nil, &out); err != nil {
		return nil, fmt.Errorf("getting a websocktunnel token for %s/%s: %w", wstAudience, wstClient, err)
	}
	return &out, nil
}
