package artifacts

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestS3LongNames: artifact names of up to 1024 characters, which escaping
// can push past S3's limits, still round-trip.
func TestS3LongNames(t *testing.T) {
	t.Parallel()
	spec := s3TestSpec(t)
	b, err := NewS3(t.Context(), spec, S3Options{})
	require.NoError(t, err)
	for _, name := range []string{strings.Repeat("a", 1024), strings.Repeat("%", 400), "public/" + strings.Repeat("x y", 300)} {
		key := newKey(t, name)
		u, err := b.PutURL(t.Context(), key, "text/plain", time.Now().Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, doPut(t, u, "text/plain", "", []byte(name[:8])).status)
		g, err := b.GetURL(t.Context(), key, time.Now().Add(time.Minute))
		require.NoError(t, err)
		resp, err := http.Get(g)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, name[:8], string(body))
		require.NoError(t, b.Delete(t.Context(), key))
	}
}

func TestObjectNameFitsLimits(t *testing.T) {
	t.Parallel()
	b := &S3{prefix: "pre/"}
	require.Equal(t, "pre/abc/0/public/x.log", b.objectName("abc/0/public/x.log"))
	long := b.objectName("abc/0/" + strings.Repeat("é", 400))
	require.True(t, strings.HasPrefix(long, "pre/_long/"))
	require.LessOrEqual(t, len(long), maxObjectNameBytes)
	require.NotEqual(t, long, b.objectName("abc/1/"+strings.Repeat("é", 400)))
}
