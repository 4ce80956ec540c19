package authapi_test

import (
	"context"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/authapi"
	"github.com/hopper-ci/hopper/internal/e2e"
)

// BenchmarkCreateIDToken is what a task's identity token costs: one
// createIdToken call with the run's credentials over HTTP (Hawk, the run's
// row read, the token signed with RS256), on SQLite.
func BenchmarkCreateIDToken(b *testing.B) {
	s := startIdentity(b, nil)
	taskID, run := s.runningTask(b, withScopes("auth:create-id-token:minio"))
	ctx := context.Background()
	_, err := run.CreateIDToken(ctx, taskID, 0, "minio") // the first key is made
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		if _, err := run.CreateIDToken(ctx, taskID, 0, "minio"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAWSS3Credentials is awsS3Credentials' latency against a real
// STS: one call with a run's credentials, hopper's AssumeRole at MinIO
// included.
func BenchmarkAWSS3Credentials(b *testing.B) {
	m := e2e.StartMinIO(b)
	ctx := context.Background()
	require.NoError(b, s3As(b, m, m.AccessKey, m.SecretKey, "").MakeBucket(ctx, "cache", minio.MakeBucketOptions{}))
	s := startIdentity(b, &authapi.S3STS{Endpoint: m.URL, AccessKeyID: m.AccessKey, SecretAccessKey: m.SecretKey, Buckets: []string{"cache"}})
	_, run := s.runningTask(b, withScopes("auth:aws-s3:read-write:cache/sccache/"))
	b.ResetTimer()
	for b.Loop() {
		if _, err := run.AWSS3Credentials(ctx, "read-write", "cache", "sccache/"); err != nil {
			b.Fatal(err)
		}
	}
}
