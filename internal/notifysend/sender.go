package notifysend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Store is what the sender needs of the store: the outbox, and the
// definitions of the tasks whose notifications it renders.
type Store interface {
	store.NotifyStore
	GetTask(ctx context.Context, taskID string) (*queue.TaskState, error)
}

// Channels sends one message (Deliverer).
type Channels interface {
	Send(ctx context.Context, id, event string, m *notify.Message) error
}

// Defaults of the sender.
const (
	DefaultInterval    = time.Second
	DefaultBatch       = 32
	DefaultConcurrency = 8
)

// Sender is the duty that sends the outbox's notifications. Every
// replica may run one: a sender claims due notifications through the
// services' outbox (store.OutboxStore: with a lease, skipping those other
// senders hold), sends them, and records each outcome only if its claim
// still holds. A failed send is retried with back-off
// (notify.AfterAttempt); a permanent failure, a denylisted address and a
// rate-limited one are recorded with the reason. Nothing here is on the
// path of a task's transitions: a slow or failing channel only delays its
// own notifications.
//
// Exactly once, and where it stops: a send and its record are two steps.
// A sender that dies (or stalls past notify.Lease) between them leaves
// the notification to be claimed again when its lease ends, and the message is
// sent a second time. Matrix drops the copy (the txnId is the
// notification's id), webhook receivers can (the X-Hopper-Delivery
// header), and email carries the same Message-ID; Slack and Pulse have no
// such key, so a copy reaches people there.
type Sender struct {
	Store   Store
	Deliver Channels
	// RootURL is the public root URL the messages link to.
	RootURL string
	// LogTail returns the last lines of a run's log (optional).
	LogTail func(ctx context.Context, taskID string, runID int) (string, error)
	Clock   clock.Clock
	Logger  *slog.Logger
	Metrics *Metrics
	// Batch notifications claimed at a time; Concurrency sends at once (the duty
	// that drains it, maintenance.Every, looks every DefaultInterval).
	Batch       int
	Concurrency int
	// Owner names this sender in its outbox claims (default: a random id).
	Owner string
	// LeaseRenewal is how often the leases of the notifications being
	// sent are renewed (default notify.LeaseRenewal).
	LeaseRenewal time.Duration
	once         sync.Once
}

// defaults fills the settings left zero, once.
func (s *Sender) defaults() {
	s.once.Do(func() {
		if s.Batch <= 0 {
			s.Batch = DefaultBatch
		}
		if s.Concurrency <= 0 {
			s.Concurrency = DefaultConcurrency
		}
		if s.Owner == "" {
			s.Owner = "sender-" + uuid.NewString()
		}
		if s.Clock == nil {
			s.Clock = clock.System{}
		}
	})
}

// Drain sends until no notification is due, and returns how many it
// tried.
func (s *Sender) Drain(ctx context.Context) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, err := s.Pass(ctx)
		total += n
		if err != nil || n < s.batch() {
			return total, err
		}
	}
	return total, nil
}

func (s *Sender) batch() int {
	if s.Batch <= 0 {
		return DefaultBatch
	}
	return s.Batch
}

// Pass claims one batch of due notifications and sends them.
func (s *Sender) Pass(ctx context.Context) (int, error) {
	s.defaults()
	now := s.now()
	claimed, err := s.Store.ClaimNotifications(ctx, store.ClaimNotificationsParams{
		Owner: s.owner(), Now: now, Lease: notify.Lease, Limit: s.batch(),
		RateLimit: notify.RateLimitCount, RateWindow: notify.RateLimitWindow,
	})
	if err != nil {
		return 0, fmt.Errorf("claiming notifications: %w", err)
	}
	// One target's notifications go one after the other, in the order
	// they were recorded (a webhook sees a task's transitions in order);
	// different targets' go at once.
	var targets [][]*store.Notification
	index := map[[2]string]int{}
	for i := range claimed {
		n := &claimed[i]
		key := [2]string{n.Channel, n.Target}
		j, ok := index[key]
		if !ok {
			j = len(targets)
			index[key] = j
			targets = append(targets, nil)
		}
		targets[j] = append(targets[j], n)
	}
	if len(claimed) == 0 {
		return 0, nil
	}
	// The leases last while the sends do, and no longer (notify.Lease).
	renewal := s.LeaseRenewal
	if renewal <= 0 {
		renewal = notify.LeaseRenewal
	}
	stop := store.KeepLeases(ctx, renewal, func(ctx context.Context) error {
		_, err := s.Store.RenewNotifications(ctx, claimed, s.now().Add(notify.Lease))
		return err
	})
	defer stop()
	sem := make(chan struct{}, max(s.Concurrency, 1))
	var wg sync.WaitGroup
	for _, list := range targets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, n := range list {
				s.sendOne(ctx, n)
			}
		})
	}
	wg.Wait()
	return len(claimed), nil
}

func (s *Sender) now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

func (s *Sender) owner() string {
	if s.Owner == "" {
		s.Owner = "sender-" + uuid.NewString()
	}
	return s.Owner
}

