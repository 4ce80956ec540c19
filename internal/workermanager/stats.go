package workermanager

import (
	"sort"
	"time"
)

// Counts are the number and capacity of a pool's workers in each state.
type Counts struct {
	RequestedCount, RunningCount, StoppingCount, StoppedCount             int
	RequestedCapacity, RunningCapacity, StoppingCapacity, StoppedCapacity int
}

// Add counts a worker.
func (c *Counts) Add(state State, capacity int) { c.AddN(state, 1, capacity) }

// AddN counts n workers in a state, of capacity in all.
func (c *Counts) AddN(state State, n, capacity int) {
	switch state {
	case StateRequested:
		c.RequestedCount += n
		c.RequestedCapacity += capacity
	case StateRunning:
		c.RunningCount += n
		c.RunningCapacity += capacity
	case StateStopping:
		c.StoppingCount += n
		c.StoppingCapacity += capacity
	case StateStopped:
		c.StoppedCount += n
		c.StoppedCapacity += capacity
	}
}

// Current is the capacity that is or will soon be working: requested
// and running.
func (c Counts) Current() int { return c.RequestedCapacity + c.RunningCapacity }

// PoolError is an error reported about a pool: by a worker
// (reportWorkerError) or by the provisioner.
type PoolError struct {
	WorkerPoolID   string
	ErrorID        string
	Reported       time.Time
	Kind           string
	Title          string
	Description    string
	Extra          map[string]any
	LaunchConfigID string
}

// ErrorTotals are workerPoolErrorStats' figures: errors of the last 7
// days by day, of the last 24 hours by hour, and by title, code (kind),
// pool and launch config.
type ErrorTotals struct {
	Total        int
	Daily        map[string]int
	Hourly       map[string]int
	Title        map[string]int
	Code         map[string]int
	WorkerPool   map[string]int
	LaunchConfig map[string]int
}

// ErrorStatsWindow is how far back workerPoolErrorStats looks.
const ErrorStatsWindow = 7 * 24 * time.Hour

// SummariseErrors computes the totals of errs (those of the last 7 days)
// at now. Every day and hour of the windows appears, with 0 where there
// were none, as Taskcluster's series do.
func SummariseErrors(errs []PoolError, now time.Time, byLaunchConfig bool) ErrorTotals {
	t := ErrorTotals{Daily: map[string]int{}, Hourly: map[string]int{}, Title: map[string]int{},
		Code: map[string]int{}, WorkerPool: map[string]int{}, LaunchConfig: map[string]int{}}
	today := now.UTC().Truncate(24 * time.Hour)
	hour := now.UTC().Truncate(time.Hour)
	for i := 0; i < 7; i++ {
		t.Daily[today.Add(-time.Duration(i)*24*time.Hour).Format(jsonTime)] = 0
	}
	for i := 0; i < 24; i++ {
		t.Hourly[hour.Add(-time.Duration(i)*time.Hour).Format(jsonTime)] = 0
	}
	for _, e := range errs {
		at := e.Reported.UTC()
		if now.Sub(at) > ErrorStatsWindow {
			continue
		}
		d := at.Truncate(24 * time.Hour).Format(jsonTime)
		if _, ok := t.Daily[d]; !ok {
			continue
		}
		t.Total++
		t.Daily[d]++
		if h := at.Truncate(time.Hour).Format(jsonTime); now.Sub(at) <= 24*time.Hour {
			if _, ok := t.Hourly[h]; ok {
				t.Hourly[h]++
			}
		}
		t.Title[e.Title]++
		t.Code[e.Kind]++
		t.WorkerPool[e.WorkerPoolID]++
		if byLaunchConfig {
			lc := e.LaunchConfigID
			if lc == "" {
				lc = "unknown"
			}
			t.LaunchConfig[lc]++
		}
	}
	return t
}

const jsonTime = "2006-01-02T15:04:05.000Z"

// SortErrors orders errors newest first, then by id.
func SortErrors(errs []PoolError) {
	sort.Slice(errs, func(i, j int) bool {
		if !errs[i].Reported.Equal(errs[j].Reported) {
			return errs[i].Reported.After(errs[j].Reported)
		}
		return errs[i].ErrorID < errs[j].ErrorID
	})
}
