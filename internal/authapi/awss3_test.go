package authapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/authapi"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// s3As is an S3 client of m with temporary credentials.
func s3As(t testing.TB, m *e2e.MinIO, id, secret, session string) *minio.Client {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(m.URL, "http://"), &minio.Options{Creds: credentials.NewStaticV4(id, secret, session), Region: "us-east-1"})
	require.NoError(t, err)
	return c
}

func putObject(c *minio.Client, bucket, key string) error {
	_, err := c.PutObject(context.Background(), bucket, key, bytes.NewReader([]byte(key)), int64(len(key)), minio.PutObjectOptions{})
	return err
}

// TestAWSS3CredentialsFromMinIO: awsS3Credentials answers credentials
// from a real STS (MinIO's AssumeRole) that reach exactly the bucket and
// prefix, at the level asked for; what the scopes or the configuration do
// not allow is refused, audited, and no credential reaches the log.
func TestAWSS3CredentialsFromMinIO(t *testing.T) {
	t.Parallel()
	m := e2e.StartMinIO(t)
	ctx := context.Background()
	root := s3As(t, m, m.AccessKey, m.SecretKey, "")
	for _, b := range []string{"cache", "elsewhere"} {
		require.NoError(t, root.MakeBucket(ctx, b, minio.MakeBucketOptions{}))
	}
	require.NoError(t, putObject(root, "cache", "other/secret"))
	b := startIdentity(t, &authapi.S3STS{Endpoint: m.URL, AccessKeyID: m.AccessKey, SecretAccessKey: m.SecretKey, Buckets: []string{"cache"}})
	_, run := b.runningTask(t, withScopes("auth:aws-s3:read-write:cache/sccache/"))

	got, err := run.AWSS3Credentials(ctx, "read-write", "cache", "sccache/")
	require.NoError(t, err)
	c := got.Credentials
	require.NotEmpty(t, c.SessionToken)
	require.NotEqual(t, m.AccessKey, c.AccessKeyID, "temporary credentials, not the deployment's")
	rw := s3As(t, m, c.AccessKeyID, c.SecretAccessKey, c.SessionToken)
	require.NoError(t, putObject(rw, "cache", "sccache/a"))
	obj, err := rw.GetObject(ctx, "cache", "sccache/a", minio.GetObjectOptions{})
	require.NoError(t, err)
	data, err := io.ReadAll(obj)
	require.NoError(t, err)
	require.Equal(t, "sccache/a", string(data))
	for name, err := range map[string]error{
		"another prefix": putObject(rw, "cache", "other/x"),
		"a sibling name": putObject(rw, "cache", "sccache-evil"),
		"another bucket": putObject(rw, "elsewhere", "sccache/a"),
		"reading elsewhere": func() error {
			_, err := rw.StatObject(ctx, "cache", "other/secret", minio.StatObjectOptions{})
			return err
		}(),
	} {
		require.Error(t, err, name)
		require.Equal(t, "AccessDenied", minio.ToErrorResponse(err).Code, name)
	}
	for o := range rw.ListObjects(ctx, "cache", minio.ListObjectsOptions{Prefix: "other/"}) {
		require.Error(t, o.Err, "listing another prefix is refused")
	}

	ro, err := run.AWSS3Credentials(ctx, "read-only", "cache", "sccache/")
	require.NoError(t, err, "the read-write scope allows read-only")
	roClient := s3As(t, m, ro.Credentials.AccessKeyID, ro.Credentials.SecretAccessKey, ro.Credentials.SessionToken)
	_, err = roClient.StatObject(ctx, "cache", "sccache/a", minio.StatObjectOptions{})
	require.NoError(t, err)
	require.Equal(t, "AccessDenied", minio.ToErrorResponse(putObject(roClient, "cache", "sccache/b")).Code)

	// format=iam-role-compat: the EC2 metadata service's JSON.
	var compat map[string]any
	compatURL := b.URL + "/api/auth/v1/aws/s3/read-only/cache/sccache/?format=iam-role-compat"
	body := signedGet(t, run, compatURL)
	require.NoError(t, json.Unmarshal(body, &compat))
	require.Equal(t, "Success", compat["Code"])
	require.Equal(t, "AWS-HMAC", compat["Type"])
	for _, k := range []string{"AccessKeyId", "SecretAccessKey", "Token", "Expiration", "LastUpdated"} {
		require.NotEmpty(t, compat[k], k)
	}

	_, err = run.AWSS3Credentials(ctx, "read-write", "cache", "other/")
	b.requireRefused(t, err, 403, "InsufficientScopes", run.Credentials.ClientID)
	_, err = run.AWSS3Credentials(ctx, "admin", "cache", "sccache/")
	b.requireRefused(t, err, 400, "InputError", run.Credentials.ClientID)
	_, err = b.Root.AWSS3Credentials(ctx, "read-write", "elsewhere", "x/")
	b.requireRefused(t, err, 404, "ResourceNotFound", "static/taskcluster/root")
	_, err = b.Root.AWSS3Credentials(ctx, "read-write", "cache", "x*/")
	b.requireRefused(t, err, 400, "InputError", "static/taskcluster/root")

	logs := b.logs.String()
	for _, secret := range []string{c.SecretAccessKey, c.SessionToken, ro.Credentials.SecretAccessKey, m.SecretKey + "\""} {
		require.NotContains(t, logs, secret, "no credential in the log")
	}
}

// signedGet GETs url with c's credentials (Hawk) and returns the body of
// a 200.
func signedGet(t *testing.T, c *tcclient.Client, url string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	header, err := tcclient.AuthorizationHeader(c.Credentials, nil, http.MethodGet, url)
	require.NoError(t, err)
	req.Header.Set("Authorization", header)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return body
}
