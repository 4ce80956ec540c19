package hawk

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewNonce(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[A-Za-z0-9_-]{6}$`)
	seen := map[string]bool{}
	for range 100 {
		n := NewNonce()
		require.Regexp(t, re, n)
		seen[n] = true
	}
	require.Greater(t, len(seen), 95, "nonces must be random")
}

func TestRequestHeaderErrors(t *testing.T) {
	t.Parallel()
	ts := time.Unix(1700000000, 0)
	good := Credentials{ID: "a", Key: "k"}
	tests := []struct {
		name             string
		creds            Credentials
		method, url      string
		nonce, hash, ext string
	}{
		{name: "no id", creds: Credentials{Key: "k"}, method: "GET", url: "https://h/x"},
		{name: "no key", creds: Credentials{ID: "a"}, method: "GET", url: "https://h/x"},
		{name: "no method", creds: good, url: "https://h/x"},
		{name: "relative url", creds: good, method: "GET", url: "/x"},
		{name: "bad url", creds: good, method: "GET", url: "https://h:port/x"},
		{name: "quote in ext", creds: good, method: "GET", url: "https://h/x", ext: `a"b`},
		{name: "backslash in hash", creds: good, method: "GET", url: "https://h/x", hash: `a\b`},
		{name: "non-ascii id", creds: Credentials{ID: "é", Key: "k"}, method: "GET", url: "https://h/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := RequestHeader(tt.creds, tt.method, tt.url, ts, tt.nonce, tt.hash, tt.ext)
			require.Error(t, err)
		})
	}
}

func TestRequestHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	p := NewParser()
	c := Credentials{ID: "static/taskcluster/root", Key: "secret"}
	now := time.Unix(1700000000, 0)
	body := []byte(`{"x":1}`)
	hash := PayloadHash("application/json", body)
	header, err := RequestHeader(c, "POST", "http://127.0.0.1:5000/api/queue/v1/task/abc?x=%2F", now, "", hash, "")
	require.NoError(t, err)
	h, err := p.ParseHeader(header)
	require.NoError(t, err)
	req := Request{Method: "POST", Resource: "/api/queue/v1/task/abc?x=%2F", Host: "127.0.0.1", Port: 5000}
	require.NoError(t, h.Verify(c.Key, req, now))
	require.NoError(t, VerifyPayloadHash(h.Hash, "application/json; charset=utf-8", body))
	require.Error(t, VerifyPayloadHash(h.Hash, "application/json", []byte(`{"x":2}`)))
	require.Error(t, VerifyPayloadHash(h.Hash, "text/plain", body))
	require.EqualError(t, h.Verify(c.Key, req, now.Add(TimestampSkew+time.Second)), MsgStaleTimestamp)
	require.EqualError(t, h.Verify(c.Key, req, now.Add(-TimestampSkew-time.Second)), MsgStaleTimestamp)
	require.NoError(t, h.Verify(c.Key, req, now.Add(TimestampSkew)))
	require.EqualError(t, h.Verify("", req, now), "Invalid credentials")
}

func TestSignURLJoinsQuery(t *testing.T) {
	t.Parallel()
	c := Credentials{ID: "a", Key: "k"}
	exp := time.Unix(1700000900, 0)
	tests := map[string]string{
		"https://h/p":         "https://h/p?bewit=",
		"https://h/p?a=1":     "https://h/p?a=1&bewit=",
		"https://h/p?":        "https://h/p?&bewit=",
		"https://h/p?a=1#top": "https://h/p?a=1&bewit=",
	}
	p := NewParser()
	for in, prefix := range tests {
		got, err := SignURL(c, in, exp, "")
		require.NoError(t, err)
		require.Contains(t, got, prefix)
		bw, err := BewitFor(c, in, exp, "")
		require.NoError(t, err)
		require.Contains(t, got, "bewit="+bw)
		if in == "https://h/p?a=1#top" {
			require.Equal(t, "https://h/p?a=1&bewit="+bw+"#top", got)
			continue
		}
		target := got[len("https://h"):]
		b, err := p.ParseBewit(Request{Method: "GET", Resource: target, Host: "h", Port: 443})
		require.NoError(t, err, in)
		require.NoError(t, b.Verify(c.Key, exp.Add(-time.Second)), in)
	}
	_, err := SignURL(Credentials{ID: `a\b`, Key: "k"}, "https://h/p", exp, "")
	require.Error(t, err)
}

func TestAbsoluteFormResource(t *testing.T) {
	t.Parallel()
	a := Artifacts{Method: "GET", Resource: "/p/a%2Fb?x=1", Host: "h", Port: 80, TS: "1", Nonce: "n"}
	abs := a
	abs.Resource = "http://h/p/a%2Fb?x=1"
	require.Equal(t, NormalizedString(KindHeader, a), NormalizedString(KindHeader, abs))
}
