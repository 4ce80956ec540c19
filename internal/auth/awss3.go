package auth

import (
	"encoding/json"
	"fmt"
	"strings"
)

// S3 access levels of awsS3Credentials (Taskcluster's).
const (
	S3ReadOnly  = "read-only"
	S3ReadWrite = "read-write"
)

// S3SessionPolicy is the session policy that limits temporary S3
// credentials to one bucket and prefix at a level, the same grant as
// Taskcluster's awsS3Credentials: objects under the prefix (read, and for
// read-write also written and deleted, never their ACLs), listing only
// under the prefix, and the bucket's location. The STS intersects it with
// what the deployment's own credentials may do.
func S3SessionPolicy(level, bucket, prefix string) (string, error) {
	actions := []string{"s3:GetObject"}
	switch level {
	case S3ReadOnly:
	case S3ReadWrite:
		actions = append(actions, "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")
	default:
		return "", fmt.Errorf("level %q is neither %s nor %s", level, S3ReadOnly, S3ReadWrite)
	}
	if bucket == "" || strings.ContainsAny(bucket, "/*?$") || strings.ContainsAny(prefix, "*?$") {
		return "", fmt.Errorf("bucket %q or prefix %q cannot be put in a policy", bucket, prefix)
	}
	type statement struct {
		Effect    string         `json:"Effect"`
		Action    []string       `json:"Action"`
		Resource  []string       `json:"Resource"`
		Condition map[string]any `json:"Condition,omitempty"`
	}
	policy := struct {
		Version   string      `json:"Version"`
		Statement []statement `json:"Statement"`
	}{Version: "2012-10-17", Statement: []statement{
		{Effect: "Allow", Action: actions, Resource: []string{"arn:aws:s3:::" + bucket + "/" + prefix + "*"}},
		{Effect: "Allow", Action: []string{"s3:ListBucket"}, Resource: []string{"arn:aws:s3:::" + bucket},
			Condition: map[string]any{"StringLike": map[string]any{"s3:prefix": []string{prefix + "*"}}}},
		{Effect: "Allow", Action: []string{"s3:GetBucketLocation"}, Resource: []string{"arn:aws:s3:::" + bucket}},
	}}
	b, err := json.Marshal(policy)
	if err != nil {
		return "", fmt.Errorf("encoding the session policy: %w", err)
	}
	return string(b), nil
}
