// Package workermanager holds the Worker Manager service's rules: worker
// pools and their providers' configuration, a worker's life from requested
// through running and stopping to stopped, the registration and
// reregistration deadlines, the credentials a registered worker receives,
// and the provisioner's arithmetic (how much capacity a pool should have
// for the work pending in its task queue). Pure Go with the time passed in:
// no I/O, no HTTP, no store.
//
// Taskcluster's worker-manager (services/worker-manager in
// taskcluster/taskcluster) is the contract; docs/worker-pools.md says where
// hopper differs.
package workermanager

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/ident"
)

// Provider types hopper implements. NullProvider is the provider id a
// deleted pool is given until its workers are gone.
const (
	ProviderTypeStatic = "static"
	ProviderTypeDocker = "docker"
	// ProviderTypeKubernetes pools run each worker as a Pod, which
	// proves itself with a service-account token bound to it.
	ProviderTypeKubernetes = "kubernetes"
	NullProvider           = "null-provider"
)

// poolIDPattern is Taskcluster's workerPoolId: <provisionerId>/<workerType>.
var poolIDPattern = ident.TaskQueueID()

// identifierPattern bounds workerGroup, workerId, providerId.
var identifierPattern = ident.Identifier()

// PoolIDPattern is the pattern a workerPoolId matches.
func PoolIDPattern() *regexp.Regexp { return poolIDPattern }

// IdentifierPattern is the pattern workerGroup, workerId and providerId match.
func IdentifierPattern() *regexp.Regexp { return identifierPattern }

// ValidPoolID reports whether id is a workerPoolId.
func ValidPoolID(id string) bool { return poolIDPattern.MatchString(id) }

// SplitPoolID returns a pool's provisionerId and workerType: a pool's task
// queue is its workerPoolId.
func SplitPoolID(id string) (provisionerID, workerType string) {
	p, w, _ := strings.Cut(id, "/")
	return p, w
}

// Pool is a worker pool's definition.
type Pool struct {
	WorkerPoolID string
	ProviderID   string
	// PreviousProviderIDs are providers the pool had before, whose
	// workers may still exist (and register).
	PreviousProviderIDs []string
	Description         string
	// Config is the provider-specific configuration, validated against
	// the provider type's schema.
	Config       json.RawMessage
	Owner        string
	EmailOnError bool
	Created      time.Time
	LastModified time.Time
}

// ChangeProvider sets a new provider, remembering the old one while its
// workers may live on.
func (p *Pool) ChangeProvider(providerID string) {
	if providerID == p.ProviderID {
		return
	}
	for _, prev := range p.PreviousProviderIDs {
		if prev == p.ProviderID {
			p.ProviderID = providerID
			return
		}
	}
	p.PreviousProviderIDs = append(p.PreviousProviderIDs, p.ProviderID)
	p.ProviderID = providerID
}

// HadProvider reports whether workers of providerID may belong to the pool.
func (p *Pool) HadProvider(providerID string) bool {
	if p.ProviderID == providerID {
		return true
	}
	for _, prev := range p.PreviousProviderIDs {
		if prev == providerID {
			return true
		}
	}
	return false
}

// Lifecycle is a pool's worker lifecycle (the config's "lifecycle" block),
// with Taskcluster's defaults filled in.
type Lifecycle struct {
	// RegistrationTimeout is how long a requested worker has to register
	// (0: no limit of its own; the reregistration timeout applies).
	RegistrationTimeout time.Duration
	// ReregistrationTimeout is how long a registration's credentials
	// last: a worker must reregister before then (default 4 days).
	ReregistrationTimeout time.Duration
	// QueueInactivityTimeout is how long a running worker of a dynamic
	// pool may go without claiming work before it is stopped (default 2
	// hours); static workers are never stopped for it.
	QueueInactivityTimeout time.Duration
}

// Lifecycle defaults, as Taskcluster's.
const (
	DefaultReregistrationTimeout  = 96 * time.Hour
	DefaultQueueInactivityTimeout = 2 * time.Hour
	// MaxReregistrationTimeout bounds credentials' lifetime (30 days).
	MaxReregistrationTimeout = 30 * 24 * time.Hour
)

// Capacity is a dynamic pool's capacity bounds.
type Capacity struct {
	Min, Max int
	// ScalingRatio is the capacity added per pending task (0..1, default 1).
	ScalingRatio float64
	// PerWorker is the capacity of one worker (default 1).
	PerWorker int
}

