package loginapi_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"
)

// provider is an OpenID provider on loopback that enforces what hopper
// must send (the registered redirect URI, the client secret, the PKCE
// verifier matching the S256 challenge, a code used once) and lets a test
// spoil the ID token it answers (issuer, audience, signing key, expiry,
// nonce, email_verified), to check hopper refuses each.
type provider struct {
	t        testing.TB
	srv      *httptest.Server
	key      *rsa.PrivateKey
	otherKey *rsa.PrivateKey

	clientID, secret, redirect string

	mu    sync.Mutex
	codes map[string]grant
	// spoil changes the claims (and may pick the other key) of the next
	// ID tokens.
	spoil func(claims map[string]any) (otherKey bool)
	// deny makes the authorize endpoint answer error=access_denied.
	deny bool
	// groups are the person's groups now (nil: the default two);
	// refresh holds the refresh tokens issued (rotated on use), revoked
	// makes every refresh answer invalid_grant (the account is gone).
	groups  []string
	refresh map[string]bool
	revoked bool
}

type grant struct{ nonce, challenge string }

func newProvider(t testing.TB, clientID, secret string) *provider {
	p := &provider{t: t, clientID: clientID, secret: secret, codes: map[string]grant{}, refresh: map[string]bool{}}
	var err error
	p.key, err = rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	p.otherKey, err = rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": p.srv.URL, "authorization_endpoint": p.srv.URL + "/authorize",
			"token_endpoint": p.srv.URL + "/token", "jwks_uri": p.srv.URL + "/jwks", "response_types_supported": []string{"code"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"},
			"code_challenge_methods_supported": []string{"S256"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// authorize signs the person in at once (as if they consented) and sends
// them back with a code.
func (p *provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != p.clientID || q.Get("redirect_uri") != p.redirect || q.Get("response_type") != "code" ||
		q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(p.redirect)
	bq := url.Values{"state": {q.Get("state")}}
	p.mu.Lock()
	if p.deny {
		bq.Set("error", "access_denied")
		bq.Set("error_description", "the person said no")
	} else {
		code := base64.RawURLEncoding.EncodeToString(randBytes(p.t))
		p.codes[code] = grant{nonce: q.Get("nonce"), challenge: q.Get("code_challenge")}
		bq.Set("code", code)
	}
	p.mu.Unlock()
	back.RawQuery = bq.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func randBytes(t testing.TB) []byte {
	b := make([]byte, 24)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func (p *provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	fail := func(code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
	}
	p.mu.Lock()
	want := p.secret
	p.mu.Unlock()
	if id != p.clientID || secret != want {
		fail("invalid_client")
		return
	}
	p.mu.Lock()
	var g grant
	found := false
	if r.PostForm.Get("grant_type") == "refresh_token" {
		// RFC 6749 §6: a refresh token issued to this client, used once.
		found = p.refresh[r.PostForm.Get("refresh_token")] && !p.revoked
		delete(p.refresh, r.PostForm.Get("refresh_token"))
	} else {
		g, found = p.codes[r.PostForm.Get("code")]
		delete(p.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		found = found && r.PostForm.Get("redirect_uri") == p.redirect && base64.RawURLEncoding.EncodeToString(sum[:]) == g.challenge
	}
	spoil, groups := p.spoil, p.groups
	refresh := base64.RawURLEncoding.EncodeToString(randBytes(p.t))
	if found {
		p.refresh[refresh] = true
	}
	p.mu.Unlock()
	if !found {
		fail("invalid_grant")
		return
	}
	if groups == nil {
		groups = []string{"admins", "dev team"}
	}
	now := time.Now()
	claims := map[string]any{"iss": p.srv.URL, "sub": "u-42", "aud": p.clientID, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"preferred_username": "Ann Example", "email": "ann@example.com", "email_verified": true, "groups": groups}
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	key := p.key
	if spoil != nil && spoil(claims) {
		key = p.otherKey
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	require.NoError(p.t, err)
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	require.NoError(p.t, err)
	raw, err := jws.CompactSerialize()
	require.NoError(p.t, err)
	writeJSON(w, map[string]any{"access_token": "provider-access-token", "token_type": "Bearer", "expires_in": 300, "id_token": raw,
		"refresh_token": refresh})
}
