package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/retry"
)

// The states of a notification in the outbox.
const (
	StatePending     = "pending"      // waiting to be sent (or retried)
	StateSent        = "sent"         // handed over to its channel
	StateFailed      = "failed"       // given up: a permanent error or too many attempts
	StateRefused     = "refused"      // never sendable: a malformed route, an unknown webhook
	StateDenied      = "denied"       // its address is on the denylist
	StateRateLimited = "rate-limited" // its address had too many messages lately
)

// Delivery rules.
const (
	// MaxAttempts bounds the sends of one notification.
	MaxAttempts = 8
	// FirstRetry is the delay before the second attempt; each further one
	// doubles it, up to MaxRetry.
	FirstRetry = 10 * time.Second
	MaxRetry   = 30 * time.Minute
	// SendTimeout bounds one send. Lease is how long a sender holds a
	// notification it claimed without renewing it; a sender renews the
	// leases of what it holds every LeaseRenewal while it sends, so a
	// live sender keeps them however long its sends take, and a sender
	// that dies (a killed replica) holds them for Lease at most.
	SendTimeout  = 30 * time.Second
	Lease        = 30 * time.Second
	LeaseRenewal = 10 * time.Second
	// RateLimitCount notifications per RateLimitWindow to one email
	// address, across every replica (Taskcluster's default: 50 per 10
	// minutes). Messages past it are dropped and recorded as rate-limited.
	RateLimitCount  = 50
	RateLimitWindow = 10 * time.Minute
	// DuplicateWindow is how long an identical API request is answered
	// 204 (a duplicate, not sent again).
	DuplicateWindow = 10 * time.Minute
	// MaxErrorLength bounds the reason recorded for a failure.
	MaxErrorLength = 1000
)

// Backoff is the delay before the attempt after the given number of
// attempts (1 → FirstRetry), jittered by up to a tenth either way from
// jitter in [0,1) so retries of many notifications spread out.
func Backoff(attempts int, jitter float64) time.Duration {
	return time.Duration(float64(doubling(max(attempts-1, 0))) * (0.9 + 0.2*jitter))
}

var doubling = retry.Doubling(FirstRetry, MaxRetry)

// PermanentError marks a send that will fail the same way however often
// it is tried (a 4xx answer other than 408/429, an address the server
// refuses): the notification fails at once.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a PermanentError.
func Permanent(err error) error { return &PermanentError{Err: err} }

// Outcome is what becomes of a notification after a send attempt.
type Outcome struct {
	State       string
	Error       string
	NextAttempt time.Time // for StatePending
}

// AfterAttempt decides what becomes of a notification whose send, its
// attempts-th, ended with err at now.
func AfterAttempt(err error, attempts int, now time.Time, jitter float64) Outcome {
	if err == nil {
		return Outcome{State: StateSent}
	}
	msg := ErrorText(err)
	var perm *PermanentError
	if errors.As(err, &perm) {
		return Outcome{State: StateFailed, Error: msg}
	}
	if attempts >= MaxAttempts {
		return Outcome{State: StateFailed, Error: fmt.Sprintf("%s (gave up after %d attempts)", msg, attempts)}
	}
	return Outcome{State: StatePending, Error: msg, NextAttempt: now.Add(Backoff(attempts, jitter))}
}

// ErrorText is err's message, bounded for the record.
func ErrorText(err error) string { return truncate(err.Error(), MaxErrorLength) }

// Webhook signing. Each POST carries
//
//	X-Hopper-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// over the raw body, with the delivery's id in X-Hopper-Delivery (the same
// on every retry) and the event in X-Hopper-Event. A receiver recomputes
// the MAC over the timestamp, a dot and the bytes it received, compares in
// constant time, and refuses timestamps too far from its clock.
const (
	SignatureHeader = "X-Hopper-Signature"
	DeliveryHeader  = "X-Hopper-Delivery"
	EventHeader     = "X-Hopper-Event"
)

// SignWebhook returns the signature header's value for body at t.
func SignWebhook(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(webhookMAC(secret, ts, body))
}

func webhookMAC(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// VerifyWebhook checks a signature header against body with the secret, and
// that its timestamp is within tolerance of now: what a receiver does.
func VerifyWebhook(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("webhook signature without a timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook signature timestamp %d is %s away from now", sec, d.Round(time.Second))
	}
	want := webhookMAC(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return errors.New("webhook signature does not match")
}
