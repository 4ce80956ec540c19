package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// maxPresignExpiry is the longest validity SigV4 presigned URLs allow.
const maxPresignExpiry = 7 * 24 * time.Hour

// S3Options carries what an s3:// spec does not: where credentials come
// from and how to reach the service.
type S3Options struct {
	// GetenvFunc looks up environment variables (AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); nil means os.Getenv.
	GetenvFunc func(string) string
	// Transport, when set, carries the backend's own requests (Stat,
	// Delete, bucket creation). Presigned URLs are used by others.
	Transport http.RoundTripper
	// NowFunc returns the current time, used to turn an expiry time into
	// the validity period of a presigned URL; nil means time.Now.
	NowFunc func() time.Time
	// RelayBaseURL and RelaySigningKey enable the upload relay (see
	// PutURLWithLength): hopper's root URL and the key signing relay URLs.
	// Without a key, object uploads get presigned URLs like artifacts.
	RelayBaseURL    string
	RelaySigningKey []byte
}

// S3 stores blobs in a bucket of an S3-compatible service (AWS S3, MinIO,
// …) and hands out SigV4 presigned URLs. Only object uploads pass through
// hopper, when the relay is configured (s3_relay.go).
type S3 struct {
	client *minio.Client
	bucket string
	prefix string
	now    func() time.Time
	// relayBase and relayKey configure the upload relay (s3_relay.go).
	relayBase string
	relayKey  []byte
}

// s3Spec is a parsed s3:// spec.
type s3Spec struct {
	bucket       string
	prefix       string
	endpoint     string
	region       string
	secure       bool
	create       bool
	lookup       minio.BucketLookupType
	accessKey    string
	secretKey    string
	sessionToken string
}

// NewS3 creates an S3 backend from a spec of the form
//
//	s3://BUCKET[/PREFIX]?endpoint=HOST:PORT&region=REGION&insecure=true&pathStyle=true&create=true
//
// Query parameters, all optional:
//   - endpoint: host[:port] of the service; default s3.amazonaws.com.
//   - region: default us-east-1 (set it so presigning needs no lookup).
//   - insecure=true: talk plain HTTP (local MinIO); default HTTPS.
//   - pathStyle=true|false: force path-style or virtual-host-style bucket
//     addressing; default lets the client decide (path style for IPs and
//     non-AWS hosts).
//   - create=true: create the bucket if it does not exist.
//   - accessKey, secretKey, sessionToken: credentials. They are accepted
//     for convenience in tests but end up in configuration files and
//     process listings, so prefer the environment.
//
// When the spec carries no accessKey, credentials come from the environment
// variables AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN;
// with neither, requests are anonymous. PREFIX (if any) is prepended to
// every object name and should end with "/".
func NewS3(ctx context.Context, spec string, opts S3Options) (*S3, error) {
	getenv := opts.GetenvFunc
	if getenv == nil {
		getenv = os.Getenv
	}
	s, err := parseS3Spec(spec, getenv)
	if err != nil {
		return nil, err
	}
	var creds *credentials.Credentials
	if s.accessKey != "" || s.secretKey != "" {
		creds = credentials.NewStaticV4(s.accessKey, s.secretKey, s.sessionToken)
	} else {
		creds = credentials.New(&credentials.Static{Value: credentials.Value{SignerType: credentials.SignatureAnonymous}})
	}
	client, err := minio.New(s.endpoint, &minio.Options{
		Creds:        creds,
		Secure:       s.secure,
		Region:       s.region,
		BucketLookup: s.lookup,
		Transport:    opts.Transport,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 blob storage: creating client for %s: %w", s.endpoint, err)
	}
	b := &S3{client: client, bucket: s.bucket, prefix: s.prefix, now: opts.NowFunc,
		relayBase: strings.TrimRight(opts.RelayBaseURL, "/"), relayKey: append([]byte(nil), opts.RelaySigningKey...)}
	if b.now == nil {
		b.now = time.Now
	}
	if s.create {
		if err := b.ensureBucket(ctx, s.region); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// parseS3Spec parses an s3:// spec. Unknown parameters are errors so that
// a typo does not silently select defaults.
func parseS3Spec(spec string, getenv func(string) string) (s3Spec, error) {
	u, err := url.Parse(spec)
	if err != nil {
		// url.Parse errors quote the input, which may hold a secret key.
		return s3Spec{}, errors.New("s3 blob storage: spec is not a valid URL")
	}
	if u.Scheme != "s3" || u.Host == "" {
		return s3Spec{}, errors.New("s3 blob storage: spec must look like s3://BUCKET?endpoint=HOST:PORT")
	}
	s := s3Spec{
		bucket:   u.Host,
		prefix:   strings.TrimPrefix(u.Path, "/"),
		endpoint: "s3.amazonaws.com",
		region:   "us-east-1",
		secure:   true,
		lookup:   minio.BucketLookupAuto,
	}
	if strings.HasPrefix(s.prefix, "/") || strings.Contains(s.prefix, "//") {
		return s3Spec{}, fmt.Errorf("s3 blob storage: prefix %q must not contain empty segments", s.prefix)
	}
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return s3Spec{}, errors.New("s3 blob storage: spec has a malformed query string")
	}
	for name, values := range query {
		v := values[len(values)-1]
		switch name {
		case "endpoint":
			s.endpoint = v
		case "region":
			s.region = v
		case "insecure", "create", "pathStyle":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return s3Spec{}, fmt.Errorf("s3 blob storage: parameter %s=%q is not a boolean", name, v)
			}
			switch name {
			case "insecure":
				s.secure = !b
			case "create":
				s.create = b
			default:
				s.lookup = minio.BucketLookupDNS
				if b {
					s.lookup = minio.BucketLookupPath
				}
			}
		case "accessKey":
			s.accessKey = v
		case "secretKey":
			s.secretKey = v
		case "sessionToken":
			s.sessionToken = v
		default:
			return s3Spec{}, fmt.Errorf("s3 blob storage: unknown parameter %q", name)
		}
	}
	if s.endpoint == "" {
		return s3Spec{}, errors.New("s3 blob storage: empty endpoint")
	}
	if s.accessKey == "" && s.secretKey == "" {
		s.accessKey = getenv("AWS_ACCESS_KEY_ID")
		s.secretKey = getenv("AWS_SECRET_ACCESS_KEY")
		s.sessionToken = getenv("AWS_SESSION_TOKEN")
	}
	if (s.accessKey == "") != (s.secretKey == "") {
		return s3Spec{}, errors.New("s3 blob storage: access key and secret key must be given together")
	}
	return s, nil
}

func (b *S3) ensureBucket(ctx context.Context, region string) error {
	exists, err := b.client.BucketExists(ctx, b.bucket)
	if err != nil {
		return fmt.Errorf("s3 blob storage: checking bucket %s: %w", b.bucket, err)
	}
	if exists {
		return nil
	}
	err = b.client.MakeBucket(ctx, b.bucket, minio.MakeBucketOptions{Region: region})
	if err != nil {
		// Another replica (or a parallel test) may have won the race.
		if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
			return nil
		}
		return fmt.Errorf("s3 blob storage: creating bucket %s: %w", b.bucket, err)
	}
	return nil
}

