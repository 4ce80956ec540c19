package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/jsvalue"
)

// MaxTemporaryCredentialsSpan is the longest a temporary credential may
// last (expiry − start).
const MaxTemporaryCredentialsSpan = 31 * 24 * time.Hour

// certificateSkew is how far the server tolerates a certificate's start in
// the future and its expiry in the past.
const certificateSkew = 5 * time.Minute

// Credentials are permanent (or temporary) Taskcluster credentials.
type Credentials struct {
	ClientID    string `json:"clientId"`
	AccessToken string `json:"accessToken"`
	// Certificate is the JSON certificate of temporary credentials, empty
	// for permanent ones.
	Certificate string `json:"certificate,omitempty"`
}

// Certificate is the certificate of temporary credentials. Field order is
// the JSON key order the official clients produce.
type Certificate struct {
	Version   int      `json:"version"`
	Scopes    []string `json:"scopes"`
	Start     int64    `json:"start"`
	Expiry    int64    `json:"expiry"`
	Seed      string   `json:"seed"`
	Signature string   `json:"signature"`
	// Issuer is set only for named temporary credentials.
	Issuer string `json:"issuer,omitempty"`
}

// TemporaryCredentialsOptions describe temporary credentials to create.
type TemporaryCredentialsOptions struct {
	// ClientID names the credentials; empty makes unnamed (legacy)
	// credentials whose clientId is the issuer's. A named credential only
	// validates if the issuer holds auth:create-client:<ClientID>.
	ClientID string
	// Start and Expiry bound the validity; at most 31 days apart.
	Start, Expiry time.Time
	// Scopes granted, a subset of the issuer's.
	Scopes []string
	// Issuer are the permanent credentials that sign.
	Issuer Credentials
	// Seed is the 44-character seed; empty generates a random one (tests
	// pass a fixed seed).
	Seed string
}

// CreateTemporaryCredentials issues temporary credentials as the official
// clients do, signing with the form Taskcluster's server verifies.
func CreateTemporaryCredentials(opts TemporaryCredentialsOptions) (Credentials, error) {
	if opts.Issuer.ClientID == "" || opts.Issuer.AccessToken == "" {
		return Credentials{}, errors.New("creating temporary credentials: issuer clientId and accessToken are required")
	}
	if opts.Issuer.Certificate != "" {
		return Credentials{}, errors.New("creating temporary credentials: temporary credentials cannot issue temporary credentials")
	}
	if opts.Expiry.IsZero() {
		return Credentials{}, errors.New("creating temporary credentials: expiry is required")
	}
	if opts.Expiry.Sub(opts.Start) > MaxTemporaryCredentialsSpan {
		return Credentials{}, errors.New("creating temporary credentials: credentials cannot span more than 31 days")
	}
	if opts.ClientID != "" && opts.ClientID == opts.Issuer.ClientID {
		return Credentials{}, errors.New("creating temporary credentials: the name must differ from the issuer's clientId")
	}
	for _, s := range opts.Scopes {
		if !ValidScope(s) {
			return Credentials{}, fmt.Errorf("creating temporary credentials: invalid scope %q", s)
		}
	}
	seed := opts.Seed
	if seed == "" {
		var err error
		seed, err = NewAccessToken()
		if err != nil {
			return Credentials{}, fmt.Errorf("creating temporary credentials: %w", err)
		}
	}
	if len(seed) != 44 {
		return Credentials{}, errors.New("creating temporary credentials: seed must be 44 characters")
	}
	scopes := opts.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	cert := Certificate{
		Version: 1,
		Scopes:  scopes,
		Start:   opts.Start.UnixMilli(),
		Expiry:  opts.Expiry.UnixMilli(),
		Seed:    seed,
	}
	clientID := opts.Issuer.ClientID
	if opts.ClientID != "" {
		cert.Issuer = opts.Issuer.ClientID
		clientID = opts.ClientID
	}
	cert.Signature = CertificateSignature(opts.Issuer.AccessToken,
		SignatureString(opts.ClientID, cert.Issuer, cert.Seed, strconv.FormatInt(cert.Start, 10), strconv.FormatInt(cert.Expiry, 10), cert.Scopes))
	certJSON, err := json.Marshal(cert)
	if err != nil {
		return Credentials{}, fmt.Errorf("encoding certificate: %w", err)
	}
	return Credentials{
		ClientID:    clientID,
		AccessToken: DeriveAccessToken(opts.Issuer.AccessToken, seed),
		Certificate: string(certJSON),
	}, nil
}

