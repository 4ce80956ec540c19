package auth

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTunnelToken(t *testing.T) {
	t.Parallel()
	secret := []byte("tunnel secret")
	now := time.Unix(1_800_000_000, 0)
	claims := TunnelClaims{TunnelID: "wg.w1", Audience: "hopper", Subject: "worker/x", IssuedAt: now.Unix(),
		NotBefore: now.Add(-TunnelTokenDrift).Unix(), Expires: now.Add(TunnelTokenLifetime).Unix(), Issuer: "taskcluster-auth"}
	tok := SignTunnelToken(secret, claims)
	require.NoError(t, VerifyTunnelToken(secret, tok, "wg.w1", "hopper", now))
	long := claims
	long.Expires = now.Add(40 * 24 * time.Hour).Unix()
	for _, tc := range []struct {
		name, token, id, aud string
		at                   time.Time
		want                 string
	}{
		{"another tunnel", tok, "wg.w2", "hopper", now, "not \"wg.w2\""},
		{"another audience", tok, "wg.w1", "elsewhere", now, "audience"},
		{"expired", tok, "wg.w1", "hopper", now.Add(TunnelTokenLifetime), "expired"},
		{"not yet", tok, "wg.w1", "hopper", now.Add(-time.Hour), "not valid yet"},
		{"another secret", SignTunnelToken([]byte("other"), claims), "wg.w1", "hopper", now, "bad signature"},
		{"too long", SignTunnelToken(secret, long), "wg.w1", "hopper", now, "31 days"},
		{"alg none", "eyJhbGciOiJub25lIn0." + tok[len(jwtHeader)+1:], "wg.w1", "hopper", now, "HS256"},
		{"garbage", "x.y", "wg.w1", "hopper", now, "not a JWT"},
	} {
		require.ErrorContains(t, VerifyTunnelToken(secret, tc.token, tc.id, tc.aud, tc.at), tc.want, tc.name)
	}
}
