package forgetest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// app answers the App's own calls.
func (g *GitHub) app(w http.ResponseWriter, r *http.Request, template string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch template {
	case "/app/installations/{installation_id}/access_tokens":
		id, _ := strconv.ParseInt(parts[2], 10, 64)
		tok := make([]byte, 20)
		_, _ = rand.Read(tok)
		token := "ghs_" + base64.RawURLEncoding.EncodeToString(tok)
		g.tokens[token] = id
		g.TokensIssued++
		g.reply(w, http.StatusCreated, map[string]any{"token": token, "expires_at": g.now().Add(time.Hour).UTC().Format(time.RFC3339)})
	case "/app/installations":
		// One installation per account, as GitHub has; no second page.
		seen := map[string]bool{}
		out := []any{}
		if r.URL.Query().Get("page") == "1" {
			keys := make([]string, 0, len(g.installations))
			for k := range g.installations {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				owner, _, _ := strings.Cut(k, "/")
				if !seen[owner] {
					seen[owner] = true
					out = append(out, map[string]any{"id": g.installations[k], "account": map[string]any{"login": owner}})
				}
			}
		}
		g.reply(w, http.StatusOK, out)
	default:
		id, ok := g.installations[parts[1]+"/"+parts[2]]
		if !ok {
			g.reply(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		g.reply(w, http.StatusOK, map[string]any{"id": id})
	}
}

// checkJWT verifies an App JWT: RS256 with the App's key, issued by the
// App, not expired, at most ten minutes long.
func (g *GitHub) checkJWT(token string) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return fmt.Errorf("not a JWT")
	}
	var header struct{ Alg string }
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if json.Unmarshal(hb, &header) != nil || header.Alg != "RS256" {
		return fmt.Errorf("alg must be RS256")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&g.Key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("bad signature: %w", err)
	}
	var claims struct {
		Iat, Exp int64
		Iss      string
	}
	cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(cb, &claims); err != nil {
		return err
	}
	now := g.now().Unix()
	if claims.Iss != strconv.FormatInt(g.AppID, 10) || claims.Exp < now || claims.Iat > now+60 || claims.Exp-claims.Iat > 600 {
		return fmt.Errorf("claims %+v are not valid now", claims)
	}
	return nil
}

// IssueToken issues a token for a token forge (a Gitea bot's access
// token) that acts like the installation's.
func (g *GitHub) IssueToken(installation int64) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	tok := make([]byte, 20)
	_, _ = rand.Read(tok)
	token := "gta_" + base64.RawURLEncoding.EncodeToString(tok)
	g.tokens[token] = installation
	return token
}
