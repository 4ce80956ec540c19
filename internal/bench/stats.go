package bench

import (
	"slices"
	"time"
)

// Latency summarises a set of durations.
type Latency struct {
	Samples                 int
	Min, P50, P90, P99, Max time.Duration
	Mean                    time.Duration
}

// summarize computes the summary; percentiles use the nearest-rank method
// (the smallest sample with at least p% of samples at or below it), so
// every reported figure is a real observation.
func summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var total time.Duration
	for _, d := range s {
		total += d
	}
	return Latency{
		Samples: len(s),
		Min:     s[0],
		P50:     rank(s, 50),
		P90:     rank(s, 90),
		P99:     rank(s, 99),
		Max:     s[len(s)-1],
		Mean:    total / time.Duration(len(s)),
	}
}

// rank returns the nearest-rank p-th percentile of sorted samples.
func rank(sorted []time.Duration, p int) time.Duration {
	i := (p*len(sorted) + 99) / 100 // ceil(p/100 · n), 1-based
	return sorted[max(i, 1)-1]
}
