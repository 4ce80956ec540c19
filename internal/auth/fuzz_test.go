package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/hawk"
)

// FuzzAuthenticateExt feeds arbitrary ext payloads (decoded JSON is where
// most of the type juggling happens) through a correctly signed header:
// authentication must never panic and must fail only with
// *AuthenticationError.
func FuzzAuthenticateExt(f *testing.F) {
	seeds := []string{
		`{}`, `null`, `5`, `[]`, `"x"`, `{"certificate":null}`, `{"certificate":{}}`,
		`{"certificate":{"version":1,"seed":"` + "aaaaaaaaQaaaaaaaaaaaaQbbbbbbbbQbbbbbbbbbbbbQ" + `","start":1,"expiry":2,"scopes":[],"signature":"x"}}`,
		`{"certificate":{"issuer":"static/taskcluster/root","version":1}}`,
		`{"authorizedScopes":["a","b*"]}`, `{"authorizedScopes":{"a":1}}`,
		`{"certificate":[],"authorizedScopes":[]}`, `{"certificate":{"version":1e400}}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	clients := &fakeClients{clients: map[string]Client{
		"static/taskcluster/root": {ClientID: "static/taskcluster/root", AccessToken: "root", Scopes: []string{"*"}, Expires: time.Unix(4e9, 0)},
	}}
	now := time.Unix(1700000000, 0)
	a := NewAuthenticator(AuthenticatorOptions{Clients: clients, Roles: StaticExpander{}, NowFunc: func() time.Time { return now }})
	f.Fuzz(func(t *testing.T, extJSON string) {
		ext := base64.StdEncoding.EncodeToString([]byte(extJSON))
		header, err := hawk.RequestHeader(hawk.Credentials{ID: "static/taskcluster/root", Key: "root"}, "GET", "https://h/x", now, "abcdef", "", ext)
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Authenticate(context.Background(), Request{Method: "GET", RequestURI: "/x", Host: "h", Port: 443, Authorization: header})
		if err != nil {
			var aerr *AuthenticationError
			if !errors.As(err, &aerr) || aerr.Message == "" {
				t.Fatalf("unexpected error %T: %v", err, err)
			}
			return
		}
		if !res.HasCredentials || len(res.Scopes) == 0 {
			t.Fatalf("success without credentials or scopes: %+v", res)
		}
	})
}
