package artifacts

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Options configures Open. Only the part matching the chosen backend is
// used.
type Options struct {
	// Local configures the local backend ("local" specs). A "local:DIR"
	// spec overrides Local.Dir.
	Local LocalOptions
	// S3 configures the S3 backend ("s3://" specs).
	S3 S3Options
}

// Open creates the backend a spec string names:
//
//   - "" or "local": blobs on local disk in opts.Local.Dir, served by
//     hopper itself (the result is Mountable);
//   - "local:DIR": the same, in DIR;
//   - "s3://BUCKET?…": an S3-compatible bucket, see NewS3 for parameters
//     and where credentials come from.
func Open(ctx context.Context, spec string, opts Options) (Backend, error) {
	switch {
	case spec == "" || spec == "local":
		return openLocal(opts.Local)
	case strings.HasPrefix(spec, "local:"):
		lo := opts.Local
		lo.Dir = strings.TrimPrefix(spec, "local:")
		if lo.Dir == "" {
			return nil, errors.New("blob storage spec \"local:\" names no directory")
		}
		return openLocal(lo)
	case strings.HasPrefix(spec, "s3://"):
		return NewS3(ctx, spec, opts.S3)
	}
	scheme, _, _ := strings.Cut(spec, ":")
	// Only the scheme is echoed: the rest may carry a secret key.
	return nil, fmt.Errorf("unknown blob storage %q: want local, local:DIR or s3://BUCKET", scheme)
}

func openLocal(opts LocalOptions) (Backend, error) {
	l, err := NewLocal(opts)
	if err != nil {
		return nil, err
	}
	return l, nil
}
