package artifacts

import (
	"context"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"
)

// Put stores size bytes read from r under key, streamed to the service
// (never held in memory whole), like Local.Put. The object service uses it
// for data sent inline with a request; uploads of real size go through
// PutURL.
func (b *S3) Put(ctx context.Context, key, contentType, contentEncoding string, size int64, r io.Reader) (BlobInfo, error) {
	if err := validateKey(key); err != nil {
		return BlobInfo{}, err
	}
	if err := validateContentType(contentType); err != nil {
		return BlobInfo{}, err
	}
	if size < 0 {
		return BlobInfo{}, fmt.Errorf("storing blob %q: negative size %d", key, size)
	}
	info, err := b.client.PutObject(ctx, b.bucket, b.objectName(key), r, size,
		minio.PutObjectOptions{ContentType: contentType, ContentEncoding: contentEncoding})
	if err != nil {
		return BlobInfo{}, fmt.Errorf("storing blob %q: %w", key, err)
	}
	return BlobInfo{Size: info.Size, ContentType: contentType, ContentEncoding: contentEncoding, Modified: info.LastModified}, nil
}
