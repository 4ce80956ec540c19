package tcclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// purgeCacheBase is the Purge-Cache API's base URL.
func (c *Client) purgeCacheBase() string {
	return strings.TrimRight(c.RootURL, "/") + "/api/purge-cache/v1"
}

// PurgeRequest is one open purge request: caches named CacheName of the
// worker pool created before Before are to be emptied.
type PurgeRequest struct {
	ProvisionerID string `json:"provisionerId"`
	WorkerType    string `json:"workerType"`
	CacheName     string `json:"cacheName"`
	Before        Time   `json:"before"`
}

// PurgeCache asks the workers of workerPoolID (<provisionerId>/<workerType>)
// to empty their caches named cacheName.
func (c *Client) PurgeCache(ctx context.Context, workerPoolID, cacheName string) error {
	in := map[string]string{"cacheName": cacheName}
	if _, err := c.doAt(ctx, c.purgeCacheBase(), http.MethodPost, "/purge-cache/"+EscapePathParam(workerPoolID), nil, in, nil); err != nil {
		return fmt.Errorf("purging cache %s of %s: %w", cacheName, workerPoolID, err)
	}
	return nil
}

// PurgeRequests lists the open purge requests of a worker pool made at or
// after since (zero: all of them).
func (c *Client) PurgeRequests(ctx context.Context, workerPoolID string, since time.Time) ([]PurgeRequest, error) {
	var q url.Values
	if !since.IsZero() {
		q = url.Values{"since": {NewTime(since).String()}}
	}
	var out struct {
		Requests []PurgeRequest `json:"requests"`
	}
	if _, err := c.doAt(ctx, c.purgeCacheBase(), http.MethodGet, "/purge-cache/"+EscapePathParam(workerPoolID), q, nil, &out); err != nil {
		return nil, fmt.Errorf("listing purge requests of %s: %w", workerPoolID, err)
	}
	return out.Requests, nil
}
