package tcclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// GithubDeliveryEvent is a stored webhook delivery's event (hopper's own
// github method deliveryEvent).
type GithubDeliveryEvent struct {
	Host       string          `json:"host"`
	DeliveryID string          `json:"deliveryId"`
	Forge      string          `json:"forge"`
	Event      string          `json:"event"`
	Body       json.RawMessage `json:"body"`
}

// GithubBaseURL returns the Github API base URL without a trailing slash.
func (c *Client) GithubBaseURL() string {
	return strings.TrimRight(c.RootURL, "/") + "/api/github/v1"
}

// GithubDeliveryEvent loads a stored delivery's event.
func (c *Client) GithubDeliveryEvent(ctx context.Context, host, deliveryID string) (*GithubDeliveryEvent, error) {
	var out GithubDeliveryEvent
	_, err := c.doAt(ctx, c.GithubBaseURL(), http.MethodGet, "/deliveries/"+EscapePathParam(host)+"/"+EscapePathParam(deliveryID)+"/event", nil, nil, &out)
	return &out, err
}

// GithubBuild is one build of the Github API's builds list.
type GithubBuild struct {
	Organization      string `json:"organization"`
	Repository        string `json:"repository"`
	SHA               string `json:"sha"`
	State             string `json:"state"`
	TaskGroupID       string `json:"taskGroupId"`
	EventType         string `json:"eventType"`
	EventID           string `json:"eventId"`
	PullRequestNumber int    `json:"pullRequestNumber,omitempty"`
	// Host and ForgeURL are hopper's: the forge, and the commit on it.
	Host     string `json:"host,omitempty"`
	ForgeURL string `json:"forgeUrl,omitempty"`
}

// GithubBuilds lists builds (query: organization, repository, sha,
// pullRequest, limit, continuationToken).
func (c *Client) GithubBuilds(ctx context.Context, query url.Values) ([]GithubBuild, string, error) {
	var out struct {
		Builds            []GithubBuild `json:"builds"`
		ContinuationToken string        `json:"continuationToken"`
	}
	_, err := c.doAt(ctx, c.GithubBaseURL(), http.MethodGet, "/builds", query, nil, &out)
	return out.Builds, out.ContinuationToken, err
}

// GithubDeliveryRecord is a delivery's record: what processing did and
// the whole error.
type GithubDeliveryRecord struct {
	Host       string `json:"host"`
	DeliveryID string `json:"deliveryId"`
	Forge      string `json:"forge"`
	Event      string `json:"event"`
	Repository string `json:"repository"`
	Received   string `json:"received"`
	State      string `json:"state"`
	Attempts   int    `json:"attempts"`
	Outcome    string `json:"outcome"`
	Error      string `json:"error"`
	ReplayOf   string `json:"replayOf,omitempty"`
}

// GithubFailedDeliveries lists one page of the deliveries that ended in
// an error (or wait for a retry after one), newest first (hopper only).
func (c *Client) GithubFailedDeliveries(ctx context.Context, query url.Values) ([]GithubDeliveryRecord, string, error) {
	var out struct {
		Deliveries        []GithubDeliveryRecord `json:"deliveries"`
		ContinuationToken string                 `json:"continuationToken"`
	}
	_, err := c.doAt(ctx, c.GithubBaseURL(), http.MethodGet, "/deliveries", query, nil, &out)
	return out.Deliveries, out.ContinuationToken, err
}
