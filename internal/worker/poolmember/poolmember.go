// Package poolmember is a worker's side of a worker pool: it registers
// with the Worker Manager using the static secret an operator gave the
// machine, receives temporary credentials and the pool's worker config,
// reads the rest of its config from the secret worker-pool:<workerPoolId>,
// reregisters before the credentials expire, and notices when the worker
// is removed from the pool. It talks to hopper only through tcclient, as
// Taskcluster's worker-runner does with provider "static".
package poolmember

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// The defaults of Options' settings.
const (
	DefaultProviderID = "static"
	DefaultCheckEvery = 30 * time.Second
)

// Options say which pool member this machine is.
type Options struct {
	RootURL      string
	WorkerPoolID string
	// ProviderID is the pool's provider (default DefaultProviderID).
	ProviderID   string
	WorkerGroup  string
	WorkerID     string
	StaticSecret string
	// Proof, if set, is the workerIdentityProof to register with instead
	// of the static secret (a Kubernetes Pod's token: {"kubernetesToken": …}).
	Proof      map[string]string
	HTTPClient *http.Client
	Logger     *slog.Logger
	// CheckEvery is how often the member asks whether it was removed
	// (default DefaultCheckEvery).
	CheckEvery time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Member is a registered worker of a pool.
type Member struct {
	opts Options

	mu      sync.Mutex
	creds   tcclient.Credentials
	expires time.Time
	secret  string

	// WorkerConfig is the pool's workerConfig; SecretConfig the "config"
	// of the secret worker-pool:<workerPoolId> (nil when there is none).
	WorkerConfig json.RawMessage
	SecretConfig json.RawMessage
}

func (o *Options) defaults() {
	if o.ProviderID == "" {
		o.ProviderID = DefaultProviderID
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = DefaultCheckEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

func (o *Options) client(creds *tcclient.Credentials) *tcclient.Client {
	return &tcclient.Client{RootURL: o.RootURL, Credentials: creds, HTTPClient: o.HTTPClient}
}

// Register registers the worker and reads its config.
func Register(ctx context.Context, opts Options) (*Member, error) {
	opts.defaults()
	proof := opts.Proof
	if proof == nil {
		if opts.StaticSecret == "" {
			return nil, errors.New("no static secret: the worker pool's operator gives each machine one (createWorker)")
		}
		proof = map[string]string{"staticSecret": opts.StaticSecret}
	}
	reg, err := opts.client(nil).RegisterWorker(ctx, opts.WorkerPoolID, opts.ProviderID, opts.WorkerGroup, opts.WorkerID, proof)
	if err != nil {
		return nil, fmt.Errorf("registering worker %s/%s in pool %s: %w", opts.WorkerGroup, opts.WorkerID, opts.WorkerPoolID, err)
	}
	m := &Member{opts: opts, creds: reg.Credentials, expires: reg.Expires.Time, secret: reg.Secret, WorkerConfig: reg.WorkerConfig}
	sec, err := opts.client(&m.creds).GetSecret(ctx, "worker-pool:"+opts.WorkerPoolID)
	var apiErr *tcclient.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound:
	case err != nil:
		return nil, fmt.Errorf("reading the pool's secret worker-pool:%s: %w", opts.WorkerPoolID, err)
	default:
		var value struct {
			Config json.RawMessage `json:"config"`
		}
		if err := json.Unmarshal(sec.Secret, &value); err != nil {
			return nil, fmt.Errorf("the secret worker-pool:%s is not an object: %w", opts.WorkerPoolID, err)
		}
		m.SecretConfig = value.Config
	}
	opts.Logger.Info("registered with the worker manager", "workerPoolId", opts.WorkerPoolID, "workerGroup", opts.WorkerGroup,
		"workerId", opts.WorkerID, "credentialsExpire", reg.Expires.Time)
	return m, nil
}

// Credentials returns the current credentials.
func (m *Member) Credentials() tcclient.Credentials {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.creds
}

// Expires returns when the current credentials expire.
func (m *Member) Expires() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.expires
}

// renewAt is when to reregister: when a quarter of the credentials'
// remaining lifetime is left, or a minute if that is more, but never
// before half of it has passed (short lifetimes renew at half-time).
func renewAt(now, expires time.Time) time.Time {
	left := expires.Sub(now)
	if left <= 0 {
		return now
	}
	margin := min(max(left/4, time.Minute), left/2)
	return expires.Add(-margin)
}

// Reregister trades the last secret for fresh credentials.
func (m *Member) Reregister(ctx context.Context) error {
	m.mu.Lock()
	creds, secret := m.creds, m.secret
	m.mu.Unlock()
	o := m.opts
	reg, err := o.client(&creds).ReregisterWorker(ctx, o.WorkerPoolID, o.WorkerGroup, o.WorkerID, secret)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.creds, m.expires, m.secret = reg.Credentials, reg.Expires.Time, reg.Secret
	m.mu.Unlock()
	o.Logger.Info("reregistered with the worker manager", "credentialsExpire", reg.Expires.Time)
	return nil
}

// Run keeps the membership until ctx ends or the worker is removed: it
// reregisters in time, passing each new set of credentials to renewed, and
// calls removed once with the reason when the Worker Manager says the
// worker should stop (removed or expired) or refuses to reregister it.
func (m *Member) Run(ctx context.Context, renewed func(tcclient.Credentials), removed func(reason string)) {
	o := m.opts
	check := time.NewTicker(o.CheckEvery)
	defer check.Stop()
	for {
		wait := renewAt(o.Now(), m.Expires()).Sub(o.Now())
		renew := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			renew.Stop()
			return
		case <-check.C:
			renew.Stop()
			creds := m.Credentials()
			stop, reason, err := o.client(&creds).ShouldWorkerTerminate(ctx, o.WorkerPoolID, o.WorkerGroup, o.WorkerID)
			if err != nil {
				if refused(err) {
					removed("the worker manager no longer knows this worker: " + err.Error())
					return
				}
				o.Logger.Warn("asking the worker manager whether to stop", "error", err)
				continue
			}
			if stop {
				removed(reason)
				return
			}
		case <-renew.C:
			err := m.Reregister(ctx)
			if err == nil {
				renewed(m.Credentials())
				continue
			}
			if refused(err) {
				removed("reregistration refused: " + err.Error())
				return
			}
			o.Logger.Warn("reregistering with the worker manager (will retry)", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
		}
	}
}

// refused says the Worker Manager answered no (4xx), as opposed to an
// outage worth retrying.
func refused(err error) bool {
	var apiErr *tcclient.APIError
	return errors.As(err, &apiErr) && apiErr.StatusCode >= 400 && apiErr.StatusCode < 500
}
