package queueapi

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Metrics are the queue's Prometheus metrics, served through
// api.NewMetrics(m.Collectors()...).
type Metrics struct {
	collectors  []prometheus.Collector
	claims      *prometheus.CounterVec
	resolutions *prometheus.CounterVec
}

// MetricsStore is what the queue's metrics read at scrape time: the task
// queues' counts and the flow keys.
type MetricsStore interface {
	ListTaskQueues(ctx context.Context, now time.Time, filter store.TaskQueueFilter, page store.Page) ([]store.TaskQueue, string, error)
	TaskQueueCounts(ctx context.Context, taskQueueID string, now time.Time) (pending, claimed int, err error)
	CountWorkersSeen(ctx context.Context, since time.Time) (map[string]int, error)
	store.FlowStore
}

// WorkerAskingWindow is how long after its last claimWork a worker counts
// as asking for work: a worker's polls are recorded at most once per
// touchInterval, and an idle one polls at least every long-poll.
const WorkerAskingWindow = touchInterval + DefaultLongPoll + 10*time.Second

// NewMetrics registers the metrics. The queue gauges (pending and running
// per task queue) are read from the store at scrape time, so every replica
// reports the same, current numbers.
func NewMetrics(st MetricsStore, clock queue.Clock) *Metrics {
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
	m.register(m.claims, m.resolutions,
		newFlowCollector(st),
		&queueCollector{store: st, clock: clock,
			pending: prometheus.NewDesc("hopper_pending_tasks", "Pending runs per task queue.", []string{"task_queue_id"}, nil),
			running: prometheus.NewDesc("hopper_claimed_tasks", "Claimed (running) runs per task queue.", []string{"task_queue_id"}, nil),
			asking: prometheus.NewDesc("hopper_workers_asking", "Workers per task queue that asked for work (claimWork) within the last 90 s; "+
				"workers whose slots are all busy do not ask, their runs are in hopper_claimed_tasks.", []string{"task_queue_id"}, nil),
		})
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
	store            MetricsStore
	clock            queue.Clock
	pending, running *prometheus.Desc
	asking           *prometheus.Desc
}

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- q.pending
	ch <- q.running
	ch <- q.asking
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := q.clock.Now()
	queues, _, err := q.store.ListTaskQueues(ctx, now, store.TaskQueueFilter{}, store.Page{Limit: 1000})
	if err != nil {
		return
	}
	asking, err := q.store.CountWorkersSeen(ctx, now.Add(-WorkerAskingWindow))
	if err != nil {
		return
	}
	for _, tq := range queues {
		ch <- prometheus.MustNewConstMetric(q.asking, prometheus.GaugeValue, float64(asking[tq.TaskQueueID]), tq.TaskQueueID)
		pending, claimed, err := q.store.TaskQueueCounts(ctx, tq.TaskQueueID, now)
		if err != nil {
			return
		}
		ch <- prometheus.MustNewConstMetric(q.pending, prometheus.GaugeValue, float64(pending), tq.TaskQueueID)
		ch <- prometheus.MustNewConstMetric(q.running, prometheus.GaugeValue, float64(claimed), tq.TaskQueueID)
	}
}
