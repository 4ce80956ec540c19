package tcclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// IDToken is createIdToken's reply: a signed OpenID token of a run, its
// subject and when it expires (with the run's claim).
type IDToken struct {
	Token   string `json:"token"`
	Subject string `json:"subject"`
	Expires Time   `json:"expires"`
}

// CreateIDToken asks hopper for an identity token of the run, for an
// audience (docs/identity.md). Only the run's own credentials get one,
// while it runs, with the scope auth:create-id-token:<audience>.
// A subject, if given, must be the run's, or the call is refused.
func (c *Client) CreateIDToken(ctx context.Context, taskID string, runID int, audience string, subject ...string) (*IDToken, error) {
	var out IDToken
	path := "/task/" + url.PathEscape(taskID) + "/runs/" + strconv.Itoa(runID) + "/id-token"
	in := map[string]string{"audience": audience}
	if len(subject) > 0 {
		in["subject"] = subject[0]
	}
	if err := c.doAuth(ctx, http.MethodPost, path, nil, in, &out); err != nil {
		return nil, fmt.Errorf("asking for an identity token of %s/%d for %s: %w", taskID, runID, audience, err)
	}
	return &out, nil
}

// AWSS3Credentials are awsS3Credentials' reply.
type AWSS3Credentials struct {
	Credentials struct {
		AccessKeyID     string `json:"accessKeyId"`
		SecretAccessKey string `json:"secretAccessKey"`
		SessionToken    string `json:"sessionToken"`
	} `json:"credentials"`
	Expires Time `json:"expires"`
}

// AWSS3Credentials asks for temporary S3 credentials for a bucket and
// prefix at a level (read-only or read-write), as Taskcluster's
// awsS3Credentials.
func (c *Client) AWSS3Credentials(ctx context.Context, level, bucket, prefix string) (*AWSS3Credentials, error) {
	var out AWSS3Credentials
	segments := strings.Split(prefix, "/")
	for i, s := range segments {
		segments[i] = url.PathEscape(s)
	}
	path := "/aws/s3/" + url.PathEscape(level) + "/" + url.PathEscape(bucket) + "/" + strings.Join(segments, "/")
	if err := c.doAuth(ctx, http.MethodGet, path, nil, nil, &out); err != nil {
		return nil, fmt.Errorf("asking for %s credentials for s3://%s/%s: %w", level, bucket, prefix, err)
	}
	return &out, nil
}

// DoAuth calls the Auth API as Do calls the queue's: method and path
// relative to the Auth API's base URL, JSON in and out.
func (c *Client) DoAuth(ctx context.Context, method, path string, query url.Values, in, out any) error {
	return c.doAuth(ctx, method, path, query, in, out)
}
