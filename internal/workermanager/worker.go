package workermanager

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// State is a worker's state as worker-manager knows it.
type State string

// The states, in the only order a worker passes through them (a static
// worker starts running; some removals go straight to stopped).
const (
	StateRequested State = "requested"
	StateRunning   State = "running"
	StateStopping  State = "stopping"
	StateStopped   State = "stopped"
)

// ValidState reports whether s names a state.
func ValidState(s string) bool {
	switch State(s) {
	case StateRequested, StateRunning, StateStopping, StateStopped:
		return true
	}
	return false
}

// Worker is one worker of a pool.
type Worker struct {
	WorkerPoolID string
	WorkerGroup  string
	WorkerID     string
	ProviderID   string
	State        State
	Capacity     int
	// LaunchConfigID is the launch configuration that started the worker
	// ("" for none).
	LaunchConfigID string
	Created        time.Time
	Expires        time.Time
	LastModified   time.Time
	LastChecked    time.Time
	// StaticSecretHash is the SHA-256 of a static worker's staticSecret:
	// the secret itself is never stored.
	StaticSecretHash string
	// SecretHash is the SHA-256 of the secret the last registration or
	// reregistration handed out ("" before the first).
	SecretHash string
	// PreviousSecretHash is the SHA-256 of the secret presented to get
	// the current one ("" when none): accepted again until the current
	// one is first used, for a worker whose answer was lost.
	PreviousSecretHash string
	// RegisteredAt is the first registration's time (zero before).
	RegisteredAt time.Time
	// TerminateAfter is the deadline of the next registration: a
	// requested worker must register by then, a running one reregister.
	TerminateAfter time.Time
	// ProviderData is the provider's own record of the worker (a
	// container's id and host).
	ProviderData json.RawMessage
}

// Key names a worker.
type Key struct {
	WorkerPoolID, WorkerGroup, WorkerID string
}

// Key returns the worker's key.
func (w *Worker) Key() Key { return Key{w.WorkerPoolID, w.WorkerGroup, w.WorkerID} }

func (k Key) String() string { return k.WorkerPoolID + "/" + k.WorkerGroup + "/" + k.WorkerID }

// Error is a refusal the API answers as InputError (400).
type Error struct{ Message string }

func (e *Error) Error() string { return e.Message }

func refuse(format string, args ...any) error { return &Error{Message: fmt.Sprintf(format, args...)} }

// HashSecret returns the stored form of a secret.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// secretMatches compares a presented secret with a stored hash in
// constant time; an empty hash matches nothing.
func secretMatches(hash, secret string) bool {
	if hash == "" {
		return false
	}
	got := HashSecret(secret)
	return subtle.ConstantTimeCompare([]byte(got), []byte(hash)) == 1
}

// NewStaticWorker is a worker createWorker adds to a static pool: running
// from the start (it exists as soon as an operator says so), known by the
// hash of its static secret.
func NewStaticWorker(pool *Pool, group, id string, capacity int, expires time.Time, staticSecret string, now time.Time) (*Worker, error) {
	if staticSecret == "" {
		return nil, refuse("no worker staticSecret provided")
	}
	if !expires.After(now) {
		return nil, refuse("worker.expires must be in the future")
	}
	if capacity < 1 {
		capacity = 1
	}
	return &Worker{
		WorkerPoolID: pool.WorkerPoolID, WorkerGroup: group, WorkerID: id, ProviderID: pool.ProviderID,
		State: StateRunning, Capacity: capacity, Created: now, Expires: expires, LastModified: now, LastChecked: now,
		StaticSecretHash: HashSecret(staticSecret), ProviderData: json.RawMessage(`{}`),
	}, nil
}

// SameStaticWorker reports whether a second createWorker for an existing
// worker asks for the same thing (then it answers the existing worker, as
// Taskcluster does, instead of a conflict).
func (w *Worker) SameStaticWorker(providerID, staticSecret string) bool {
	return w.ProviderID == providerID && secretMatches(w.StaticSecretHash, staticSecret)
}

// UpdateStatic applies updateWorker to a static worker: expiry (which may
// be in the past, to expire it at once), capacity and, when given, a new
// static secret.
func (w *Worker) UpdateStatic(capacity int, expires time.Time, staticSecret string, now time.Time) {
	if capacity < 1 {
		capacity = 1
	}
	w.Capacity = capacity
	w.Expires = expires
	if staticSecret != "" {
		w.StaticSecretHash = HashSecret(staticSecret)
	}
	w.LastModified = now
}

