package live

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/retry"
)

const (
	// DefaultChannel is the PostgreSQL NOTIFY channel replicas relay
	// events on. NOTIFY is scoped to a database, so replicas of different
	// deployments never hear each other.
	DefaultChannel = "hopper_live"
	// InterestEvery is how often a replica with stream subscribers
	// repeats that it has them.
	InterestEvery = 10 * time.Second
	// interestTTL is how long a replica relays its events after it last
	// heard of interest: three announcements may be lost before it stops.
	interestTTL = 3 * InterestEvery
	// maxPayload keeps a NOTIFY payload under PostgreSQL's 8000-byte limit.
	maxPayload = 7900
)

// RelayOptions configure StartRelay.
type RelayOptions struct {
	// URL is the PostgreSQL connection URL (the store's).
	URL string
	// Channel is the NOTIFY channel; "" means DefaultChannel.
	Channel string
	// Logger receives connection problems.
	Logger *slog.Logger
}

// Relay carries a hub's events to the other replicas of a deployment and
// theirs to it, over PostgreSQL LISTEN/NOTIFY. A notification is one JSON
// envelope from one origin (a random id per process, so a replica skips
// its own): either interest ("this replica has stream subscribers") or a
// batch of messages. A message too large for one NOTIFY travels without
// its body; streams pass it on with a null payload, which tells a browser
// to re-read that task.
type Relay struct {
	hub      *Hub
	cfg      *pgx.ConnConfig
	channel  string
	origin   string
	log      *slog.Logger
	out      chan []events.Message
	interest chan struct{}
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
}

// envelope is one NOTIFY payload.
type envelope struct {
	Origin   string         `json:"o"`
	Interest bool           `json:"i,omitempty"`
	Messages []relayMessage `json:"m,omitempty"`
}

type relayMessage struct {
	Exchange   string          `json:"e"`
	RoutingKey string          `json:"k"`
	CC         []string        `json:"c,omitempty"`
	Body       json.RawMessage `json:"b"`
}

// StartRelay connects hub to the other replicas on the database at
// opts.URL. It returns once the configuration is valid; connections are
// made (and remade after failures) in the background. Stop it with Close.
func StartRelay(hub *Hub, opts RelayOptions) (*Relay, error) {
	cfg, err := pgx.ParseConfig(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing PostgreSQL URL for the live relay: %w", err)
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("choosing the live relay's origin id: %w", err)
	}
	if opts.Channel == "" {
		opts.Channel = DefaultChannel
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Relay{hub: hub, cfg: cfg, channel: opts.Channel, origin: hex.EncodeToString(id[:]), log: opts.Logger,
		out: make(chan []events.Message, 1024), interest: make(chan struct{}, 1), cancel: cancel}
	hub.relay = r
	r.wg.Add(2)
	go r.listenLoop(ctx)
	go r.sendLoop(ctx)
	return r, nil
}

// Close stops the relay and waits for its goroutines; safe to call twice.
func (r *Relay) Close() error {
	r.once.Do(func() {
		r.cancel()
		r.wg.Wait()
	})
	return nil
}

// send queues msgs for the other replicas without blocking; a full queue
// drops them (events are best effort).
func (r *Relay) send(msgs []events.Message) {
	select {
	case r.out <- msgs:
	default:
	}
}

// announceInterest asks the send loop to tell the other replicas that
// this one has subscribers.
func (r *Relay) announceInterest() {
	select {
	case r.interest <- struct{}{}:
	default:
	}
}

// retry runs f until ctx ends, backing off after failures.
func (r *Relay) retry(ctx context.Context, what string, f func(context.Context) error) {
	backoff := retry.Doubling(100*time.Millisecond, 5*time.Second)
	_ = retry.Do(ctx, retry.Policy{Delay: backoff}, func(n int) error {
		err := f(ctx)
		if ctx.Err() != nil {
			return retry.Stop(ctx.Err())
		}
		r.log.Warn("live relay: PostgreSQL connection lost; reconnecting", "doing", what, "error", err, "backoff", backoff(n))
		return fmt.Errorf("%s: %w", what, err) // never nil: f ended, so it is run again
	})
}

func (r *Relay) listenLoop(ctx context.Context) {
	defer r.wg.Done()
	r.retry(ctx, "listening", r.listen)
}

func (r *Relay) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, r.cfg)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{r.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listening on %s: %w", r.channel, err)
	}
	// Whoever relayed while this replica was not listening stopped
	// hearing of its subscribers; say so again.
	if r.hub.Subscribers() > 0 {
		r.announceInterest()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var env envelope
		if json.Unmarshal([]byte(n.Payload), &env) != nil || env.Origin == r.origin {
			continue
		}
		if env.Interest {
			r.hub.noteRemoteInterest()
		}
		if len(env.Messages) > 0 {
			msgs := make([]events.Message, len(env.Messages))
			for i, m := range env.Messages {
				msgs[i] = events.Message{Exchange: m.Exchange, RoutingKey: m.RoutingKey, CC: m.CC, Body: m.Body}
			}
			r.hub.publishRemote(msgs)
		}
	}
}

func (r *Relay) sendLoop(ctx context.Context) {
	defer r.wg.Done()
	r.retry(ctx, "notifying", r.sendOn)
}

// sendOn sends on one connection until it fails: batches of messages as
// they come (whatever queued meanwhile goes in the same round trip), and
// interest when asked and every InterestEvery while there are subscribers.
func (r *Relay) sendOn(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, r.cfg)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background())
	tick := time.NewTicker(InterestEvery)
	defer tick.Stop()
	for {
		var payloads []string
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.interest:
			payloads = r.interestPayload()
		case <-tick.C:
			if r.hub.Subscribers() > 0 {
				payloads = r.interestPayload()
			}
		case msgs := <-r.out:
			for more := true; more; {
				select {
				case next := <-r.out:
					msgs = append(msgs, next...)
				default:
					more = false
				}
			}
			payloads = r.encode(msgs)
		}
		if len(payloads) == 0 {
			continue
		}
		if _, err := conn.Exec(ctx, "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", r.channel, payloads); err != nil {
			return fmt.Errorf("notifying %s: %w", r.channel, err)
		}
	}
}

func (r *Relay) interestPayload() []string {
	b, _ := json.Marshal(envelope{Origin: r.origin, Interest: true})
	return []string{string(b)}
}

// encode packs msgs into as few payloads under maxPayload as it can, in
// order; a message too large on its own loses its body.
func (r *Relay) encode(msgs []events.Message) []string {
	var payloads []string
	batch := envelope{Origin: r.origin}
	size := 0
	flush := func() {
		if len(batch.Messages) > 0 {
			b, _ := json.Marshal(batch)
			payloads = append(payloads, string(b))
		}
		batch.Messages, size = nil, 0
	}
	for _, m := range msgs {
		rm := relayMessage{Exchange: m.Exchange, RoutingKey: m.RoutingKey, CC: m.CC, Body: m.Body}
		b, _ := json.Marshal(rm)
		if len(b)+64 > maxPayload {
			rm.CC, rm.Body = nil, json.RawMessage("null")
			b, _ = json.Marshal(rm)
		}
		if size+len(b)+64 > maxPayload {
			flush()
		}
		batch.Messages = append(batch.Messages, rm)
		size += len(b) + 1
	}
	flush()
	return payloads
}
