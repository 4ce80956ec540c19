package loginapi_test

import (
	"net/http"
	"net/url"
	"testing"

	"golang.org/x/oauth2"
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

// BenchmarkThirdPartyFlow is a registered website's whole round trip for
// a signed-in person: authorize, the console's consent, the code traded
// for an access token (PKCE) and the token for credentials (the person's
// scopes expanded and intersected with the consent), on SQLite.
func BenchmarkThirdPartyFlow(b *testing.B) {
	bb := setup(b, false)
	_, _, c := bb.signIn(b)
	site := bb.site("treeherder", siteCallback, "queue:rerun-task:*")
	b.ResetTimer()
	for range b.N {
		verifier := oauth2.GenerateVerifier()
		_, location, page := visit(b, c, site.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)))
		status, to := bb.consent(b, c, location, true, bb.s.URL)
		if status != http.StatusOK {
			b.Fatalf("consent: %d %s %s", status, to, page)
		}
		back, _ := url.Parse(to)
		tok, err := site.Exchange(b.Context(), back.Query().Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			b.Fatal(err)
		}
		if status, body := siteCredentials(b, bb.s.URL, tok.AccessToken); status != http.StatusOK {
			b.Fatalf("credentials: %d %s", status, body)
		}
	}
}
