package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// KeyRotations is what KeyRotator rotates: the identity-token signing
// keys (authapi.Keyring), which make the next key when it is due.
type KeyRotations interface {
	Rotate(ctx context.Context) error
}

// DefaultKeyRotateEvery is how often KeyRotator looks: far shorter than
// the hour a new key is published before it signs.
const DefaultKeyRotateEvery = 5 * time.Minute

// KeyRotator makes the next identity-token signing key when it is due,
// so it is published ahead of use even when nobody asks for a token.
// Replicas may all run it: the store keeps one key per generation.
type KeyRotator struct {
	Keys     KeyRotations
	Interval time.Duration
	Logger   *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start begins rotating in the background.
func (r *KeyRotator) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return
	}
	if r.Interval <= 0 {
		r.Interval = DefaultKeyRotateEvery
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go r.loop(ctx, r.done)
}

func (r *KeyRotator) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		if err := r.Keys.Rotate(ctx); err != nil && ctx.Err() == nil {
			r.Logger.Warn("rotating the identity-token signing keys", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Stop ends the loop and waits for it; safe to call twice.
func (r *KeyRotator) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel = nil
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
