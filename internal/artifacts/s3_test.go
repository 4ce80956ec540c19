package artifacts

import (
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/testclock"
)

// s3TestSpec returns the spec of the S3-compatible server to test against,
// skipping the test when there is none.
func s3TestSpec(t *testing.T) string {
	t.Helper()
	spec := os.Getenv("HOPPER_TEST_S3")
	if spec == "" {
		t.Skip("HOPPER_TEST_S3 not set: no S3-compatible server (run .ci/minio.sh)")
	}
	return spec
}

func TestS3Backend(t *testing.T) {
	t.Parallel()
	spec := s3TestSpec(t)
	b, err := NewS3(t.Context(), spec, S3Options{})
	require.NoError(t, err)
	runBackendSuite(t, func(*testing.T) harness {
		return harness{
			backend: b,
			// SigV4 validity is counted in whole seconds from a signing
			// time truncated to the second, on the server's clock: real
			// time has to pass, until the server refuses the URL.
			shortExpiry: func() time.Time { return time.Now().Add(2 * time.Second) },
			expire: func(t *testing.T, getURL string) {
				testclock.WaitFor(t, time.Minute, "the server to refuse the expired URL", func() bool {
					return doGet(t, http.MethodGet, getURL).status == http.StatusForbidden
				})
			},
			// The signature covers the method: a GET URL does not HEAD.
			headOnGetURL: false,
			// MinIO picks among 400, 403 and 499 for malformed or
			// incomplete requests; any refusal will do.
			checkRefused: requireClientError,
		}
	})
}

// TestS3ObjectNames checks on the real server that keys are stored under
// their encoded object names, so that the bucket stays browsable.
func TestS3ObjectNames(t *testing.T) {
	t.Parallel()
	spec := s3TestSpec(t)
	b, err := NewS3(t.Context(), spec, S3Options{})
	require.NoError(t, err)
	key := newKey(t, "public/../logs//live log.txt")
	u, err := b.PutURL(t.Context(), key, "text/plain", time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, doPut(t, u, "text/plain", "", []byte("x")).status)

	want := strings.TrimSuffix(key, "public/../logs//live log.txt") + "public/%2E%2E/logs/%00/live%20log.txt"
	_, err = b.client.StatObject(t.Context(), b.bucket, want, minio.StatObjectOptions{})
	require.NoError(t, err, "object %q", want)
	require.NoError(t, b.Delete(t.Context(), key))
}

func TestParseS3Spec(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"AWS_ACCESS_KEY_ID":     "envid",
		"AWS_SECRET_ACCESS_KEY": "envsecret",
		"AWS_SESSION_TOKEN":     "envtoken",
	}
	withEnv := func(k string) string { return env[k] }
	noEnv := func(string) string { return "" }
	tests := []struct {
		name    string
		spec    string
		getenv  func(string) string
		want    s3Spec
		wantErr string
	}{
		{
			name:   "defaults",
			spec:   "s3://artifacts",
			getenv: noEnv,
			want:   s3Spec{bucket: "artifacts", endpoint: "s3.amazonaws.com", region: "us-east-1", secure: true, lookup: minio.BucketLookupAuto},
		},
		{
			name:   "minio with prefix and env credentials",
			spec:   "s3://hopper-test/hopper/blobs/?endpoint=127.0.0.1:9000&region=eu-west-1&insecure=true&create=1&pathStyle=true",
			getenv: withEnv,
			want: s3Spec{
				bucket: "hopper-test", prefix: "hopper/blobs/", endpoint: "127.0.0.1:9000", region: "eu-west-1",
				create: true, lookup: minio.BucketLookupPath,
				accessKey: "envid", secretKey: "envsecret", sessionToken: "envtoken",
			},
		},
		{
			name:   "query credentials win over the environment",
			spec:   "s3://b?accessKey=qid&secretKey=qsecret&pathStyle=false",
			getenv: withEnv,
			want: s3Spec{
				bucket: "b", endpoint: "s3.amazonaws.com", region: "us-east-1", secure: true,
				lookup: minio.BucketLookupDNS, accessKey: "qid", secretKey: "qsecret",
			},
		},
		{name: "wrong scheme", spec: "http://b", getenv: noEnv, wantErr: "must look like"},
		{name: "no bucket", spec: "s3:///x", getenv: noEnv, wantErr: "must look like"},
		{name: "unknown parameter", spec: "s3://b?endpont=x", getenv: noEnv, wantErr: `unknown parameter "endpont"`},
		{name: "bad boolean", spec: "s3://b?insecure=maybe", getenv: noEnv, wantErr: "not a boolean"},
		{name: "empty endpoint", spec: "s3://b?endpoint=", getenv: noEnv, wantErr: "empty endpoint"},
		{name: "half credentials", spec: "s3://b?accessKey=id", getenv: withEnv, wantErr: "together"},
		{name: "empty prefix segment", spec: "s3://b//x", getenv: noEnv, wantErr: "empty segments"},
		{name: "unparsable, secret not echoed", spec: "s3://b%zz?secretKey=hunter2", getenv: noEnv, wantErr: "not a valid URL"},
		{name: "malformed query, secret not echoed", spec: "s3://b?secretKey=hunter2&x=%zz", getenv: noEnv, wantErr: "malformed query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseS3Spec(tt.spec, tt.getenv)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.NotContains(t, err.Error(), "hunter2")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestEncodeObjectName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		want string
	}{
		{"T/0/public/logs/live_backing.log", "T/0/public/logs/live_backing.log"},
		{"T/0/a/../b", "T/0/a/%2E%2E/b"},
		{"T/0/./b", "T/0/%2E/b"},
		{"T/0/...", "T/0/..."},
		{"T/0/%2e%2e", "T/0/%252e%252e"},
		{"T/0/a//b/", "T/0/a/%00/b/%00"},
		{"/T", "%00/T"},
		{"T/0/sp ace+plus?q#f", "T/0/sp%20ace%2Bplus%3Fq%23f"},
		{`T/0/..\..\x`, "T/0/..%5C..%5Cx"},
		{"T/0/é", "T/0/%C3%A9"},
		{"T/0/ok-._~!$&'()*,;=:@", "T/0/ok-._~!$&'()*,;=:@"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			got := encodeObjectName(tt.key)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.key, decodeObjectName(t, got), "encoding must be reversible")
			requireMinIOValid(t, got)
		})
	}
}

