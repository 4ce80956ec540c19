package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestAuthReferenceOfficialClient calls every method of the official
// client's Auth reference (e2e/node/authreference.mjs): what hopper serves
// answers, awsS3Credentials with credentials from a real STS (MinIO), the
// Azure methods over Azure storage's emulator (Azurite, when installed),
// and the rest 404.
func TestAuthReferenceOfficialClient(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	m := e2e.StartMinIO(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s3, err := minio.New(m.URL[len("http://"):], &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	require.NoError(t, err)
	require.NoError(t, s3.MakeBucket(ctx, "ref", minio.MakeBucketOptions{}))
	env := []string{
		"HOPPER_AWS_S3_STS_ENDPOINT=" + m.URL, "HOPPER_AWS_S3_BUCKETS=ref",
		"HOPPER_AWS_S3_ACCESS_KEY_ID=" + m.AccessKey, "HOPPER_AWS_S3_SECRET_ACCESS_KEY=" + m.SecretKey,
	}
	var scriptEnv []string
	if e2e.AzuriteBinary() != "" {
		blob, table := e2e.StartAzurite(t)
		accounts := filepath.Join(t.TempDir(), "azure.json")
		require.NoError(t, os.WriteFile(accounts, []byte(`{"`+e2e.AzuriteAccount+`":"`+e2e.AzuriteKey+`"}`), 0o600))
		env = append(env, "HOPPER_AZURE_ACCOUNTS_FILE="+accounts, "HOPPER_AZURE_BLOB_ENDPOINT="+blob, "HOPPER_AZURE_TABLE_ENDPOINT="+table)
		scriptEnv = append(scriptEnv, "AZURE_ACCOUNT="+e2e.AzuriteAccount)
	} else {
		t.Log("Azurite is not installed: the Azure methods are called with no account configured")
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{Env: env})
	out := e2e.RunNode(ctx, t, "authreference.mjs", append(srv.Env(), scriptEnv...)...)
	t.Log(out)
	require.Contains(t, out, "ok - the whole Auth reference", "the script ran to its end")
}

// runDeployTask runs script as the command of a task with scopes on tq,
// with the proxy and MINIO in its environment, a page to deploy in
// public/, and returns the task's id and final state.
func runDeployTask(ctx context.Context, t *testing.T, root *tcclient.Client, tq, projectID, minioURL, script string, scopes ...string) (string, string) {
	t.Helper()
	task := newTask(tq)
	task.ProjectID = projectID
	task.Scopes = scopes
	script = "set -eu\nmkdir -p public && echo \"<h1>$TASK_ID</h1>\" > public/index.html\n" + script
	payload, err := json.Marshal(map[string]any{"command": [][]string{{"bash", "-c", script}}, "maxRunTime": 120,
		"features": map[string]bool{"taskclusterProxy": true}, "env": map[string]string{"MINIO": minioURL}})
	require.NoError(t, err)
	task.Payload = payload
	taskID := tcclient.NewTaskID()
	_, err = root.CreateTask(ctx, taskID, task)
	require.NoError(t, err)
	for {
		st, err := root.Status(ctx, taskID)
		require.NoError(t, err)
		if st.State != tcclient.StatePending && st.State != tcclient.StateRunning {
			return taskID, st.State
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task %s not resolved in time", taskID)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// requireDeployed checks the page the task deployed is in the bucket.
func requireDeployed(ctx context.Context, t *testing.T, s3 *minio.Client, bucket, taskID string) {
	t.Helper()
	obj, err := s3.GetObject(ctx, bucket, "www/index.html", minio.GetObjectOptions{})
	require.NoError(t, err)
	body, err := io.ReadAll(obj)
	require.NoError(t, err)
	require.Contains(t, string(body), taskID)
}

// awsAt points the guide's aws commands at MinIO.
func awsAt(cmds ...string) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c, strings.Replace(c, "aws ", `aws --endpoint-url "$MINIO" --region us-east-1 `, 1))
	}
	return out
}

// TestDeployWithIdentityToken runs docs/identity.md's token deploy on a
// real worker: the task's token, asked for through its proxy, is
// exchanged by awscli with MinIO (which trusts hopper's issuer and gives
// the subject's policy), and the site lands in the bucket. A task whose
// subject names no policy gets nothing.
func TestDeployWithIdentityToken(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"aws", "jq", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (apt-get install awscli jq curl)", tool)
		}
	}
	srv := e2e.StartServer(t, e2e.ServerOptions{})
	const tq = "e2e-deploy/site"
	m := e2e.StartMinIO(t,
		"MINIO_IDENTITY_OPENID_CONFIG_URL="+srv.RootURL+"/.well-known/openid-configuration",
		"MINIO_IDENTITY_OPENID_CLIENT_ID=minio",
		"MINIO_IDENTITY_OPENID_CLAIM_NAME=sub")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	require.NoError(t, m.AddPolicy(ctx, "project:site:task-queue:"+tq, `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":["s3:PutObject","s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::acme-site","arn:aws:s3:::acme-site/www/*"]}]}`))
	s3, err := minio.New(m.URL[len("http://"):], &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	require.NoError(t, err)
	require.NoError(t, s3.MakeBucket(ctx, "acme-site", minio.MakeBucketOptions{}))
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: tq, Args: []string{"--isolation", "none"}})
	root := rootClient(srv)
	script := e2e.DocExample(t, "identity-token-deploy").Replace(t,
		append([]string{"audience=sts.amazonaws.com", "audience=minio"}, awsAt("aws sts", "aws s3 sync")...)...)

	taskID, state := runDeployTask(ctx, t, root, tq, "site", m.URL, script, "auth:create-id-token:minio")
	require.Equal(t, tcclient.StateCompleted, state, taskLog(ctx, t, root, taskID))
	requireDeployed(ctx, t, s3, "acme-site", taskID)

	otherID, state := runDeployTask(ctx, t, root, tq, "other", m.URL, script, "auth:create-id-token:minio")
	require.Equal(t, tcclient.StateFailed, state, "project:other:… names no policy: %s", taskLog(ctx, t, root, otherID))
	noScopeID, state := runDeployTask(ctx, t, root, tq, "site", m.URL, script)
	require.Equal(t, tcclient.StateFailed, state, "no token without the scope: %s", taskLog(ctx, t, root, noScopeID))
	require.NotContains(t, srv.Logs(), "eyJhbGciOi", "no token in the server's log")
}

