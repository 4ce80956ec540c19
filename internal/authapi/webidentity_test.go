package authapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// exchange trades a token for S3 credentials with MinIO's
// AssumeRoleWithWebIdentity.
func exchange(m *e2e.MinIO, token string) (credentials.Value, error) {
	p, err := credentials.NewSTSWebIdentity(m.URL, func() (*credentials.WebIdentityToken, error) {
		return &credentials.WebIdentityToken{Token: token}, nil
	})
	if err != nil {
		return credentials.Value{}, err
	}
	return p.GetWithContext(&credentials.CredContext{Context: context.Background()})
}

// TestMinIOTrustsTaskTokens: a real MinIO, configured with hopper as its
// OpenID provider and each token's subject naming its policy, grants a
// branch's task what the branch's policy allows, a fork's pull request
// only what the untrusted policy allows (never write), and nothing to a
// token of another audience or a task without a forge subject.
func TestMinIOTrustsTaskTokens(t *testing.T) {
	t.Parallel()
	b := startIdentity(t, nil)
	// MinIO reads the discovery document as it starts: hopper is up.
	m := e2e.StartMinIO(t,
		"MINIO_IDENTITY_OPENID_CONFIG_URL="+b.URL+"/.well-known/openid-configuration",
		"MINIO_IDENTITY_OPENID_CLIENT_ID=minio",
		"MINIO_IDENTITY_OPENID_CLAIM_NAME=sub")
	ctx := context.Background()
	const branch, untrusted = "repo:github.com/acme/site:branch:main", "repo:github.com/acme/site:pull-request-untrusted"
	require.NoError(t, m.AddPolicy(ctx, branch, `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":["s3:PutObject","s3:GetObject"],"Resource":["arn:aws:s3:::site/www/*"]}]}`))
	require.NoError(t, m.AddPolicy(ctx, untrusted, `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::site/www/*"]}]}`))
	root := s3As(t, m, m.AccessKey, m.SecretKey, "")
	require.NoError(t, root.MakeBucket(ctx, "site", minio.MakeBucketOptions{}))
	require.NoError(t, putObject(root, "site", "www/index.html"))

	forgeTask := func(role string, pr int) (string, *tcclient.Client) {
		taskID, run := b.runningTask(t, withScopes("auth:create-id-token:minio", "auth:create-id-token:other"))
		f := &auth.ForgeClaims{Host: "github.com", Repository: "acme/site", SHA: strings.Repeat("a", 40), Role: role,
			Event: "push", Ref: "refs/heads/main", Untrusted: strings.HasSuffix(role, "-untrusted")}
		if pr != 0 {
			f.Event, f.Ref, f.PullRequest = "pull_request.opened", "refs/pull/7/head", pr
		}
		claims, err := auth.EncodeForgeClaims(f)
		require.NoError(t, err)
		require.NoError(t, b.Store.PutTaskIdentity(ctx, &store.TaskIdentity{TaskID: taskID, Claims: claims, Expires: time.Now().Add(time.Hour)}))
		return taskID, run
	}
	token := func(taskID string, run *tcclient.Client, audience string) string {
		tok, err := run.CreateIDToken(ctx, taskID, 0, audience)
		require.NoError(t, err)
		return tok.Token
	}

	// The branch's deploy: write and read under www/, nothing else.
	mainID, mainRun := forgeTask(branch, 0)
	v, err := exchange(m, token(mainID, mainRun, "minio"))
	require.NoError(t, err)
	require.True(t, v.Expiration.Before(time.Now().Add(25*time.Minute)), "the credentials end with the token, with the claim")
	deploy := s3As(t, m, v.AccessKeyID, v.SecretAccessKey, v.SessionToken)
	require.NoError(t, putObject(deploy, "site", "www/app.js"))
	require.Equal(t, "AccessDenied", minio.ToErrorResponse(putObject(deploy, "site", "private/x")).Code)

	// A fork's pull request: reads, never writes.
	prID, prRun := forgeTask(untrusted, 7)
	v, err = exchange(m, token(prID, prRun, "minio"))
	require.NoError(t, err)
	fork := s3As(t, m, v.AccessKeyID, v.SecretAccessKey, v.SessionToken)
	_, err = fork.StatObject(ctx, "site", "www/index.html", minio.StatObjectOptions{})
	require.NoError(t, err)
	require.Equal(t, "AccessDenied", minio.ToErrorResponse(putObject(fork, "site", "www/index.html")).Code)

	// Another audience, a tampered token, a task without a forge subject:
	// MinIO grants nothing.
	_, err = exchange(m, token(mainID, mainRun, "other"))
	require.Error(t, err, "a token for another audience")
	tok := token(mainID, mainRun, "minio")
	parts := strings.Split(tok, ".")
	_, err = exchange(m, parts[0]+"."+parts[1]+"."+parts[2][:len(parts[2])-4]+"AAAA")
	require.Error(t, err, "a token whose signature does not verify")
	plainID, plainRun := b.runningTask(t, withScopes("auth:create-id-token:minio"))
	_, err = exchange(m, token(plainID, plainRun, "minio"))
	require.Error(t, err, "no policy is named by project:…:task-queue:… subjects")
}
