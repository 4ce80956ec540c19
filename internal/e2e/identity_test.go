package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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

// deployScript is the deploy of docs/identity.md: a token for MinIO
// through the proxy, exchanged by awscli for credentials of the role the
// token's subject names, and a sync to the bucket. No key is stored
// anywhere the task can read.
const deployScript = `set -eu
curl -sf -X POST -H 'Content-Type: application/json' -d '{"audience":"minio"}' \
  "$TASKCLUSTER_PROXY_URL/api/auth/v1/task/$TASK_ID/runs/$RUN_ID/id-token" | jq -r .token > token
aws --endpoint-url "$MINIO" --region us-east-1 sts assume-role-with-web-identity \
  --role-arn arn:minio:iam:::role/ignored --role-session-name deploy --web-identity-token "$(cat token)" > creds.json
rm token
export AWS_ACCESS_KEY_ID="$(jq -r .Credentials.AccessKeyId creds.json)"
export AWS_SECRET_ACCESS_KEY="$(jq -r .Credentials.SecretAccessKey creds.json)"
export AWS_SESSION_TOKEN="$(jq -r .Credentials.SessionToken creds.json)"
rm creds.json
mkdir -p public && echo "<h1>$TASK_ID</h1>" > public/index.html
aws --endpoint-url "$MINIO" --region us-east-1 s3 sync public/ s3://site/www/
echo deployed
`

// TestDeployWithIdentityToken runs docs/identity.md's deploy on a real
// worker: the task's token, asked for through its proxy, is exchanged by
// awscli with MinIO (which trusts hopper's issuer and gives the subject's
// policy), and the site lands in the bucket. A task whose subject names no
// policy gets nothing.
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
	subject := "project:site:task-queue:" + tq
	require.NoError(t, m.AddPolicy(ctx, subject, `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":["s3:PutObject","s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::site","arn:aws:s3:::site/www/*"]}]}`))
	s3, err := minio.New(m.URL[len("http://"):], &minio.Options{Creds: credentials.NewStaticV4(m.AccessKey, m.SecretKey, "")})
	require.NoError(t, err)
	require.NoError(t, s3.MakeBucket(ctx, "site", minio.MakeBucketOptions{}))
	e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: tq, Args: []string{"--isolation", "none"}})
	root := rootClient(srv)

	deploy := func(projectID string) (string, string) {
		task := newTask(tq)
		task.ProjectID = projectID
		task.Scopes = []string{"auth:create-id-token:minio"}
		payload, err := json.Marshal(map[string]any{"command": [][]string{{"sh", "-c", deployScript}}, "maxRunTime": 120,
			"features": map[string]bool{"taskclusterProxy": true}, "env": map[string]string{"MINIO": m.URL}})
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
	taskID, state := deploy("site")
	require.Equal(t, tcclient.StateCompleted, state, taskLog(ctx, t, root, taskID))
	obj, err := s3.GetObject(ctx, "site", "www/index.html", minio.GetObjectOptions{})
	require.NoError(t, err)
	body, err := io.ReadAll(obj)
	require.NoError(t, err)
	require.Contains(t, string(body), taskID)

	otherID, state := deploy("other")
	require.Equal(t, tcclient.StateFailed, state, "project:other:… names no policy: %s", taskLog(ctx, t, root, otherID))
	require.NotContains(t, srv.Logs(), "eyJ", "no token in the server's log")
}