// SignatureString returns the text a certificate signature covers, in the
// form Taskcluster's server checks ("scopes:" followed by one line per
// scope, no trailing newline). clientID and issuer are both empty for
// unnamed credentials; start and expiry are the decimal renderings of
// the certificate's numbers.
func SignatureString(clientID, issuer, seed, start, expiry string, scopes []string) string {
	var b strings.Builder
	b.WriteString("version:1\n")
	if issuer != "" {
		b.WriteString("clientId:" + clientID + "\n")
		b.WriteString("issuer:" + issuer + "\n")
	}
	b.WriteString("seed:" + seed + "\n")
	b.WriteString("start:" + start + "\n")
	b.WriteString("expiry:" + expiry + "\n")
	b.WriteString("scopes:")
	for _, s := range scopes {
		b.WriteString("\n" + s)
	}
	return b.String()
}

// CertificateSignature returns base64(HMAC-SHA256(issuerAccessToken, text)).
func CertificateSignature(issuerAccessToken, text string) string {
	m := hmac.New(sha256.New, []byte(issuerAccessToken))
	m.Write([]byte(text))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// DeriveAccessToken returns the access token of temporary credentials:
// base64url without padding of HMAC-SHA256(issuerAccessToken, seed).
func DeriveAccessToken(issuerAccessToken, seed string) string {
	m := hmac.New(sha256.New, []byte(issuerAccessToken))
	m.Write([]byte(seed))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// TaskCredentialsOptions describe the credentials the queue hands to a
// worker that claimed a run.
type TaskCredentialsOptions struct {
	TaskID      string
	RunID       int
	WorkerGroup string
	WorkerID    string
	// TakenUntil ends the claim and the credentials (the server's five
	// minutes of certificate tolerance give the grace).
	TakenUntil time.Time
	// TaskScopes are the task's own scopes, appended after the run scopes.
	TaskScopes []string
	// Now starts the credentials.
	Now time.Time
	// Issuer is the queue's own identity, which must hold
	// auth:create-client:task-client/* and every scope it delegates.
	Issuer Credentials
	// Seed is for tests; empty generates a random one.
	Seed string
}

// TaskCredentials issues the named temporary credentials of a claimed run:
// clientId task-client/<taskId>/<runId>/on/<workerGroup>/<workerId>/until/<takenUntil
// in seconds, fractional when needed>, valid from now until takenUntil,
// with the reclaim/resolve/create-artifact scopes of the run followed by
// the task's scopes.
func TaskCredentials(opts TaskCredentialsOptions) (Credentials, error) {
	run := opts.TaskID + "/" + strconv.Itoa(opts.RunID)
	scopes := make([]string, 0, 3+len(opts.TaskScopes))
	scopes = append(scopes,
		"queue:reclaim-task:"+run,
		"queue:resolve-task:"+run,
		"queue:create-artifact:"+run,
	)
	scopes = append(scopes, opts.TaskScopes...)
	until := jsvalue.NumberString(float64(opts.TakenUntil.UnixMilli()) / 1000)
	creds, err := CreateTemporaryCredentials(TemporaryCredentialsOptions{
		ClientID: "task-client/" + run + "/on/" + opts.WorkerGroup + "/" + opts.WorkerID + "/until/" + until,
		Start:    opts.Now,
		Expiry:   opts.TakenUntil,
		Scopes:   scopes,
		Issuer:   opts.Issuer,
		Seed:     opts.Seed,
	})
	if err != nil {
		return Credentials{}, fmt.Errorf("issuing task credentials for %s: %w", run, err)
	}
	return creds, nil
}

// Ext returns the base64 JSON ext attribute carrying a certificate and/or
// authorizedScopes, as the official clients build it, or "" when neither
// applies. authorizedScopes nil means no restriction (an empty non-nil
// slice restricts to nothing but the anonymous role).
func Ext(certificate string, authorizedScopes []string) (string, error) {
	var b strings.Builder
	b.WriteByte('{')
	if certificate != "" {
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(certificate)); err != nil {
			return "", fmt.Errorf("decoding certificate: %w", err)
		}
		b.WriteString(`"certificate":`)
		b.Write(compact.Bytes())
	}
	if authorizedScopes != nil {
		if certificate != "" {
			b.WriteByte(',')
		}
		var list bytes.Buffer
		enc := json.NewEncoder(&list)
		// JavaScript does not escape <, > and &; neither do we, so the
		// ext is byte-identical to the official clients'.
		enc.SetEscapeHTML(false)
		if err := enc.Encode(authorizedScopes); err != nil {
			return "", fmt.Errorf("encoding authorizedScopes: %w", err)
		}
		b.WriteString(`"authorizedScopes":`)
		b.Write(bytes.TrimSuffix(list.Bytes(), []byte("\n")))
	}
	if certificate == "" && authorizedScopes == nil {
		return "", nil
	}
	b.WriteByte('}')
	return base64.StdEncoding.EncodeToString([]byte(b.String())), nil
}
