package schema

import (
	"bytes"
	"sync"
)

// An idle worker sends the same few bytes with every claimWork poll (its
// worker group and id), and a fleet of ten thousand sends them hundreds of
// thousands of times an hour. What validating a body gives depends only on
// the schema and the bytes, so for such calls the registry remembers it:
// validation and its deep recursion were a fifth of an idle fleet's cost
// to the server.

const (
	// repeatMaxBody is the longest body remembered: polls are short.
	repeatMaxBody = 512
	// repeatEntries bounds each generation of a schema's memory (two are
	// kept): a fleet up to this size polls from memory, and a schema's
	// memory never exceeds some 2 × 16384 × 1 KB.
	repeatEntries = 16384
)

// repeats is one schema's memory of valid bodies and their validated form.
// A body used in the current or the previous generation is kept; one not
// used for a whole generation goes with it.
type repeats struct {
	mu        sync.Mutex
	cur, prev map[string][]byte
	capacity  int
}

func (m *repeats) get(raw []byte) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if out, ok := m.cur[string(raw)]; ok {
		return out, true
	}
	if out, ok := m.prev[string(raw)]; ok {
		m.putLocked(string(raw), out)
		return out, true
	}
	return nil, false
}

func (m *repeats) put(raw, out []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putLocked(string(raw), out)
}

func (m *repeats) putLocked(key string, out []byte) {
	if len(m.cur) >= m.capacity {
		m.prev, m.cur = m.cur, make(map[string][]byte, len(m.cur))
	}
	if m.cur == nil {
		m.cur = map[string][]byte{}
	}
	m.cur[key] = out
}

// ValidateRepeated is Validate for bodies that callers send again and
// again (a worker's claimWork poll): a valid body of at most
// repeatMaxBody bytes that was validated lately is not validated again.
// Invalid bodies are always validated, so their errors are as Validate's.
func (r *Registry) ValidateRepeated(name string, raw []byte) ([]byte, error) {
	if len(raw) > repeatMaxBody {
		return r.Validate(name, raw)
	}
	v, ok := r.repeats.Load(name)
	if !ok {
		if _, known := r.schemas[name]; !known {
			return nil, &UnknownSchemaError{Name: name}
		}
		v, _ = r.repeats.LoadOrStore(name, &repeats{capacity: r.repeatCapacity()})
	}
	m := v.(*repeats)
	if out, ok := m.get(raw); ok {
		return bytes.Clone(out), nil
	}
	out, err := r.Validate(name, raw)
	if err != nil {
		return nil, err
	}
	m.put(raw, bytes.Clone(out))
	return out, nil
}

func (r *Registry) repeatCapacity() int {
	if r.repeatEntries > 0 {
		return r.repeatEntries
	}
	return repeatEntries
}
