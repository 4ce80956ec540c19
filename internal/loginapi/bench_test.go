package loginapi_test

import (
	"net/http"
	"testing"
)

// BenchmarkSignIn is a whole sign-in round trip against an OpenID provider
// on loopback: start, the provider's authorize, the callback (code
// exchange with PKCE, ID token verification, session on SQLite) and the
// console's credentials.
func BenchmarkSignIn(b *testing.B) {
	bb := setup(b, false)
	b.ResetTimer()
	for range b.N {
		status, page, c := bb.signIn(b)
		if status != http.StatusFound {
			b.Fatalf("sign-in: %d %s", status, page)
		}
		if status, body := bb.credentials(b, c); status != http.StatusOK {
			b.Fatalf("credentials: %d %s", status, body)
		}
	}
}
