package queueapi

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hopper-ci/hopper/internal/clock"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Metrics are the queue's Prometheus metrics, served through
// api.NewMetrics(m.Collectors()...).
type Metrics struct {
	collectors  []prometheus.Collector
	claims      *prometheus.CounterVec
	resolutions *prometheus.CounterVec
	queues      *queueCollector
}

// MetricsStore is what the queue's metrics read at scrape time: the task
// queues' counts and the flow keys.
type MetricsStore interface {
	ListTaskQueues(ctx context.Context, now time.Time, filter store.TaskQueueFilter, page store.Page) ([]store.TaskQueue, string, error)
	TaskQueueCounts(ctx context.Context, taskQueueID string, now time.Time) (pending, claimed int, err error)
	store.LivenessStore
	store.FlowStore
}

// NewMetrics registers the metrics. The queue gauges (pending and running
// per task queue) are read from the store at scrape time, so every replica
// reports the same, current numbers.
func NewMetrics(st MetricsStore, clock clock.Clock) *Metrics {
	m := &Metrics{
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hopper_claims_total", Help: "Runs claimed, by task queue.",
		}, []string{"task_queue_id"}),
		resolutions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hopper_resolutions_total", Help: "Runs resolved, by state and reason.",
		}, []string{"state", "reason"}),
	}
	if c, ok := st.(interface{ CombinedStats() store.CombinedStats }); ok {
		// Their ratio is the mean number of calls sharing a transaction,
		// for tuning --db-batches.
		kinds := []struct {
			kind           string
			batches, calls func(store.CombinedStats) uint64
		}{
			{"update", func(s store.CombinedStats) uint64 { return s.UpdateBatches }, func(s store.CombinedStats) uint64 { return s.UpdateCalls }},
			{"create", func(s store.CombinedStats) uint64 { return s.CreateBatches }, func(s store.CombinedStats) uint64 { return s.CreateCalls }},
		}
		for _, k := range kinds {
			counter := func(name, help string, pick func(store.CombinedStats) uint64) prometheus.CounterFunc {
				return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: prometheus.Labels{"kind": k.kind}},
					func() float64 { return float64(pick(c.CombinedStats())) })
			}
			m.register(
				counter("hopper_store_transactions_total", "Transactions that ran combined task updates (kind=update) or creates (kind=create).", k.batches),
				counter("hopper_store_combined_calls_total", "Task updates or creates run in combined transactions.", k.calls))
		}
		m.register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hopper_store_handed_over_runs_total",
			Help: "Runs claimed as created by this process, without a look at the queue in the database.",
		}, func() float64 { return float64(c.CombinedStats().HandedOverRuns) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "hopper_store_claimed_at_create_runs_total",
				Help: "Runs claimed for waiting claimWork calls by the creates that made them, in the same transaction.",
			}, func() float64 { return float64(c.CombinedStats().ClaimedAtCreate) }))
	}
	m.register(m.claims, m.resolutions, newFlowCollector(st))
	m.queues = &queueCollector{store: st, clock: clock,
		pending: prometheus.NewDesc("hopper_pending_tasks", "Pending runs per task queue.", []string{"task_queue_id"}, nil),
		running: prometheus.NewDesc("hopper_claimed_tasks", "Claimed (running) runs per task queue.", []string{"task_queue_id"}, nil),
		online: prometheus.NewDesc("hopper_workers_online", "Workers online per task queue: seen (claimWork, reclaimTask) within "+
			"the last long-poll and a minute, or holding a run whose claim lasts.", []string{"task_queue_id"}, nil),
		capacity: prometheus.NewDesc("hopper_workers_capacity", "Tasks the online workers of a task queue run at once "+
			"(each the most it asked for in one claimWork).", []string{"task_queue_id"}, nil),
		busy: prometheus.NewDesc("hopper_workers_busy", "Busy slots per task queue: runs its workers hold (running, claims lasting).",
			[]string{"task_queue_id"}, nil),
		liveness: defaultLiveness(),
	}
	m.register(m.queues)
	return m
}

// Collectors are the queue's metrics, for api.NewMetrics.
func (m *Metrics) Collectors() []prometheus.Collector { return m.collectors }

func (m *Metrics) register(cs ...prometheus.Collector) { m.collectors = append(m.collectors, cs...) }

// ObserveChanges counts claims and resolutions among committed changes.
func (m *Metrics) ObserveChanges(changes []store.Change) {
	for _, ch := range changes {
		for _, e := range ch.Events {
			switch e.Kind {
			case queue.EventTaskRunning:
				m.claims.WithLabelValues(ch.Task.Task.TaskQueueID).Inc()
			case queue.EventTaskCompleted, queue.EventTaskFailed, queue.EventTaskException:
				if e.RunID >= 0 && e.RunID < len(ch.Task.Runs) {
					r := ch.Task.Runs[e.RunID]
					m.resolutions.WithLabelValues(r.State, r.ReasonResolved).Inc()
				}
			}
		}
	}
}

type queueCollector struct {
	store                  MetricsStore
	clock                  clock.Clock
	pending, running       *prometheus.Desc
	online, capacity, busy *prometheus.Desc
	liveness               liveness // set by New from the queue's settings
}

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{q.pending, q.running, q.online, q.capacity, q.busy} {
		ch <- d
	}
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := q.clock.Now()
	queues, _, err := q.store.ListTaskQueues(ctx, now, store.TaskQueueFilter{}, store.Page{Limit: 1000})
	if err != nil {
		return
	}
	loads, err := q.liveness.queueLoads(ctx, q.store, now)
	if err != nil {
		return
	}
	gauge := func(d *prometheus.Desc, v int, id string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), id)
	}
	for _, tq := range queues {
		l := loads[tq.TaskQueueID]
		gauge(q.online, l.online, tq.TaskQueueID)
		gauge(q.capacity, l.capacity, tq.TaskQueueID)
		gauge(q.busy, l.busy, tq.TaskQueueID)
		pending, claimed, err := q.store.TaskQueueCounts(ctx, tq.TaskQueueID, now)
		if err != nil {
			return
		}
		gauge(q.pending, pending, tq.TaskQueueID)
		gauge(q.running, claimed, tq.TaskQueueID)
	}
}