// FuzzEncodeObjectName checks reversibility (hence no two keys share an
// object) and validity for MinIO on arbitrary keys.
func FuzzEncodeObjectName(f *testing.F) {
	for _, s := range []string{"a/../b", "//", "%00", ".", "a/./.", " .. ", `\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if validateKey(key) != nil {
			return
		}
		got := encodeObjectName(key)
		require.Equal(t, key, decodeObjectName(t, got))
		requireMinIOValid(t, got)
	})
}

// decodeObjectName inverts encodeObjectName.
func decodeObjectName(t *testing.T, name string) string {
	t.Helper()
	segs := strings.Split(name, "/")
	for i, seg := range segs {
		if seg == "%00" {
			segs[i] = ""
			continue
		}
		dec, err := url.PathUnescape(seg)
		require.NoError(t, err)
		segs[i] = dec
	}
	return strings.Join(segs, "/")
}

// requireMinIOValid applies MinIO's object-name rules (no empty, "." or
// ".." segments after trimming spaces, no "\", no leading or trailing "/").
func requireMinIOValid(t *testing.T, name string) {
	t.Helper()
	require.NotEmpty(t, name)
	require.NotContains(t, name, `\`)
	require.NotContains(t, name, "//")
	require.False(t, strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/"), name)
	for _, seg := range strings.Split(name, "/") {
		trimmed := strings.TrimSpace(seg)
		require.NotContains(t, []string{"", ".", ".."}, trimmed, "segment %q of %q", seg, name)
		for i := 0; i < len(seg); i++ {
			require.Less(t, seg[i], byte(0x80), "non-ASCII byte in %q", name)
			require.Greater(t, seg[i], byte(0x20), "space or control byte in %q", name)
		}
	}
}

func TestS3Validity(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	b := &S3{now: func() time.Time { return now }}
	tests := []struct {
		exp     time.Time
		want    time.Duration
		wantErr string
	}{
		{now.Add(45*time.Minute + 10*time.Second), 45*time.Minute + 10*time.Second, ""},
		{now.Add(1500 * time.Millisecond), time.Second, ""},
		{now.Add(100 * time.Millisecond), time.Second, ""},
		{now, 0, "not after now"},
		{now.Add(8 * 24 * time.Hour), 0, "exceeds"},
	}
	for _, tt := range tests {
		t.Run(strconv.FormatInt(int64(tt.exp.Sub(now)), 10), func(t *testing.T) {
			t.Parallel()
			got, err := b.validity(tt.exp)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
