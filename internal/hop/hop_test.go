package hop_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/hop"
	"github.com/hopper-ci/hopper/internal/store"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// rows is the directory's table in memory: these tests are about the
// signature and the forwarding, the store's rows have the conformance
// suite (storetest.testEndpoints).
type rows map[string]string

func (r rows) PutEndpoint(_ context.Context, key, url string, _ time.Time) error {
	r[key] = url
	return nil
}
func (r rows) GetEndpoint(_ context.Context, key string, _ time.Time) (string, error) {
	if u, ok := r[key]; ok {
		return u, nil
	}
	return "", store.ErrNotFound
}
func (r rows) DeleteEndpoint(_ context.Context, key, url string) error {
	if r[key] == url {
		delete(r, key)
	}
	return nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestForwardedRequestIsVerified: the holder accepts what a replica with
// the same secret forwarded, and refuses a request signed with another
// secret, one whose signature is for another path, one too old, and
// garbage; a request without the header is not a hop.
func TestForwardedRequestIsVerified(t *testing.T) {
	t.Parallel()
	clock := testclock.New(time.Unix(1_800_000_000, 0))
	db := rows{}
	var seen *http.Request
	holder := hop.New([]byte("secret"), "", db, clock, quiet)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r
		signed, err := holder.Signed(r)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusUnauthorized)
		case signed:
			_, _ = io.WriteString(w, "hop "+r.URL.RequestURI()+" auth="+r.Header.Get("Authorization"))
		default:
			_, _ = io.WriteString(w, "direct")
		}
	}))
	defer srv.Close()

	forward := func(secret string, path string) (int, string) {
		d := hop.New([]byte(secret), "http://self", db, clock, quiet)
		req := httptest.NewRequest(http.MethodGet, "http://lb"+path, nil)
		req.Header.Set("Authorization", "Hawk id=x")
		rec := httptest.NewRecorder()
		d.Forward(rec, req, srv.URL, path)
		return rec.Code, rec.Body.String()
	}
	code, body := forward("secret", "/websocktunnel/w/log/x?y=1")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "hop /websocktunnel/w/log/x?y=1 auth=", body, "the caller's credentials do not go on")
	code, body = forward("secret", "/websocktunnel/w/log/x")
	require.Equal(t, http.StatusOK, code, body)
	sig := seen.Header.Get(hop.Header)
	code, body = forward("other secret", "/websocktunnel/w/log/x")
	require.Equal(t, http.StatusUnauthorized, code, body)

	tests := []struct {
		name, path, header string
		clockStep          time.Duration
		want               int
	}{
		{"replayed as it was", "/websocktunnel/w/log/x", sig, 0, http.StatusOK},
		{"replayed for another path", "/websocktunnel/w/log/other", sig, 0, http.StatusUnauthorized},
		{"replayed too late", "/websocktunnel/w/log/x", sig, time.Minute, http.StatusUnauthorized},
		{"garbage", "/websocktunnel/w/log/x", "garbage", 0, http.StatusUnauthorized},
		{"no header", "/websocktunnel/w/log/x", "", 0, http.StatusOK},
	}
	for _, tc := range tests {
		clock.Advance(tc.clockStep)
		req, err := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
		require.NoError(t, err)
		if tc.header != "" {
			req.Header.Set(hop.Header, tc.header)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, tc.want, res.StatusCode, tc.name)
		clock.Advance(-tc.clockStep)
	}
}

// TestHoldRelease: a key held twice (a worker reconnected before its old
// connection ended) keeps its row until the second release, and Locate
// never names this replica itself.
func TestHoldRelease(t *testing.T) {
	t.Parallel()
	db := rows{}
	clock := testclock.New(time.Unix(1_800_000_000, 0))
	a := hop.New([]byte("s"), "http://a", db, clock, quiet)
	b := hop.New([]byte("s"), "http://b", db, clock, quiet)
	ctx := context.Background()
	require.NoError(t, a.Hold(ctx, "wst/w"))
	require.NoError(t, a.Hold(ctx, "wst/w"))
	a.Release("wst/w")
	u, err := b.Locate(ctx, "wst/w")
	require.NoError(t, err)
	require.Equal(t, "http://a", u)
	_, err = a.Locate(ctx, "wst/w")
	require.ErrorIs(t, err, hop.ErrNotHeld)
	a.Release("wst/w")
	_, err = b.Locate(ctx, "wst/w")
	require.ErrorIs(t, err, hop.ErrNotHeld)
}