// NewRequestedWorker is a worker a dynamic provider is about to start: it
// must register before TerminateAfter.
func NewRequestedWorker(pool *Pool, group, id string, capacity int, now time.Time) *Worker {
	l := pool.Lifecycle()
	return &Worker{
		WorkerPoolID: pool.WorkerPoolID, WorkerGroup: group, WorkerID: id, ProviderID: pool.ProviderID,
		State: StateRequested, Capacity: max(capacity, 1), Created: now, LastModified: now, LastChecked: now,
		Expires: now.Add(l.ReregistrationTimeout + 24*time.Hour), TerminateAfter: now.Add(l.registrationDeadline()),
		ProviderData: json.RawMessage(`{}`),
	}
}

// registrationDeadline is how long a requested worker has to register:
// the registration timeout when it is set and shorter than the
// reregistration timeout, else the reregistration timeout.
func (l Lifecycle) registrationDeadline() time.Duration {
	if l.RegistrationTimeout > 0 && l.RegistrationTimeout < l.ReregistrationTimeout {
		return l.RegistrationTimeout
	}
	return l.ReregistrationTimeout
}

// Registration is what a successful registerWorker or reregisterWorker
// hands the worker besides credentials.
type Registration struct {
	// Expires is when the credentials expire: the worker must reregister
	// (static) or be gone (dynamic) by then.
	Expires time.Time
	// SecretHash is the hash of the new reregistration secret, stored on
	// the worker.
	SecretHash string
}

// Register checks a registerWorker call against the worker and the pool
// and records the registration: the worker runs, the secret it will
// reregister with is the one hashed in secretHash, and it must reregister
// before the returned expiry. staticSecret is the identity proof of a
// static worker ("" for other providers, whose proof the provider checks).
func (w *Worker) Register(pool *Pool, providerType, providerID, staticSecret, newSecret string, now time.Time) (Registration, error) {
	if w.ProviderID != providerID {
		return Registration{}, refuse("Worker %s/%s does not have provider %s", w.WorkerGroup, w.WorkerID, providerID)
	}
	if w.Expires.Before(now) {
		return Registration{}, refuse("Worker %s/%s has expired", w.WorkerGroup, w.WorkerID)
	}
	switch providerType {
	case ProviderTypeStatic:
		// A static machine registers again each time its worker-runner
		// starts: allowed while it runs, never after removal.
		if w.State != StateRunning {
			return Registration{}, refuse("worker is not running")
		}
		if staticSecret == "" {
			return Registration{}, refuse("missing staticSecret in workerIdentityProof")
		}
		if !secretMatches(w.StaticSecretHash, staticSecret) {
			return Registration{}, refuse("bad staticSecret in workerIdentityProof")
		}
	default:
		// A dynamic worker registers once: a second registration is
		// someone else presenting the same proof.
		if w.State != StateRequested {
			return Registration{}, refuse("worker %s/%s is already running or stopped (state %s)", w.WorkerGroup, w.WorkerID, w.State)
		}
		if staticSecret == "" || !secretMatches(w.StaticSecretHash, staticSecret) {
			return Registration{}, refuse("bad staticSecret in workerIdentityProof")
		}
		// One-shot: the proof cannot be presented again.
		w.StaticSecretHash = ""
	}
	return w.registered(pool, newSecret, now), nil
}

// RegisterProven records the registration of a dynamic worker whose
// provider checked its proof (a Kubernetes Pod's bound service-account
// token, checked by the cluster): like Register, once only, while it is
// requested, so a proof replayed after the worker registered is refused.
func (w *Worker) RegisterProven(pool *Pool, providerID, newSecret string, now time.Time) (Registration, error) {
	if w.ProviderID != providerID {
		return Registration{}, refuse("Worker %s/%s does not have provider %s", w.WorkerGroup, w.WorkerID, providerID)
	}
	if w.Expires.Before(now) {
		return Registration{}, refuse("Worker %s/%s has expired", w.WorkerGroup, w.WorkerID)
	}
	if w.State != StateRequested {
		return Registration{}, refuse("worker %s/%s is already running or stopped (state %s)", w.WorkerGroup, w.WorkerID, w.State)
	}
	return w.registered(pool, newSecret, now), nil
}

// RecordProven records what a provider's check of a registering
// worker's proof established of what runs it (its Pod's UID), unless the
// provider's record of its start is already stored: a worker may
// register before the provisioner records what its start returned, and
// that record, written later, says the same.
func (w *Worker) RecordProven(data json.RawMessage) {
	if len(data) == 0 {
		return
	}
	if s := strings.TrimSpace(string(w.ProviderData)); s == "" || s == "{}" || s == "null" {
		w.ProviderData = data
	}
}

// registered moves a worker whose registration was accepted to running.
func (w *Worker) registered(pool *Pool, newSecret string, now time.Time) Registration {
	l := pool.Lifecycle()
	expires := now.Add(l.ReregistrationTimeout)
	w.State = StateRunning
	if w.RegisteredAt.IsZero() {
		w.RegisteredAt = now
	}
	w.SecretHash = HashSecret(newSecret)
	// A registration starts the chain of secrets afresh.
	w.PreviousSecretHash = ""
	w.TerminateAfter = expires
	w.LastModified = now
	return Registration{Expires: expires, SecretHash: w.SecretHash}
}

