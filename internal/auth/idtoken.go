package auth

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The life of an identity-token signing key (docs/identity.md). A key is
// published in the JWKS as soon as it is made, starts signing
// SigningKeyLead later (verifiers that cache the key set have fetched it
// by then), signs for SigningKeyRotation, and stays published until
// MaxIDTokenLifetime after its successor took over, when no token it
// signed is valid any more.
const (
	SigningKeyLead     = time.Hour
	SigningKeyRotation = 7 * 24 * time.Hour
	MaxIDTokenLifetime = 24 * time.Hour
	// SigningAlgorithm is what every cloud's token exchange accepts.
	SigningAlgorithm = string(jose.RS256)
	signingKeyBits   = 2048
)

// ScopeCreateIDTokenPrefix starts the scope a task needs for an identity
// token of an audience, auth:create-id-token:<audience>: named after its
// method (createIdToken) as Taskcluster names auth:create-client after
// createClient, with the audience last so a role can grant a family of
// audiences with a trailing *.
const ScopeCreateIDTokenPrefix = "auth:create-id-token:"

// SigningKey is an identity-token signing key in the clear.
type SigningKey struct {
	Generation int64
	KeyID      string
	Private    *rsa.PrivateKey
	// Created is when it was made (and published); Activates when it
	// starts signing.
	Created, Activates time.Time
}

// NewSigningKey makes generation gen's key at now. The first key signs at
// once (nobody can hold an older key set); later ones after the lead.
func NewSigningKey(gen int64, now time.Time) (*SigningKey, error) {
	priv, err := rsa.GenerateKey(rand.Reader, signingKeyBits)
	if err != nil {
		return nil, fmt.Errorf("generating a signing key: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encoding a signing key: %w", err)
	}
	sum := sha256.Sum256(der)
	k := &SigningKey{Generation: gen, KeyID: base64.RawURLEncoding.EncodeToString(sum[:16]), Private: priv, Created: now, Activates: now}
	if gen > 1 {
		k.Activates = now.Add(SigningKeyLead)
	}
	return k, nil
}

// MarshalPrivate encodes the private key (PKCS#8, base64) for sealing.
func (k *SigningKey) MarshalPrivate() (string, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.Private)
	if err != nil {
		return "", fmt.Errorf("encoding signing key %s: %w", k.KeyID, err)
	}
	return base64.StdEncoding.EncodeToString(der), nil
}

// ParsePrivate decodes what MarshalPrivate encoded.
func ParsePrivate(s string) (*rsa.PrivateKey, error) {
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("decoding a signing key: %w", err)
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parsing a signing key: %w", err)
	}
	rsaKey, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("a signing key is not an RSA key")
	}
	return rsaKey, nil
}

// KeySchedule answers, for the stored keys (oldest generation first),
// which signs, which are published and whether the next is due.
type KeySchedule []SigningKey

// Signing returns the key that signs at now: the newest that has
// activated; nil if none has.
func (s KeySchedule) Signing(now time.Time) *SigningKey {
	for i := len(s) - 1; i >= 0; i-- {
		if !s[i].Activates.After(now) {
			return &s[i]
		}
	}
	return nil
}

// Published returns the keys verifiers must know at now: every key made,
// except those whose successor took over more than MaxIDTokenLifetime ago.
func (s KeySchedule) Published(now time.Time) []SigningKey {
	var out []SigningKey
	for i, k := range s {
		if k.Created.After(now) {
			continue
		}
		retired := false
		for _, later := range s[i+1:] {
			if !later.Activates.After(now) && now.Sub(later.Activates) > MaxIDTokenLifetime {
				retired = true
				break
			}
		}
		if !retired {
			out = append(out, k)
		}
	}
	return out
}

// NextGeneration returns the generation to make at now, or 0 when none is
// due: the first key, or the next when the newest has signed for
// SigningKeyRotation less the lead (so the next activates as the newest's
// time is up).
func (s KeySchedule) NextGeneration(now time.Time) int64 {
	if len(s) == 0 {
		return 1
	}
	newest := s[len(s)-1]
	if now.Before(newest.Activates.Add(SigningKeyRotation - SigningKeyLead)) {
		return 0
	}
	return newest.Generation + 1
}

// JWKS is the published key set, in the JSON a verifier fetches.
func (s KeySchedule) JWKS(now time.Time) jose.JSONWebKeySet {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, k := range s.Published(now) {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.Private.PublicKey, KeyID: k.KeyID, Algorithm: SigningAlgorithm, Use: "sig"})
	}
	return set
}

// Sign signs claims (a JSON object) as a compact JWT with key.
func Sign(key *SigningKey, claims any) (string, error) {
	opts := (&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), key.KeyID)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key.Private}, opts)
	if err != nil {
		return "", fmt.Errorf("preparing to sign with key %s: %w", key.KeyID, err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("signing a token with key %s: %w", key.KeyID, err)
	}
	return tok, nil
}

// PublicKey returns the public half, for verifiers in tests and tools.
func (k *SigningKey) PublicKey() crypto.PublicKey { return &k.Private.PublicKey }

