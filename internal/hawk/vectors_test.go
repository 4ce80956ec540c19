package hawk

import (
	"encoding/json"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hawkVectors mirrors internal/auth/testdata/hawk.json, produced by
// internal/auth/testdata/gen from the hawk and taskcluster-client packages.
type hawkVectors struct {
	Headers []struct {
		Name, ID, Key, Method, URL, TS, Nonce, Hash, Ext string
		Resource, Host                                   string
		Port                                             int
		Normalized, Header                               string
	}
	Server []struct {
		Name, Method, Resource, Host, Authorization, Key, Error string
		Port                                                    int
		NowMs                                                   int64
	}
	Bewits []struct {
		Name, ID, Key, URL, Ext, Bewit, Decoded string
		NowMs, TTLSec                           int64
	}
	BewitServer []struct {
		Name, Method, Resource, Host, Key, Error, ID, Ext string
		Port                                              int
		NowMs                                             int64
	}
	PayloadHashes  []struct{ ContentType, Body, Hash string }
	ClientRequests []struct {
		Name, ClientID, AccessToken, Ext, Method, Resource, Host, Authorization, ContentType, Body string
		Port                                                                                       int
		NowMs                                                                                      int64
	}
	SignedURLs []struct {
		Name, ClientID, AccessToken, Ext, UnsignedURL, SignedURL string
		ExpSec                                                   int64
	} `json:"signedUrls"`
}

func loadVectors(t *testing.T) hawkVectors {
	t.Helper()
	raw, err := os.ReadFile("../auth/testdata/hawk.json")
	require.NoError(t, err)
	var v hawkVectors
	require.NoError(t, json.Unmarshal(raw, &v))
	require.NotEmpty(t, v.Headers)
	require.NotEmpty(t, v.Server)
	require.NotEmpty(t, v.Bewits)
	require.NotEmpty(t, v.BewitServer)
	require.NotEmpty(t, v.ClientRequests)
	require.NotEmpty(t, v.SignedURLs)
	return v
}

func TestVectorHeaders(t *testing.T) {
	t.Parallel()
	p := NewParser()
	for _, tc := range loadVectors(t).Headers {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			a := Artifacts{Method: tc.Method, Resource: tc.Resource, Host: tc.Host, Port: tc.Port, TS: tc.TS, Nonce: tc.Nonce, Hash: tc.Hash, Ext: tc.Ext}
			require.Equal(t, tc.Normalized, NormalizedString(KindHeader, a))

			ts, err := time.Parse(time.RFC3339, "1970-01-01T00:00:00Z")
			require.NoError(t, err)
			secs, err := strconv.ParseInt(tc.TS, 10, 64)
			require.NoError(t, err)
			ts = ts.Add(time.Duration(secs) * time.Second)
			got, err := RequestHeader(Credentials{ID: tc.ID, Key: tc.Key}, tc.Method, tc.URL, ts, tc.Nonce, tc.Hash, tc.Ext)
			require.NoError(t, err)
			require.Equal(t, tc.Header, got)

			h, err := p.ParseHeader(tc.Header)
			require.NoError(t, err)
			require.NoError(t, h.Verify(tc.Key, Request{Method: tc.Method, Resource: tc.Resource, Host: tc.Host, Port: tc.Port}, ts))
		})
	}
}

// TestVectorServer replays hawk.server.authenticate's verdicts (header
// syntax, MAC, timestamp) on the same inputs.
func TestVectorServer(t *testing.T) {
	t.Parallel()
	p := NewParser()
	for _, tc := range loadVectors(t).Server {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			err := func() error {
				h, err := p.ParseHeader(tc.Authorization)
				if err != nil {
					return err
				}
				return h.Verify(tc.Key, Request{Method: tc.Method, Resource: tc.Resource, Host: tc.Host, Port: tc.Port}, time.UnixMilli(tc.NowMs))
			}()
			if tc.Error == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.Error)
			var herr *Error
			require.ErrorAs(t, err, &herr)
		})
	}
}