// PutURL returns a presigned PUT URL; Content-Type is among the signed
// headers, so the uploader must send exactly contentType.
func (b *S3) PutURL(ctx context.Context, key, contentType string, exp time.Time) (string, error) {
	if err := validateKey(key); err != nil {
		return "", err
	}
	if err := validateContentType(contentType); err != nil {
		return "", err
	}
	d, err := b.validity(exp)
	if err != nil {
		return "", fmt.Errorf("presigning upload of %q: %w", key, err)
	}
	u, err := b.client.PresignHeader(ctx, http.MethodPut, b.bucket, b.objectName(key), d, nil,
		http.Header{"Content-Type": []string{contentType}})
	if err != nil {
		return "", fmt.Errorf("presigning upload of %q: %w", key, err)
	}
	return u.String(), nil
}

// GetURL returns a presigned GET URL; S3 replays the Content-Type and
// Content-Encoding given at upload. SigV4 signs the method, so unlike a
// Local URL it does not serve HEAD; redirected downloaders only GET.
func (b *S3) GetURL(ctx context.Context, key string, exp time.Time) (string, error) {
	if err := validateKey(key); err != nil {
		return "", err
	}
	d, err := b.validity(exp)
	if err != nil {
		return "", fmt.Errorf("presigning download of %q: %w", key, err)
	}
	u, err := b.client.PresignedGetObject(ctx, b.bucket, b.objectName(key), d, nil)
	if err != nil {
		return "", fmt.Errorf("presigning download of %q: %w", key, err)
	}
	return u.String(), nil
}

// Delete removes the object; S3 reports success for absent objects.
func (b *S3) Delete(ctx context.Context, key string) error {
	if err := validateKey(key); err != nil {
		return err
	}
	if err := b.client.RemoveObject(ctx, b.bucket, b.objectName(key), minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("deleting blob %q: %w", key, err)
	}
	return nil
}