// poolConfig is the part of a pool's config the rules read; the rest
// belongs to the provider.
type poolConfig struct {
	Lifecycle struct {
		RegistrationTimeout    *int64 `json:"registrationTimeout"`
		ReregistrationTimeout  *int64 `json:"reregistrationTimeout"`
		QueueInactivityTimeout *int64 `json:"queueInactivityTimeout"`
	} `json:"lifecycle"`
	MinCapacity  int             `json:"minCapacity"`
	MaxCapacity  int             `json:"maxCapacity"`
	ScalingRatio *float64        `json:"scalingRatio"`
	Capacity     int             `json:"capacityPerWorker"`
	WorkerConfig json.RawMessage `json:"workerConfig"`
}

func parseConfig(config json.RawMessage) (poolConfig, error) {
	var c poolConfig
	if len(config) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return c, fmt.Errorf("decoding worker pool config: %w", err)
	}
	return c, nil
}

// Lifecycle reads the pool's lifecycle, defaults filled in.
func (p *Pool) Lifecycle() Lifecycle {
	c, _ := parseConfig(p.Config)
	l := Lifecycle{ReregistrationTimeout: DefaultReregistrationTimeout, QueueInactivityTimeout: DefaultQueueInactivityTimeout}
	if v := c.Lifecycle.RegistrationTimeout; v != nil && *v > 0 {
		l.RegistrationTimeout = time.Duration(*v) * time.Second
	}
	if v := c.Lifecycle.ReregistrationTimeout; v != nil && *v > 0 {
		l.ReregistrationTimeout = min(time.Duration(*v)*time.Second, MaxReregistrationTimeout)
	}
	if v := c.Lifecycle.QueueInactivityTimeout; v != nil && *v > 0 {
		l.QueueInactivityTimeout = time.Duration(*v) * time.Second
	}
	return l
}

// Capacity reads a dynamic pool's capacity bounds.
func (p *Pool) Capacity() Capacity {
	c, _ := parseConfig(p.Config)
	out := Capacity{Min: c.MinCapacity, Max: c.MaxCapacity, ScalingRatio: 1, PerWorker: 1}
	if c.ScalingRatio != nil {
		out.ScalingRatio = *c.ScalingRatio
	}
	switch {
	case c.Capacity > 0:
		out.PerWorker = c.Capacity
	case workerCapacity(c.WorkerConfig) > 0:
		// The capacity each worker is told to run with, so that the pool
		// counts what its workers really take on.
		out.PerWorker = workerCapacity(c.WorkerConfig)
	}
	return out
}

// WorkerCapacity is the capacity the pool's workerConfig gives hopper's
// worker (workerConfig.hopperWorker.capacity; 0 when it gives none).
func (p *Pool) WorkerCapacity() int {
	c, _ := parseConfig(p.Config)
	return workerCapacity(c.WorkerConfig)
}

func workerCapacity(workerConfig json.RawMessage) int {
	var wc struct {
		HopperWorker struct {
			Capacity int `json:"capacity"`
		} `json:"hopperWorker"`
	}
	if len(workerConfig) == 0 || json.Unmarshal(workerConfig, &wc) != nil {
		return 0
	}
	return wc.HopperWorker.Capacity
}

// WorkerConfig is the config handed to a registering worker unchanged
// (an empty object when the pool has none).
func (p *Pool) WorkerConfig() json.RawMessage {
	c, _ := parseConfig(p.Config)
	if len(c.WorkerConfig) == 0 || string(c.WorkerConfig) == "null" {
		return json.RawMessage(`{}`)
	}
	return c.WorkerConfig
}

// CheckConfig applies the rules a provider's schema cannot express.
func CheckConfig(providerType string, config json.RawMessage) error {
	c, err := parseConfig(config)
	if err != nil {
		return err
	}
	if providerType != ProviderTypeStatic && c.MinCapacity > c.MaxCapacity {
		return fmt.Errorf("minCapacity (%d) is greater than maxCapacity (%d)", c.MinCapacity, c.MaxCapacity)
	}
	if wc := workerCapacity(c.WorkerConfig); providerType != ProviderTypeStatic && c.Capacity > 0 && wc > 0 && wc != c.Capacity {
		return fmt.Errorf("capacityPerWorker (%d) and workerConfig.hopperWorker.capacity (%d) differ: the pool would count %d for a worker that runs %d tasks at once",
			c.Capacity, wc, c.Capacity, wc)
	}
	return nil
}
