package authapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/store"
)

// KeyStore is where the Keyring keeps its keys (store.IdentityStore).
type KeyStore interface {
	ListSigningKeys(ctx context.Context) ([]store.SigningKey, error)
	AddSigningKey(ctx context.Context, k *store.SigningKey) (bool, error)
}

// keyRecheck bounds how stale a replica's view of the keys may be. It is
// far shorter than auth.SigningKeyLead, so every replica publishes a new
// key long before any replica signs with it.
const keyRecheck = time.Minute

// Keyring holds the identity-token signing keys: stored sealed with the
// server key (the KeyID is the associated data), the same on every
// replica, rotated by whichever replica finds the next one due
// (auth.KeySchedule). It is safe for concurrent use.
type Keyring struct {
	store  KeyStore
	sealer *auth.Sealer
	clock  clock.Clock

	mu       sync.Mutex
	keys     auth.KeySchedule
	loadedAt time.Time
}

// NewKeyring returns a keyring over the store; keys are loaded (and the
// first made) on first use.
func NewKeyring(st KeyStore, sealer *auth.Sealer, clock clock.Clock) *Keyring {
	return &Keyring{store: st, sealer: sealer, clock: clock}
}

// Schedule returns the current keys, loading them when the copy in memory
// is older than keyRecheck and making the next generation when it is due.
func (k *Keyring) Schedule(ctx context.Context) (auth.KeySchedule, time.Time, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.clock.Now()
	if k.keys == nil || now.Sub(k.loadedAt) >= keyRecheck || now.Before(k.loadedAt) || k.keys.NextGeneration(now) != 0 {
		if err := k.load(ctx, now); err != nil {
			return nil, now, err
		}
		if gen := k.keys.NextGeneration(now); gen != 0 {
			if err := k.add(ctx, gen, now); err != nil {
				return nil, now, err
			}
			if err := k.load(ctx, now); err != nil {
				return nil, now, err
			}
		}
	}
	return k.keys, now, nil
}

// DefaultKeyRotateEvery is how often the keys' duty calls Rotate: far
// shorter than the hour a new key is published before it signs.
const DefaultKeyRotateEvery = 5 * time.Minute

// Rotate makes the next key if it is due. It is the keys' duty's pass
// (internal/server schedules it every DefaultKeyRotateEvery with
// maintenance.Every), so a key is made and published ahead of use even
// when nobody asks for tokens; replicas may all run it, since the store
// keeps one key per generation.
func (k *Keyring) Rotate(ctx context.Context) error {
	k.mu.Lock()
	k.loadedAt = time.Time{}
	k.mu.Unlock()
	_, _, err := k.Schedule(ctx)
	return err
}

func (k *Keyring) load(ctx context.Context, now time.Time) error {
	stored, err := k.store.ListSigningKeys(ctx)
	if err != nil {
		return err
	}
	keys := make(auth.KeySchedule, 0, len(stored))
	for _, s := range stored {
		if s.Algorithm != auth.SigningAlgorithm {
			return fmt.Errorf("signing key %s uses %s, which this hopper cannot sign with", s.KeyID, s.Algorithm)
		}
		plain, err := k.sealer.Open(s.Sealed, s.KeyID)
		if err != nil {
			return fmt.Errorf("opening signing key %s (wrong HOPPER_SECRET_KEY?): %w", s.KeyID, err)
		}
		priv, err := auth.ParsePrivate(plain)
		if err != nil {
			return fmt.Errorf("signing key %s: %w", s.KeyID, err)
		}
		keys = append(keys, auth.SigningKey{Generation: s.Generation, KeyID: s.KeyID, Private: priv, Created: s.Created, Activates: s.Activates})
	}
	k.keys, k.loadedAt = keys, now
	return nil
}

// add stores generation gen; another replica may store it first, which
// is as good (the reload that follows picks up whichever won).
func (k *Keyring) add(ctx context.Context, gen int64, now time.Time) error {
	key, err := auth.NewSigningKey(gen, now.UTC().Truncate(time.Millisecond))
	if err != nil {
		return err
	}
	plain, err := key.MarshalPrivate()
	if err != nil {
		return err
	}
	sealed, err := k.sealer.Seal(plain, key.KeyID)
	if err != nil {
		return fmt.Errorf("sealing signing key %s: %w", key.KeyID, err)
	}
	_, err = k.store.AddSigningKey(ctx, &store.SigningKey{Generation: gen, KeyID: key.KeyID, Algorithm: auth.SigningAlgorithm,
		Sealed: sealed, Created: key.Created, Activates: key.Activates})
	return err
}