// sendOne sends one claimed notification and records what became of it.
func (s *Sender) sendOne(ctx context.Context, n *store.Notification) {
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	started := time.Now()
	m, err := s.message(ctx, n)
	if err == nil {
		sendCtx, cancel := context.WithTimeout(ctx, notify.SendTimeout)
		err = s.Deliver.Send(sendCtx, n.ID, n.Event, m)
		cancel()
	}
	if ctx.Err() != nil && err != nil {
		return // stopping: the lease runs out and another sender retries
	}
	o := notify.AfterAttempt(err, n.Attempts, s.now(), rand.Float64())
	s.Metrics.observe(n.Channel, o, time.Since(started))
	// The record outlives a stopping sender: what was sent stays sent.
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ok, ferr := s.Store.FinishNotification(recordCtx, n, o, s.now())
	switch {
	case ferr != nil:
		log.Error("recording a notification's outcome", "id", n.ID, "channel", n.Channel, "error", ferr)
	case !ok:
		s.Metrics.leaseLost()
		log.Warn("a notification's lease ran out before its outcome was recorded; another sender may send it again",
			"id", n.ID, "channel", n.Channel)
	case o.State == notify.StateSent:
		log.Debug("notification sent", "id", n.ID, "channel", n.Channel, "taskId", n.TaskID, "event", n.Event)
	default:
		log.Warn("notification not sent", "id", n.ID, "channel", n.Channel, "taskId", n.TaskID, "state", o.State,
			"attempt", n.Attempts, "reason", o.Error)
	}
}

// message is the notification's message: as stored for one asked for
// through the API, rendered from the task and the status its event
// announced for a task's.
func (s *Sender) message(ctx context.Context, n *store.Notification) (*notify.Message, error) {
	if n.TaskID == "" {
		var m notify.Message
		if err := json.Unmarshal(n.Message, &m); err != nil {
			return nil, notify.Permanent(fmt.Errorf("reading the stored message: %w", err))
		}
		return &m, nil
	}
	route, _, err := notify.ParseRoute(n.Route)
	if err != nil {
		return nil, notify.Permanent(err)
	}
	task, err := s.Store.GetTask(ctx, n.TaskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notify.Permanent(fmt.Errorf("task %s no longer exists", n.TaskID))
	}
	if err != nil {
		return nil, fmt.Errorf("loading task %s: %w", n.TaskID, err)
	}
	var status queue.Status
	if err := json.Unmarshal(n.Status, &status); err != nil {
		return nil, notify.Permanent(fmt.Errorf("reading the status of task %s: %w", n.TaskID, err))
	}
	tc := notify.TaskContext{TaskID: n.TaskID, Task: &task.Task, Status: &status, Event: n.Event, RunID: n.RunID,
		RootURL: s.RootURL, ID: n.ID, Now: s.now(), Rule: route}
	if s.LogTail != nil && n.RunID >= 0 && resolvedEvent(n.Event) {
		// Without its log lines the message still goes out.
		if tail, err := s.LogTail(ctx, n.TaskID, n.RunID); err == nil {
			tc.LogTail = tail
		}
	}
	return notify.Render(tc)
}

func resolvedEvent(kind string) bool {
	return kind == queue.EventTaskCompleted || kind == queue.EventTaskFailed || kind == queue.EventTaskException
}

// Metrics are the sender's figures on /metrics.
type Metrics struct {
	sent     *prometheus.CounterVec
	failures *prometheus.CounterVec
	duration *prometheus.HistogramVec
	lost     prometheus.Counter
	states   *statesCollector
}

// NewMetrics makes the sender's metrics; st, if set, also reports
// the outbox's notifications by state.
func NewMetrics(st store.NotifyStore) *Metrics {
	m := &Metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hopper_notify_sent_total", Help: "Notifications sent, by channel.",
		}, []string{"channel"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hopper_notify_failures_total",
			Help: "Notifications not sent, by channel and outcome (retry: tried again later; failed, denied, rate-limited: given up).",
		}, []string{"channel", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hopper_notify_send_duration_seconds", Help: "Time to render and send one notification, by channel.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"channel"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hopper_notify_lease_lost_total",
			Help: "Notifications sent whose lease ran out before the outcome was recorded (they may be sent again).",
		}),
	}
	if st != nil {
		m.states = &statesCollector{store: st, desc: prometheus.NewDesc("hopper_notify_notifications",
			"Notifications in the outbox, by state.", []string{"state"}, nil)}
	}
	return m
}

// Collectors lists the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	out := []prometheus.Collector{m.sent, m.failures, m.duration, m.lost}
	if m.states != nil {
		out = append(out, m.states)
	}
	return out
}

func (m *Metrics) observe(channel string, o notify.Outcome, d time.Duration) {
	if m == nil {
		return
	}
	m.duration.WithLabelValues(channel).Observe(d.Seconds())
	switch o.State {
	case notify.StateSent:
		m.sent.WithLabelValues(channel).Inc()
	case notify.StatePending:
		m.failures.WithLabelValues(channel, "retry").Inc()
	default:
		m.failures.WithLabelValues(channel, o.State).Inc()
	}
}

func (m *Metrics) leaseLost() {
	if m != nil {
		m.lost.Inc()
	}
}

type statesCollector struct {
	store store.NotifyStore
	desc  *prometheus.Desc
}

func (c *statesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *statesCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	states, err := c.store.NotificationStates(ctx)
	if err != nil {
		return
	}
	for _, s := range []string{notify.StatePending, notify.StateSent, notify.StateFailed, notify.StateRefused,
		notify.StateDenied, notify.StateRateLimited} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(states[s]), s)
	}
}
