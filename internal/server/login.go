package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"time"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/login"
	"github.com/hopper-ci/hopper/internal/loginapi"
	"github.com/hopper-ci/hopper/internal/maintenance"
)

// LoginClientID is the static client that signs the temporary
// credentials of people signed in (Taskcluster's web-server client).
const LoginClientID = "static/taskcluster/web-server"

// loginService signs people in through the configured providers
// (/login/, docs/login.md). Without a configuration it serves nothing.
func (w *wiring) loginService() (service, error) {
	cfg := w.cfg.Login
	if cfg == nil {
		path := os.Getenv("HOPPER_LOGIN_CONFIG")
		if path == "" {
			return service{}, nil
		}
		var err error
		if cfg, err = login.LoadConfig(path, os.Getenv); err != nil {
			return service{}, err
		}
	}
	names := make([]string, 0, len(cfg.Providers))
	for _, p := range cfg.Providers {
		names = append(names, p.Name)
	}
	w.log.Info("sign-in on", "providers", names)
	issuer := w.sec.loginIssuer(w.key, names)
	srv, err := loginapi.New(loginapi.Options{Store: w.store, Sealer: w.sec.Sealer, Config: cfg, RootURL: w.cfg.RootURL, Clock: w.cfg.Clock, Logger: w.log,
		Version: w.cfg.Version, Issue: func(clientID string, scopes []string, start, expiry time.Time) (auth.Credentials, error) {
			return auth.CreateTemporaryCredentials(auth.TemporaryCredentialsOptions{ClientID: clientID, Start: start, Expiry: expiry,
				Scopes: scopes, Issuer: issuer})
		}, Expand: func(ctx context.Context, scopes []string) ([]string, error) {
			e, err := w.sec.Roles.Expander(ctx)
			if err != nil {
				return nil, err
			}
			return e.Expand(scopes), nil
		}})
	if err != nil {
		return service{}, err
	}
	every, err := cfg.ScanEvery()
	if err != nil {
		return service{}, err
	}
	scanner := &loginapi.Scanner{Server: srv, Store: w.store, Roles: w.sec.Roles, Holder: leaseHolder(), Actor: LoginClientID, Interval: every}
	scan := &maintenance.Every{What: "scanning the credentials of people", Interval: every, Logger: w.log,
		Pass: func(ctx context.Context) error { _, err := scanner.RunOnce(ctx); return err }}
	return service{routes: loginapi.Routes(loginapi.Deps{Server: srv}), duties: []maintenance.Service{scan},
		expiries: []maintenance.Expiry{{Service: "login", Run: w.store.ExpireLogin}}}, nil
}

// loginIssuer adds the login service's static client, whose token is
// derived from the server secret (every replica signs alike, nothing is
// stored), allowed exactly what people signed in through the providers
// get: credentials named under <provider>/, assuming their login
// identities and their providers' roles.
func (s *Security) loginIssuer(key [32]byte, providers []string) auth.Credentials {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte("hopper issuer " + LoginClientID))
	creds := auth.Credentials{ClientID: LoginClientID, AccessToken: base64.RawURLEncoding.EncodeToString(m.Sum(nil))}
	var scopes []string
	for _, p := range providers {
		scopes = append(scopes, "auth:create-client:"+p+"/*", "assume:login-identity:"+p+"/*", "assume:"+p+"-*")
	}
	s.Clients.static[LoginClientID] = auth.Client{ClientID: LoginClientID, AccessToken: creds.AccessToken, Scopes: scopes,
		Expires: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}
	return creds
}