// TestDeployWithAWSS3Credentials runs docs/identity.md's awsS3Credentials
// deploy: the guide's role, a task that assumes it, its command syncing
// to MinIO with the credentials hopper got from MinIO's STS; a task
// without the role is refused.
func TestDeployWithAWSS3Credentials(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"aws", "jq", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (apt-get install awscli jq curl)", tool)
		}
	}
	m := e2e.StartMinIO(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s3, err := minio.New(m.URL[len("http://"):], &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	require.NoError(t, err)
	require.NoError(t, s3.MakeBucket(ctx, "acme-site", minio.MakeBucketOptions{}))
	srv := e2e.StartServer(t, e2e.ServerOptions{Env: []string{
		"HOPPER_AWS_S3_STS_ENDPOINT=" + m.URL, "HOPPER_AWS_S3_BUCKETS=acme-site",
		"HOPPER_AWS_S3_ACCESS_KEY_ID=" + m.AccessKey, "HOPPER_AWS_S3_SECRET_ACCESS_KEY=" + m.SecretKey,
	}})
	out, err := e2e.DocShell{Env: srv.Env()}.Run(t, e2e.DocExample(t, "identity-s3-role"))
	require.NoError(t, err, out)
	const tq = "e2e-deploy/s3"
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: tq, Args: []string{"--isolation", "none"}})
	root := rootClient(srv)
	script := e2e.DocExample(t, "identity-s3-deploy").Replace(t, awsAt("aws s3 sync")...)

	taskID, state := runDeployTask(ctx, t, root, tq, "site", m.URL, script, "assume:repo:github.com/acme/site:branch:main")
	require.Equal(t, tcclient.StateCompleted, state, taskLog(ctx, t, root, taskID))
	requireDeployed(ctx, t, s3, "acme-site", taskID)
	prID, state := runDeployTask(ctx, t, root, tq, "site", m.URL, script, "assume:repo:github.com/acme/site:pull-request")
	require.Equal(t, tcclient.StateFailed, state, "the pull-request role has no such scope: %s", taskLog(ctx, t, root, prID))
}
