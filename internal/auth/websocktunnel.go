package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TunnelClaims are the claims of a websocktunnel token (the JWT
// auth.websocktunnelToken issues and the tunnel checks): the tunnel client
// id it may register (tid), the tunnel servers that honour it (aud), the
// client it was issued to (sub), and when it is valid.
type TunnelClaims struct {
	TunnelID  string `json:"tid"`
	Audience  string `json:"aud"`
	Subject   string `json:"sub"`
	IssuedAt  int64  `json:"iat"`
	Expires   int64  `json:"exp"`
	NotBefore int64  `json:"nbf"`
	Issuer    string `json:"iss"`
}

// TunnelTokenLifetime is how long a websocktunnel token is valid (as
// Taskcluster's); TunnelTokenDrift is how far before its issue it is
// already valid, for clocks that differ.
const (
	TunnelTokenLifetime = 96 * time.Hour
	TunnelTokenDrift    = 15 * time.Minute
	// maxTunnelTokenSpan is the longest validity a tunnel accepts.
	maxTunnelTokenSpan = 31 * 24 * time.Hour
)

var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

// SignTunnelToken returns the claims as a JWT signed with HS256 and secret.
func SignTunnelToken(secret []byte, c TunnelClaims) string {
	body, _ := json.Marshal(c)
	signing := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(body)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// VerifyTunnelToken checks a websocktunnel token: an HS256 JWT signed with
// secret, valid at now, for tunnel id and audience, valid for at most 31
// days.
func VerifyTunnelToken(secret []byte, token, id, audience string, now time.Time) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("tunnel token: not a JWT")
	}
	head, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return fmt.Errorf("tunnel token header: %w", err)
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(head, &h) != nil || h.Alg != "HS256" {
		return errors.New("tunnel token: only HS256 is accepted")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("tunnel token signature: %w", err)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return errors.New("tunnel token: bad signature")
	}
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return fmt.Errorf("tunnel token claims: %w", err)
	}
	var c TunnelClaims
	if err := json.Unmarshal(body, &c); err != nil {
		return fmt.Errorf("tunnel token claims: %w", err)
	}
	t := now.Unix()
	switch {
	case c.TunnelID != id:
		return fmt.Errorf("tunnel token is for tunnel %q, not %q", c.TunnelID, id)
	case c.Audience != audience:
		return fmt.Errorf("tunnel token is for audience %q, not %q", c.Audience, audience)
	case t >= c.Expires:
		return errors.New("tunnel token expired")
	case t < c.NotBefore:
		return errors.New("tunnel token not valid yet")
	case time.Duration(c.Expires-c.NotBefore)*time.Second > maxTunnelTokenSpan:
		return errors.New("tunnel token valid for more than 31 days")
	}
	return nil
}
