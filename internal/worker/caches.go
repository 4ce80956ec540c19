package worker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// cachePool keeps writable-cache directories across runs under
// <cachesDir>/<encoded name>/<n>. An entry is either idle in the pool or
// moved into exactly one running task, so concurrent runs never share one.
// Entries on disk at start-up (from a previous worker process) are reused.
//
// Purge requests (the Purge-Cache service) empty caches: before a cache is
// handed out the pool asks which caches of its worker pool were purged
// since it last asked (as generic-worker asks before every task); an entry created
// before a request for its name is deleted instead of reused, and one in
// use when the request arrives is deleted when it comes back. Each entry's
// creation time is kept beside it (<n>.created), so a restarted worker
// knows how old its caches are; an entry without one counts as older than
// any request.
type cachePool struct {
	dir  string
	mu   sync.Mutex
	free map[string][]string
	next int

	// created is each entry's creation time; purgedBefore the newest
	// purge request seen per cache name.
	created      map[string]time.Time
	purgedBefore map[string]time.Time
	// purges lists the purge requests made since a time (nil: none).
	purges    func(since time.Time) ([]tcclient.PurgeRequest, error)
	log       *slog.Logger
	lastAsked time.Time
	asking    bool
}

// purgeSinceSlack widens each question backwards, so clock differences
// between worker and service lose no request (a request heard twice is
// harmless).
const purgeSinceSlack = 5 * time.Minute

type mountedCache struct {
	name   string
	entry  string
	target string
}

func newCachePool(dir string) (*cachePool, error) {
	p := &cachePool{dir: dir, free: map[string][]string{}, created: map[string]time.Time{}, purgedBefore: map[string]time.Time{},
		log: slog.New(slog.DiscardHandler)}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading caches directory: %w", err)
	}
	for _, n := range names {
		raw, err := base64.RawURLEncoding.DecodeString(n.Name())
		if err != nil || !n.IsDir() {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(dir, n.Name()))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if id, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
				entry := filepath.Join(dir, n.Name(), e.Name())
				p.free[string(raw)] = append(p.free[string(raw)], entry)
				p.created[entry] = readCreated(entry)
				p.next = max(p.next, id+1)
			}
		}
	}
	return p, nil
}

// acquire returns an idle entry for name, or a new empty one (fresh).
// Entries a purge request covers are deleted on the way.
func (p *cachePool) acquire(name string) (entry string, fresh bool, err error) {
	p.refreshPurges()
	p.mu.Lock()
	defer p.mu.Unlock()
	for free := p.free[name]; len(free) > 0; free = p.free[name] {
		entry = free[len(free)-1]
		p.free[name] = free[:len(free)-1]
		if p.purgedLocked(name, entry) {
			p.log.Info("emptying a cache a purge request named", "cache", name)
			p.removeLocked(entry)
			continue
		}
		return entry, false, nil
	}
	entry = filepath.Join(p.dir, base64.RawURLEncoding.EncodeToString([]byte(name)), strconv.Itoa(p.next))
	p.next++
	if err := os.MkdirAll(entry, 0o755); err != nil {
		return "", false, fmt.Errorf("creating cache %q: %w", name, err)
	}
	now := time.Now()
	p.created[entry] = now
	if err := os.WriteFile(entry+".created", []byte(now.UTC().Format(time.RFC3339Nano)), 0o644); err != nil {
		return "", false, fmt.Errorf("recording the creation of cache %q: %w", name, err)
	}
	return entry, true, nil
}

// release returns an entry to the pool, or deletes it when purge is set or
// a purge request arrived for it meanwhile.
func (p *cachePool) release(name, entry string, purge bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if purge || p.purgedLocked(name, entry) {
		p.removeLocked(entry)
		return
	}
	p.free[name] = append(p.free[name], entry)
}

// purgedLocked reports whether a purge request covers the entry.
func (p *cachePool) purgedLocked(name, entry string) bool {
	before, ok := p.purgedBefore[name]
	return ok && p.created[entry].Before(before)
}

func (p *cachePool) removeLocked(entry string) {
	_ = os.RemoveAll(entry)
	_ = os.Remove(entry + ".created")
	delete(p.created, entry)
}

// readCreated reads an entry's creation time; zero when unknown.
func readCreated(entry string) time.Time {
	b, err := os.ReadFile(entry + ".created")
	if err != nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return time.Time{}
	}
	return t
}

// refreshPurges asks for the purge requests made since the last question
// (unless another caller is asking right now). A failure
// is logged and the caches are used as they are: a purge-cache service
// that is unreachable must not stop the worker.
func (p *cachePool) refreshPurges() {
	p.mu.Lock()
	if p.purges == nil || p.asking {
		p.mu.Unlock()
		return
	}
	var since time.Time
	if !p.lastAsked.IsZero() {
		since = p.lastAsked.Add(-purgeSinceSlack)
	}
	p.asking = true
	asked := time.Now()
	p.mu.Unlock()

	reqs, err := p.purges(since)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.asking = false
	if err != nil {
		p.log.Warn("asking the purge-cache service for purge requests failed; caches are used as they are", "error", err)
		return
	}
	p.lastAsked = asked
	for _, r := range reqs {
		if r.Before.After(p.purgedBefore[r.CacheName]) {
			p.purgedBefore[r.CacheName] = r.Before.Time
		}
	}
}

// purgeRequests asks the Purge-Cache service, with the worker's own
// credentials, for the requests of the worker's pool (its task queue).
func (w *Worker) purgeRequests(since time.Time) ([]tcclient.PurgeRequest, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := w.Queue()
	q.MaxRetries = 2
	reqs, err := q.PurgeRequests(ctx, w.cfg.TaskQueueID, since)
	if tcclient.StatusCode(err) == 404 {
		return nil, errors.New("this deployment has no purge-cache service")
	}
	return reqs, err
}

// releaseCaches moves caches back to the pool, or purges them when the run
// asked for it (onExitStatus.purgeCaches, maxRunTime, abort).
func (r *taskRun) releaseCaches() {
	for _, mc := range r.caches {
		purge := r.purge
		// A bind-mounted cache (docker engine) never left its entry.
		if !purge && mc.target != mc.entry {
			if err := os.Rename(mc.target, mc.entry); err != nil {
				r.logger.Warn("returning cache to the pool failed; purging it", "cache", mc.name, "error", err)
				purge = true
			}
		}
		if purge {
			_ = os.RemoveAll(mc.target)
		}
		r.w.caches.release(mc.name, mc.entry, purge)
	}
	r.caches = nil
}
