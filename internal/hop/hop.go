// Package hop lets the replicas of one hopper deployment reach each
// other's long-lived connections. A worker's websocktunnel session and its
// interactive agent are WebSockets held by the replica the worker
// connected to; a viewer may arrive at any replica. The holder records
// each connection in the shared database (a lease it renews), and a
// replica that holds none forwards the viewer's request to the holder.
//
// The forwarded request is signed with a key derived from the server
// secret every replica shares (Header: a time and an HMAC of the method,
// the request URI and that time); the holder serves a signed request from
// its own connections only and never forwards it again, so no request
// crosses more than one hop, and a replica forwards only to an address a
// replica recorded, never to one a caller names: it is not an open proxy.
package hop

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/store"
)

// Header carries a forwarded request's signature: "<unix seconds>.<hex HMAC>".
const Header = "X-Hopper-Replica-Hop"

// Lease is how long a connection's row names its replica without being
// renewed; RenewEvery is how often the holder renews (a third of it, so a
// renewal may fail twice before viewers lose the way).
const (
	Lease      = 60 * time.Second
	RenewEvery = Lease / 3
)

// maxSkew bounds how old (or early) a signed request may be: replicas'
// clocks agree to a few seconds, and a captured request is useless after.
const maxSkew = 30 * time.Second

// Store is the directory's rows (store.EndpointStore).
type Store interface {
	PutEndpoint(ctx context.Context, key, replicaURL string, expires time.Time) error
	GetEndpoint(ctx context.Context, key string, now time.Time) (string, error)
	DeleteEndpoint(ctx context.Context, key, replicaURL string) error
}

// ErrNotHeld means no replica holds the connection (or only this one
// would, and it does not).
var ErrNotHeld = errors.New("no replica holds that connection")

// ErrBadSignature refuses a request whose hop signature does not verify.
var ErrBadSignature = errors.New("the replica hop's signature does not verify")

// Directory is one replica's side of the shared directory.
type Directory struct {
	self  string
	key   []byte
	store Store
	clock clock.Clock
	log   *slog.Logger
	proxy *httputil.ReverseProxy

	mu   sync.Mutex
	held map[string]int // key → connections held here under it
}

// New returns the directory of the replica reachable at self (its
// --replica-url); secret is shared by every replica.
func New(secret []byte, self string, st Store, clk clock.Clock, log *slog.Logger) *Directory {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("hopper replica hop"))
	d := &Directory{self: strings.TrimRight(self, "/"), key: m.Sum(nil), store: st, clock: clk, log: log, held: map[string]int{}}
	d.proxy = &httputil.ReverseProxy{
		Rewrite: func(*httputil.ProxyRequest) {}, // the target is set per request (Forward)
		// A live log streams: every chunk goes out as it comes.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			d.log.Warn("forwarding to the replica holding the connection", "url", r.URL.Redacted(), "error", err)
			http.Error(w, "The replica holding the connection did not answer", http.StatusBadGateway)
		},
	}
	return d
}

// Self is this replica's URL.
func (d *Directory) Self() string { return d.self }

// Hold records that this replica holds key (a connection was
// established); call Release when it ends. Holding a key twice (a worker
// reconnected before its old connection ended) needs two Releases.
func (d *Directory) Hold(ctx context.Context, key string) error {
	d.mu.Lock()
	d.held[key]++
	d.mu.Unlock()
	if err := d.store.PutEndpoint(ctx, key, d.self, d.clock.Now().Add(Lease)); err != nil {
		return fmt.Errorf("recording where %s is held: %w", key, err)
	}
	return nil
}

// Release forgets one hold of key; the row goes with the last one (unless
// another replica holds the key by now).
func (d *Directory) Release(key string) {
	d.mu.Lock()
	d.held[key]--
	last := d.held[key] <= 0
	if last {
		delete(d.held, key)
	}
	d.mu.Unlock()
	if !last {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.store.DeleteEndpoint(ctx, key, d.self); err != nil {
		// The lease runs out by itself.
		d.log.Warn("releasing a connection's directory row", "key", key, "error", err)
	}
}

// Renew extends the leases of every key held here: the directory's duty,
// which internal/server schedules every RenewEvery with maintenance.Every,
// so viewers on other replicas find them and the rows of a replica that
// died run out.
func (d *Directory) Renew(ctx context.Context) error {
	d.mu.Lock()
	keys := make([]string, 0, len(d.held))
	for k := range d.held {
		keys = append(keys, k)
	}
	d.mu.Unlock()
	expires := d.clock.Now().Add(Lease)
	var errs []error
	for _, k := range keys {
		if err := d.store.PutEndpoint(ctx, k, d.self, expires); err != nil {
			errs = append(errs, fmt.Errorf("renewing %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// Locate returns the URL of the other replica holding key; ErrNotHeld
// when none does.
func (d *Directory) Locate(ctx context.Context, key string) (string, error) {
	u, err := d.store.GetEndpoint(ctx, key, d.clock.Now())
	if errors.Is(err, store.ErrNotFound) || err == nil && u == d.self {
		return "", ErrNotHeld
	}
	if err != nil {
		return "", fmt.Errorf("looking up where %s is held: %w", key, err)
	}
	return u, nil
}

// Signed reports whether r came from another replica: false without the
// header, ErrBadSignature when it is there and does not verify.
func (d *Directory) Signed(r *http.Request) (bool, error) {
	v := r.Header.Get(Header)
	if v == "" {
		return false, nil
	}
	ts, mac, ok := strings.Cut(v, ".")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil {
		return false, ErrBadSignature
	}
	if skew := d.clock.Now().Sub(time.Unix(sec, 0)); skew > maxSkew || skew < -maxSkew {
		return false, ErrBadSignature
	}
	got, err := hex.DecodeString(mac)
	if err != nil || !hmac.Equal(got, d.sign(r.Method, r.URL.RequestURI(), ts)) {
		return false, ErrBadSignature
	}
	return true, nil
}

func (d *Directory) sign(method, uri, ts string) []byte {
	m := hmac.New(sha256.New, d.key)
	m.Write([]byte(method + "\n" + uri + "\n" + ts))
	return m.Sum(nil)
}

// Forward sends r to path (a request URI) on replicaURL, signed, and
// streams the answer back, a WebSocket upgrade included. replicaURL must
// come from Locate.
func (d *Directory) Forward(w http.ResponseWriter, r *http.Request, replicaURL, path string) {
	target, err := url.Parse(replicaURL + path)
	if err != nil {
		http.Error(w, "The replica holding the connection has a bad address", http.StatusBadGateway)
		return
	}
	out := r.Clone(r.Context())
	out.URL = target
	out.Host = target.Host
	out.RequestURI = ""
	// Nothing of the caller's credentials goes on: the hop's signature
	// stands for the authorization this replica checked.
	out.Header.Del("Authorization")
	out.Header.Del("Cookie")
	ts := strconv.FormatInt(d.clock.Now().Unix(), 10)
	out.Header.Set(Header, ts+"."+hex.EncodeToString(d.sign(out.Method, target.RequestURI(), ts)))
	d.proxy.ServeHTTP(w, out)
}
