package artifacts

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte("k"), MinSigningKeyLen)
	tests := []struct {
		name      string
		spec      string
		dir       bool // give Options.Local a directory
		wantLocal bool
		wantS3    bool
		wantErr   string
	}{
		{name: "empty means local", spec: "", dir: true, wantLocal: true},
		{name: "local", spec: "local", dir: true, wantLocal: true},
		{name: "local without directory", spec: "local", wantErr: "no directory"},
		{name: "local with directory", spec: "local:SUBDIR", wantLocal: true},
		{name: "local with empty directory", spec: "local:", dir: true, wantErr: "names no directory"},
		{name: "s3", spec: "s3://bucket?endpoint=127.0.0.1:1&insecure=true&accessKey=a&secretKey=b", wantS3: true},
		{name: "bad s3", spec: "s3://bucket?nope=1", wantErr: "unknown parameter"},
		{name: "unknown scheme, secret not echoed", spec: "gs://bucket?secretKey=hunter2", wantErr: `unknown blob storage "gs"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			opts := Options{Local: LocalOptions{BaseURL: "http://127.0.0.1:1", SigningKey: key}}
			if tt.dir {
				opts.Local.Dir = filepath.Join(tmp, "opts")
			}
			spec := tt.spec
			if spec == "local:SUBDIR" {
				spec = "local:" + filepath.Join(tmp, "spec")
			}
			b, err := Open(t.Context(), spec, opts)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.NotContains(t, err.Error(), "hunter2")
				require.Nil(t, b)
				return
			}
			require.NoError(t, err)
			switch {
			case tt.wantLocal:
				require.IsType(t, &Local{}, b)
				m, ok := b.(Mountable)
				require.True(t, ok, "a local backend must be mountable")
				require.Equal(t, DefaultMountPath, m.MountPath())
				want := filepath.Join(tmp, "opts")
				if tt.spec == "local:SUBDIR" {
					want = filepath.Join(tmp, "spec")
				}
				_, err := os.Stat(filepath.Join(want, "blobs"))
				require.NoError(t, err)
			case tt.wantS3:
				require.IsType(t, &S3{}, b)
				m, ok := b.(Mountable)
				require.True(t, ok, "an S3 backend serves its upload relay")
				require.Equal(t, RelayMountPath, m.MountPath())
			}
		})
	}
}
