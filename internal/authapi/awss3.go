package authapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// scopesAWSS3 is awsS3Credentials' scope expression (Taskcluster's): a
// read-only grant is satisfied by either level's scope.
const scopesAWSS3 = `{"if":"levelIsReadOnly","then":{"AnyOf":["auth:aws-s3:read-only:<bucket>/<prefix>","auth:aws-s3:read-write:<bucket>/<prefix>"]},` +
	`"else":"auth:aws-s3:read-write:<bucket>/<prefix>"}`

// S3STS is the deployment's S3-compatible STS (AWS, MinIO, Ceph RGW…)
// that awsS3Credentials asks for short-lived credentials: an AssumeRole
// with the deployment's credentials and a session policy limited to one
// bucket and prefix, so no task ever holds a stored key.
type S3STS struct {
	// Endpoint is the STS's URL (https://sts.amazonaws.com, or MinIO's
	// own URL).
	Endpoint string
	// AccessKeyID and SecretAccessKey are the deployment's credentials;
	// the session policy can only narrow what they may do.
	AccessKeyID, SecretAccessKey string
	// Region signs the request (default us-east-1).
	Region string
	// RoleARN is the role assumed (AWS requires one; MinIO ignores it).
	RoleARN string
	// Buckets are the buckets credentials may be asked for (Taskcluster's
	// allowedBuckets); any other is answered ResourceNotFound.
	Buckets []string
	// Duration is how long the credentials last (default one hour, as
	// Taskcluster's).
	Duration time.Duration
	// HTTPClient makes the STS calls (default: a client with a 30 s
	// timeout).
	HTTPClient *http.Client
}

// String never shows the secret, wherever the configuration is printed.
func (s *S3STS) String() string {
	return fmt.Sprintf("S3STS{Endpoint:%s AccessKeyID:%s Buckets:%v}", s.Endpoint, s.AccessKeyID, s.Buckets)
}

// s3Credentials are temporary credentials as the STS returned them.
type s3Credentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
	Expires                                    time.Time
}

// assume asks the STS for credentials limited by policy.
func (s *S3STS) assume(ctx context.Context, policy, session string) (s3Credentials, error) {
	region := s.Region
	if region == "" {
		region = "us-east-1"
	}
	duration := s.Duration
	if duration == 0 {
		duration = time.Hour
	}
	client := s.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	p := &credentials.STSAssumeRole{Client: client, STSEndpoint: s.Endpoint, Options: credentials.STSAssumeRoleOptions{
		AccessKey: s.AccessKeyID, SecretKey: s.SecretAccessKey, Policy: policy, Location: region,
		DurationSeconds: int(duration / time.Second), RoleARN: s.RoleARN, RoleSessionName: session,
	}}
	v, err := p.RetrieveWithCredContext(&credentials.CredContext{Client: client, Context: ctx})
	if err != nil {
		// The STS's answer names no secret of ours; it is passed on for
		// the operator.
		return s3Credentials{}, fmt.Errorf("asking the STS at %s for S3 credentials: %w", s.Endpoint, err)
	}
	return s3Credentials{AccessKeyID: v.AccessKeyID, SecretAccessKey: v.SecretAccessKey, SessionToken: v.SessionToken, Expires: v.Expiration}, nil
}

type awsS3Reply struct {
	Credentials struct {
		AccessKeyID     string `json:"accessKeyId"`
		SecretAccessKey string `json:"secretAccessKey"`
		SessionToken    string `json:"sessionToken"`
	} `json:"credentials"`
	Expires queue.Time `json:"expires"`
}

// iamRoleCompat is the reply with format=iam-role-compat: what the EC2
// metadata service answers, which AWS SDKs know how to refresh.
type iamRoleCompat struct {
	Code            string     `json:"Code"`
	Type            string     `json:"Type"`
	LastUpdated     queue.Time `json:"LastUpdated"`
	AccessKeyID     string     `json:"AccessKeyId"`
	SecretAccessKey string     `json:"SecretAccessKey"`
	Token           string     `json:"Token"`
	Expiration      queue.Time `json:"Expiration"`
}

// awsS3Credentials answers temporary credentials for a bucket and prefix
// (Taskcluster's awsS3Credentials), refusing and auditing what the
// caller's scopes do not allow.
func (h *handlers) awsS3Credentials(c *api.Call) (any, error) {
	level, bucket, prefix := c.Params["level"], c.Params["bucket"], c.Params["prefix"]
	entity := "aws-s3:" + level + ":" + bucket + "/" + prefix
	refuse := func(err error) (any, error) {
		reason := err.Error()
		var apiErr *api.Error
		if errors.As(err, &apiErr) {
			reason = apiErr.Code
		}
		h.auditRefusal(c, store.AuditCloudCredentials, entity, "aws-s3 credentials refused: "+reason)
		return nil, err
	}
	if level != auth.S3ReadOnly && level != auth.S3ReadWrite {
		return refuse(inputError("the 'level' URL parameter must be read-only or read-write; got %s", level))
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"level": level, "bucket": bucket, "prefix": prefix,
		"levelIsReadOnly": level == auth.S3ReadOnly}); err != nil {
		return refuse(err)
	}
	sts := h.S3
	if sts == nil || !slices.Contains(sts.Buckets, bucket) {
		return refuse(notFound("No credentials available for bucket %s", bucket))
	}
	if strings.HasPrefix(prefix, "/") {
		return refuse(inputError("The `prefix` may not start with a slash `/`; got `%s`", prefix))
	}
	policy, err := auth.S3SessionPolicy(level, bucket, prefix)
	if err != nil {
		return refuse(inputError("%s", err.Error()))
	}
	caller, err := h.Caller(c)
	if err != nil {
		return nil, err
	}
	creds, err := sts.assume(c.Context(), policy, sessionName(caller.ClientID))
	if err != nil {
		return nil, err
	}
	if c.R.URL.Query().Get("format") != "" { // the only format there is (the query pattern)
		return iamRoleCompat{Code: "Success", Type: "AWS-HMAC", LastUpdated: queue.NewTime(c.Now),
			AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey, Token: creds.SessionToken,
			Expiration: queue.NewTime(creds.Expires)}, nil
	}
	var out awsS3Reply
	out.Credentials.AccessKeyID, out.Credentials.SecretAccessKey, out.Credentials.SessionToken = creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken
	out.Expires = queue.NewTime(creds.Expires)
	return out, nil
}

// sessionName is the STS session's name, which the cloud's own logs show:
// the caller's clientId cut to the characters and length AssumeRole takes.
func sessionName(clientID string) string {
	var b strings.Builder
	for _, r := range clientID {
		if b.Len() == 64 {
			break
		}
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("=,.@-_", r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() < 2 {
		return "hopper"
	}
	return b.String()
}