// Stat describes the stored object. SHA256 is known only when the uploader
// supplied an x-amz-checksum-sha256.
func (b *S3) Stat(ctx context.Context, key string) (BlobInfo, error) {
	if err := validateKey(key); err != nil {
		return BlobInfo{}, err
	}
	oi, err := b.client.StatObject(ctx, b.bucket, b.objectName(key), minio.StatObjectOptions{Checksum: true})
	if err != nil {
		resp := minio.ToErrorResponse(err)
		if resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound {
			return BlobInfo{}, fmt.Errorf("blob %q: %w", key, ErrNotFound)
		}
		return BlobInfo{}, fmt.Errorf("statting blob %q: %w", key, err)
	}
	info := BlobInfo{
		Size:            oi.Size,
		ContentType:     oi.ContentType,
		ContentEncoding: oi.ContentEncoding,
		Modified:        oi.LastModified,
	}
	if oi.ContentEncoding == "" {
		info.ContentEncoding = oi.Metadata.Get("Content-Encoding")
	}
	if oi.ChecksumSHA256 != "" && !strings.Contains(oi.ChecksumSHA256, "-") {
		// A multipart checksum ("<b64>-N") is not the SHA-256 of the bytes.
		if raw, err := base64.StdEncoding.DecodeString(oi.ChecksumSHA256); err == nil {
			info.SHA256 = hex.EncodeToString(raw)
		}
	}
	return info, nil
}

// validity converts an expiry time into a presign duration, which SigV4
// counts in whole seconds between 1 s and 7 days.
func (b *S3) validity(exp time.Time) (time.Duration, error) {
	now := b.now()
	if err := validateExpiry(exp, now); err != nil {
		return 0, err
	}
	d := exp.Sub(now).Truncate(time.Second)
	if d < time.Second {
		d = time.Second
	}
	if d > maxPresignExpiry {
		return 0, fmt.Errorf("URL validity %s exceeds the S3 maximum of %s", d, maxPresignExpiry)
	}
	return d, nil
}

// S3 limits: AWS caps object names at 1024 bytes, MinIO also caps each
// "/"-separated segment at 255 bytes.
const (
	maxObjectNameBytes    = 1024
	maxObjectSegmentBytes = 255
)

// objectName maps a key to its object name. Artifact names may be 1024
// characters and escaping can triple them, so a name over the store's limits
// is replaced by a digest of the key, which is just as unique and always
// fits (the key itself is kept in the database, never read back from the
// object name).
func (b *S3) objectName(key string) string {
	name := b.prefix + encodeObjectName(key)
	if len(name) <= maxObjectNameBytes && !hasLongSegment(name) {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	return b.prefix + "_long/" + hex.EncodeToString(sum[:])
}

func hasLongSegment(name string) bool {
	for _, seg := range strings.Split(name, "/") {
		if len(seg) > maxObjectSegmentBytes {
			return true
		}
	}
	return false
}

// encodeObjectName maps a key to an object name that every S3-compatible
// store accepts and that reads like the key in ordinary cases
// ("abc/0/public/logs/live.log" is unchanged).
//
// MinIO, unlike AWS, rejects names with "." or ".." segments, empty
// segments ("a//b", leading or trailing "/"), and treats "\" as a
// separator. So each "/"-separated segment is percent-encoded outside a
// conservative ASCII set ("%" itself included, which keeps the mapping
// reversible), a segment of only "." or ".." has its dots encoded, and an
// empty segment becomes "%00" (NUL never occurs in a key).
func encodeObjectName(key string) string {
	var sb strings.Builder
	sb.Grow(len(key) + 16)
	for i, seg := range strings.Split(key, "/") {
		if i > 0 {
			sb.WriteByte('/')
		}
		switch seg {
		case "":
			sb.WriteString("%00")
			continue
		case ".":
			sb.WriteString("%2E")
			continue
		case "..":
			sb.WriteString("%2E%2E")
			continue
		}
		for j := 0; j < len(seg); j++ {
			c := seg[j]
			if objectNameSafe(c) {
				sb.WriteByte(c)
			} else {
				fmt.Fprintf(&sb, "%%%02X", c)
			}
		}
	}
	return sb.String()
}

// objectNameSafe reports whether c may appear unencoded in an object name
// segment: URL-unreserved characters and sub-delimiters that no S3
// implementation or client treats specially ("+" is excluded because some
// tools decode it as a space).
func objectNameSafe(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*,;=:@", c) >= 0
}

// Compile-time check that S3 is a Backend.
var _ Backend = (*S3)(nil)