// errNoCredentials is the answer to every reregistration that does not
// match, whatever the reason: it tells a guesser nothing.
func errNoCredentials() error { return refuse("Could not generate credentials for this secret") }

// Reregister checks a reregisterWorker call and records it: the secret
// must be the one the last (re)registration handed out, the worker must be
// running and unexpired. The new deadline is the reregistration timeout
// from now.
//
// A worker whose answer was lost (the replica that committed it killed
// before it answered, the connection cut) still holds the secret it
// presented, and the one handed out never reached it. So the presented
// secret stays good until the new one is first used: presenting it again
// hands out another secret in place of the lost one. At most two secrets
// are ever good, the newest and the one traded for it, and using the
// newest retires the older; the caller also needs the worker's
// credentials (the reregister-worker scope).
func (w *Worker) Reregister(pool *Pool, secret, newSecret string, now time.Time) (Registration, error) {
	current := secretMatches(w.SecretHash, secret)
	if !current && !secretMatches(w.PreviousSecretHash, secret) {
		return Registration{}, errNoCredentials()
	}
	if w.State != StateRunning {
		return Registration{}, refuse("Worker %s/%s is not running", w.WorkerGroup, w.WorkerID)
	}
	if w.Expires.Before(now) {
		return Registration{}, refuse("Worker %s/%s has expired", w.WorkerGroup, w.WorkerID)
	}
	reregistration := DefaultReregistrationTimeout
	if pool != nil {
		reregistration = pool.Lifecycle().ReregistrationTimeout
	}
	expires := now.Add(reregistration)
	if current {
		w.PreviousSecretHash = w.SecretHash
	}
	w.SecretHash = HashSecret(newSecret)
	w.TerminateAfter = expires
	w.LastModified = now
	return Registration{Expires: expires, SecretHash: w.SecretHash}, nil
}

// Remove records removeWorker: a static worker stops at once (nothing
// runs it but the machine, which learns it at its next call); a dynamic
// worker goes stopping until its provider has stopped what runs it. It
// reports whether the worker was not already on its way out.
func (w *Worker) Remove(providerType string, now time.Time) bool {
	if w.State == StateStopping || w.State == StateStopped {
		return false
	}
	if providerType == ProviderTypeStatic {
		w.State = StateStopped
	} else {
		w.State = StateStopping
	}
	// Credentials stop being renewable at once.
	w.SecretHash, w.PreviousSecretHash = "", ""
	w.LastModified = now
	return true
}

// Stopped records that nothing runs the worker any more.
func (w *Worker) Stopped(now time.Time) {
	w.State = StateStopped
	w.SecretHash, w.PreviousSecretHash = "", ""
	w.LastModified = now
}

// ClientID is the clientId of a registered worker's temporary credentials.
func (w *Worker) ClientID() string {
	return "worker/" + w.ProviderID + "/" + w.WorkerPoolID + "/" + w.WorkerGroup + "/" + w.WorkerID
}

// KeyOfClientID reads the worker a registered worker's clientId names
// (ClientID's form: worker/<providerId>/<provisionerId>/<workerType>/<workerGroup>/<workerId>);
// ok is false for any other clientId.
func KeyOfClientID(clientID string) (k Key, ok bool) {
	rest, found := strings.CutPrefix(clientID, "worker/")
	if !found {
		return Key{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 5 {
		return Key{}, false
	}
	for _, p := range parts {
		if p == "" {
			return Key{}, false
		}
	}
	return Key{WorkerPoolID: parts[1] + "/" + parts[2], WorkerGroup: parts[3], WorkerID: parts[4]}, true
}

// CredentialScopes are the scopes a registered worker's credentials
// carry, as Taskcluster gives them: the pool's and the worker's roles,
// its queue identity, the pool's secrets, claiming from its task queue,
// and removing, reregistering and asking about itself.
func (w *Worker) CredentialScopes() []string {
	pool, wk := w.WorkerPoolID, w.WorkerGroup+"/"+w.WorkerID
	return []string{
		"assume:worker-type:" + pool,
		"assume:worker-pool:" + pool,
		"assume:worker-id:" + wk,
		"queue:worker-id:" + wk,
		"secrets:get:worker-type:" + pool,
		"secrets:get:worker-pool:" + pool,
		"queue:claim-work:" + pool,
		"worker-manager:remove-worker:" + pool + "/" + wk,
		"worker-manager:reregister-worker:" + pool + "/" + wk,
		"worker-manager:should-worker-terminate:" + pool + "/" + wk,
	}
}

// CredentialStartSkew is how far back a registration's credentials
// start, for clocks behind the server's.
const CredentialStartSkew = 15 * time.Minute