func TestVectorBewits(t *testing.T) {
	t.Parallel()
	for _, tc := range loadVectors(t).Bewits {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			exp := time.UnixMilli(tc.NowMs).Truncate(time.Second).Add(time.Duration(tc.TTLSec) * time.Second)
			got, err := BewitFor(Credentials{ID: tc.ID, Key: tc.Key}, tc.URL, exp, tc.Ext)
			require.NoError(t, err)
			require.Equal(t, tc.Bewit, got)
		})
	}
}

// TestVectorBewitServer replays hawk.uri.authenticate's verdicts.
func TestVectorBewitServer(t *testing.T) {
	t.Parallel()
	p := NewParser()
	for _, tc := range loadVectors(t).BewitServer {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			require.True(t, p.HasBewit(tc.Resource))
			b, err := p.ParseBewit(Request{Method: tc.Method, Resource: tc.Resource, Host: tc.Host, Port: tc.Port})
			if err == nil {
				err = b.Verify(tc.Key, time.UnixMilli(tc.NowMs))
			}
			if tc.Error == "" {
				require.NoError(t, err)
				require.Equal(t, tc.ID, b.ID)
				require.Equal(t, tc.Ext, b.Ext)
				return
			}
			require.EqualError(t, err, tc.Error)
		})
	}
}

func TestVectorPayloadHashes(t *testing.T) {
	t.Parallel()
	for _, tc := range loadVectors(t).PayloadHashes {
		require.Equal(t, tc.Hash, PayloadHash(tc.ContentType, []byte(tc.Body)), "content type %q body %q", tc.ContentType, tc.Body)
		require.NoError(t, VerifyPayloadHash(tc.Hash, tc.ContentType, []byte(tc.Body)))
		err := VerifyPayloadHash(tc.Hash, tc.ContentType, []byte(tc.Body+" "))
		require.Error(t, err)
		require.True(t, strings.HasPrefix(err.Error(), MsgInvalidPayloadHashPrefix+tc.Hash+"\n"), err.Error())
	}
}

// TestVectorClientRequests verifies requests exactly as taskcluster-client
// put them on the wire.
func TestVectorClientRequests(t *testing.T) {
	t.Parallel()
	p := NewParser()
	for _, tc := range loadVectors(t).ClientRequests {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			h, err := p.ParseHeader(tc.Authorization)
			require.NoError(t, err)
			require.Equal(t, tc.ClientID, h.ID)
			require.Equal(t, tc.Ext, h.Ext)
			require.Empty(t, h.Hash, "the JS client sends no payload hash")
			req := Request{Method: tc.Method, Resource: tc.Resource, Host: tc.Host, Port: tc.Port}
			require.NoError(t, h.Verify(tc.AccessToken, req, time.UnixMilli(tc.NowMs)))

			// And the Go signer produces the identical header for the same URL.
			u := "http://" + tc.Host + ":" + itoa(tc.Port) + tc.Resource
			ts := time.UnixMilli(tc.NowMs)
			got, err := RequestHeader(Credentials{ID: tc.ClientID, Key: tc.AccessToken}, tc.Method, u, ts, h.Nonce, "", tc.Ext)
			require.NoError(t, err)
			require.Equal(t, tc.Authorization, got)
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestVectorSignedURLs(t *testing.T) {
	t.Parallel()
	p := NewParser()
	for _, tc := range loadVectors(t).SignedURLs {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			got, err := SignURL(Credentials{ID: tc.ClientID, Key: tc.AccessToken}, tc.UnsignedURL, time.Unix(tc.ExpSec, 0), tc.Ext)
			require.NoError(t, err)
			require.Equal(t, tc.SignedURL, got)

			u, err := url.Parse(tc.SignedURL)
			require.NoError(t, err)
			b, err := p.ParseBewit(Request{Method: "GET", Resource: u.RequestURI(), Host: u.Hostname(), Port: 443})
			require.NoError(t, err)
			require.Equal(t, tc.ClientID, b.ID)
			require.Equal(t, tc.Ext, b.Ext)
			require.NoError(t, b.Verify(tc.AccessToken, time.Unix(tc.ExpSec-1, 0)))
			require.EqualError(t, b.Verify(tc.AccessToken, time.Unix(tc.ExpSec, 0)), MsgAccessExpired)
		})
	}
}
