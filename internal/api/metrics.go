package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are hopper's Prometheus metrics: the requests of every route,
// the Go runtime and the process, and what the services add (their
// collectors, given to NewMetrics).
type Metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics registers the request metrics and the services' collectors.
func NewMetrics(services ...prometheus.Collector) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hopper_api_requests_total", Help: "API requests by method and HTTP status.",
		}, []string{"method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hopper_api_request_duration_seconds", Help: "API request latency by method (claimWork includes its long-poll).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20},
		}, []string{"method"}),
	}
	m.registry.MustRegister(m.requests, m.latency,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	m.registry.MustRegister(services...)
	return m
}

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// ObserveRequest records one API request.
func (m *Metrics) ObserveRequest(method string, status int, d time.Duration) {
	m.requests.WithLabelValues(method, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(method).Observe(d.Seconds())
}
