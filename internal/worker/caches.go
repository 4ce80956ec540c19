package worker

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// cachePool keeps writable-cache directories across runs under
// <cachesDir>/<encoded name>/<n>. An entry is either idle in the pool or
// moved into exactly one running task, so concurrent runs never share one.
// Entries on disk at start-up (from a previous worker process) are reused.
type cachePool struct {
	dir  string
	mu   sync.Mutex
	free map[string][]string
	next int
}

type mountedCache struct {
	name   string
	entry  string
	target string
}

func newCachePool(dir string) (*cachePool, error) {
	p := &cachePool{dir: dir, free: map[string][]string{}}
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
				p.free[string(raw)] = append(p.free[string(raw)], filepath.Join(dir, n.Name(), e.Name()))
				p.next = max(p.next, id+1)
			}
		}
	}
	return p, nil
}

// acquire returns an idle entry for name, or a new empty one (fresh).
func (p *cachePool) acquire(name string) (entry string, fresh bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if free := p.free[name]; len(free) > 0 {
		entry = free[len(free)-1]
		p.free[name] = free[:len(free)-1]
		return entry, false, nil
	}
	entry = filepath.Join(p.dir, base64.RawURLEncoding.EncodeToString([]byte(name)), strconv.Itoa(p.next))
	p.next++
	if err := os.MkdirAll(entry, 0o755); err != nil {
		return "", false, fmt.Errorf("creating cache %q: %w", name, err)
	}
	return entry, true, nil
}

// release returns an entry to the pool, or deletes it when purge is set.
func (p *cachePool) release(name, entry string, purge bool) {
	if purge {
		_ = os.RemoveAll(entry)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free[name] = append(p.free[name], entry)
}