// ForgeClaims are what the forge integration vouches for about a task it
// created (stored as JSON in store.TaskIdentity.Claims): which repository, ref and commit,
// which event, and whether the change came from an untrusted pull
// request.
type ForgeClaims struct {
	// Host is the forge's host as configured (github.com); Repository
	// is <organization>/<repository>.
	Host       string `json:"forge_host"`
	Repository string `json:"repository"`
	// Ref is the git ref built: refs/heads/<branch>, refs/tags/<tag>,
	// refs/pull/<n>/head.
	Ref string `json:"ref"`
	SHA string `json:"sha"`
	// Event is Taskcluster's event type (push, tag, release,
	// pull_request.<action>, issue_comment.<action>).
	Event       string `json:"event"`
	PullRequest int    `json:"pull_request,omitempty"`
	// Untrusted says the change came from a pull request hopper does not
	// trust (a fork's, by the repository's policy).
	Untrusted bool `json:"untrusted_pull_request"`
	// Role is the role the task's scopes came from, which is also the
	// token's subject: repo:<host>/<org>/<repo>:branch:<b>, :tag:<t>,
	// :pull-request, :pull-request-untrusted or :release:<action>.
	Role string `json:"role"`
}

// TokenRequest is what an identity token is made from.
type TokenRequest struct {
	// Issuer is hopper's root URL.
	Issuer   string
	Audience string
	TaskID   string
	RunID    int
	// TaskGroupID, TaskQueueID, SchedulerID, ProjectID come from the
	// task's definition.
	TaskGroupID, TaskQueueID, SchedulerID, ProjectID string
	WorkerGroup, WorkerID                            string
	// Forge is set for tasks the forge integration created.
	Forge *ForgeClaims
	// Now is when it is issued; TakenUntil when the run's claim ends.
	Now, TakenUntil time.Time
}

// Subject is the token's sub. For a task a forge event created it is the
// role its scopes came from (repo:<host>/<org>/<repo>:branch:main, …:
// pull-request-untrusted), so a cloud's policy trusts the same thing
// hopper's roles grant to, and a fork's pull request can never carry a
// branch's subject. Any other task is named by what creating it required
// scopes for: project:<projectId>:task-queue:<taskQueueId>.
func (r *TokenRequest) Subject() string {
	if r.Forge != nil && r.Forge.Role != "" {
		return r.Forge.Role
	}
	return "project:" + r.ProjectID + ":task-queue:" + r.TaskQueueID
}

// Expiry is when the token expires: with the run's claim, and never
// later than MaxIDTokenLifetime.
func (r *TokenRequest) Expiry() time.Time {
	if limit := r.Now.Add(MaxIDTokenLifetime); r.TakenUntil.After(limit) {
		return limit
	}
	return r.TakenUntil
}

// Claims returns the token's claims as a JSON object.
func (r *TokenRequest) Claims() map[string]any {
	c := map[string]any{
		"iss": r.Issuer, "sub": r.Subject(), "aud": r.Audience,
		"iat": r.Now.Unix(), "nbf": r.Now.Unix() - 5, "exp": r.Expiry().Unix(),
		"jti":     r.TaskID + "/" + strconv.Itoa(r.RunID) + "/" + strconv.FormatInt(r.Now.UnixNano(), 36),
		"task_id": r.TaskID, "run_id": r.RunID, "task_group_id": r.TaskGroupID,
		"task_queue_id": r.TaskQueueID, "scheduler_id": r.SchedulerID, "project_id": r.ProjectID,
		"worker_group": r.WorkerGroup, "worker_id": r.WorkerID,
	}
	if f := r.Forge; f != nil {
		c["forge_host"], c["repository"], c["ref"], c["sha"] = f.Host, f.Repository, f.Ref, f.SHA
		c["event"], c["untrusted_pull_request"] = f.Event, f.Untrusted
		if f.PullRequest != 0 {
			c["pull_request"] = f.PullRequest
		}
	}
	return c
}

// ClaimNames lists every claim a token may carry (the discovery
// document's claims_supported).
func ClaimNames() []string {
	return []string{"iss", "sub", "aud", "iat", "nbf", "exp", "jti", "task_id", "run_id", "task_group_id", "task_queue_id",
		"scheduler_id", "project_id", "worker_group", "worker_id", "forge_host", "repository", "ref", "sha", "event",
		"pull_request", "untrusted_pull_request"}
}

// EncodeForgeClaims is the stored form of a task's forge claims.
func EncodeForgeClaims(f *ForgeClaims) (string, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return "", fmt.Errorf("encoding forge claims: %w", err)
	}
	return string(b), nil
}

// DecodeForgeClaims reads what EncodeForgeClaims wrote.
func DecodeForgeClaims(s string) (*ForgeClaims, error) {
	var f ForgeClaims
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		return nil, fmt.Errorf("decoding forge claims: %w", err)
	}
	return &f, nil
}

// RunCredentials is what a run's credentials name (TaskCredentials'
// clientId: task-client/<taskId>/<runId>/on/<workerGroup>/<workerId>/until/<t>).
type RunCredentials struct {
	TaskID                string
	RunID                 int
	WorkerGroup, WorkerID string
}

// ParseRunClientID reads a run's credentials' clientId; false if clientID
// is not one.
func ParseRunClientID(clientID string) (RunCredentials, bool) {
	rest, ok := strings.CutPrefix(clientID, "task-client/")
	if !ok {
		return RunCredentials{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 7 || parts[2] != "on" || parts[5] != "until" {
		return RunCredentials{}, false
	}
	run, err := strconv.Atoi(parts[1])
	if err != nil || run < 0 || strconv.Itoa(run) != parts[1] {
		return RunCredentials{}, false
	}
	return RunCredentials{TaskID: parts[0], RunID: run, WorkerGroup: parts[3], WorkerID: parts[4]}, true
}
