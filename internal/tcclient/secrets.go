package tcclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Secret is a secret of the Secrets service: a JSON object and its expiry.
type Secret struct {
	Secret  json.RawMessage `json:"secret"`
	Expires Time            `json:"expires"`
}

// ListSecretsResponse is one page of secret names.
type ListSecretsResponse struct {
	Secrets           []string `json:"secrets"`
	ContinuationToken string   `json:"continuationToken,omitempty"`
}

// SecretsBaseURL returns the Secrets API base URL without a trailing slash.
func (c *Client) SecretsBaseURL() string {
	return strings.TrimRight(c.RootURL, "/") + "/api/secrets/v1"
}

// secretPath is a secret's path; errors name the secret, never its value.
func secretPath(name string) string { return "/secret/" + EscapePathParam(name) }

// SetSecret creates or replaces a secret.
func (c *Client) SetSecret(ctx context.Context, name string, s *Secret) error {
	if _, err := c.doAt(ctx, c.SecretsBaseURL(), http.MethodPut, secretPath(name), nil, s, nil); err != nil {
		return fmt.Errorf("setting secret %s: %w", name, err)
	}
	return nil
}

// GetSecret reads a secret.
func (c *Client) GetSecret(ctx context.Context, name string) (*Secret, error) {
	var out Secret
	if _, err := c.doAt(ctx, c.SecretsBaseURL(), http.MethodGet, secretPath(name), nil, nil, &out); err != nil {
		return nil, fmt.Errorf("getting secret %s: %w", name, err)
	}
	return &out, nil
}

// RemoveSecret deletes a secret; removing a missing one succeeds.
func (c *Client) RemoveSecret(ctx context.Context, name string) error {
	if _, err := c.doAt(ctx, c.SecretsBaseURL(), http.MethodDelete, secretPath(name), nil, nil, nil); err != nil {
		return fmt.Errorf("removing secret %s: %w", name, err)
	}
	return nil
}

// ListSecrets returns one page of secret names.
func (c *Client) ListSecrets(ctx context.Context, opts ListOptions) (*ListSecretsResponse, error) {
	var out ListSecretsResponse
	if _, err := c.doAt(ctx, c.SecretsBaseURL(), http.MethodGet, "/secrets", listQuery(opts), nil, &out); err != nil {
		return nil, fmt.Errorf("listing secrets: %w", err)
	}
	return &out, nil
}

// AllSecrets lists the names of every secret, following continuation
// tokens.
func (c *Client) AllSecrets(ctx context.Context) ([]string, error) {
	return allPages("secrets", func(opts ListOptions) ([]string, string, error) {
		page, err := c.ListSecrets(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return page.Secrets, page.ContinuationToken, nil
	})
}
