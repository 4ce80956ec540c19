package artifacts

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLocalObjectUploadsMayBeChunked: an object's data (ObjectKeyPrefix)
// may be PUT without a Content-Length, as Taskcluster's Go client streams
// a file, within the size limit; artifact keys still need the length.
func TestLocalObjectUploadsMayBeChunked(t *testing.T) {
	t.Parallel()
	b := setupLocal(t, func(o *LocalOptions) { o.MaxSize = 10 })
	ctx := t.Context()
	exp := b.clock.Now().Add(time.Hour)
	chunkedPut := func(key, body string) int {
		t.Helper()
		u, err := b.local.PutURL(ctx, key, "text/plain", exp)
		require.NoError(t, err)
		// An io.Reader of unknown length makes net/http send it chunked.
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, io.MultiReader(strings.NewReader(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "text/plain")
		require.EqualValues(t, 0, req.ContentLength)
		return do(t, req).status
	}
	tests := []struct {
		name, key, body string
		want            int
	}{
		{"object", ObjectKeyPrefix + "t/a", "0123456789", http.StatusOK},
		{"empty object", ObjectKeyPrefix + "t/empty", "", http.StatusOK},
		{"object over the limit", ObjectKeyPrefix + "t/big", "0123456789a", http.StatusRequestEntityTooLarge},
		{"artifact", "Task/0/public/x.txt", "0123", http.StatusLengthRequired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, chunkedPut(tc.key, tc.body))
			info, err := b.local.Stat(ctx, tc.key)
			if tc.want != http.StatusOK {
				require.ErrorIs(t, err, ErrNotFound)
				return
			}
			require.NoError(t, err)
			require.EqualValues(t, len(tc.body), info.Size)
		})
	}
}
