package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the report as an aligned table.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "benchmark\tsetting\tresult\tdetail\n")
	if l := r.Lifecycle; l != nil {
		fmt.Fprintf(tw, "life-cycle\t%d tasks, %d creators, %d workers, batch %d\t%.0f tasks/s\t%s total; creates done after %s (%.0f/s); %.1f tasks per non-empty claimWork%s%s\n",
			l.Tasks, l.Creators, l.Workers, l.ClaimBatch, l.TasksPerSecond(), ms(l.Elapsed), ms(l.CreateElapsed), l.CreatesPerSecond(),
			float64(l.Tasks)/float64(max(l.ClaimCalls, 1)), l.CPU.describe(l.Tasks), l.Machine.describe(l.Tasks, l.Elapsed))
	}
	if k := r.Wake; k != nil {
		fmt.Fprintf(tw, "wake\t%d samples\tp50 %s  p99 %s\tfrom the createTask reply (min %s, p90 %s, max %s); from its request p50 %s p99 %s\n",
			k.FromReply.Samples, ms(k.FromReply.P50), ms(k.FromReply.P99), ms(k.FromReply.Min), ms(k.FromReply.P90), ms(k.FromReply.Max),
			ms(k.FromRequest.P50), ms(k.FromRequest.P99))
	}
	for _, b := range r.Backlog {
		fmt.Fprintf(tw, "claim cost\tbacklog %d, %d samples\tp50 %s  p99 %s\tclaimWork(1)+reportCompleted, mean %s, max %s; queued in %s (%.0f/s, %s)\n",
			b.Backlog, b.Cycle.Samples, ms(b.Cycle.P50), ms(b.Cycle.P99), ms(b.Cycle.Mean), ms(b.Cycle.Max),
			ms(b.PrefillElapsed), b.PrefillPerSecond(), b.PrefillMethod)
	}
	if n := len(r.Backlog); n >= 2 {
		first, last := r.Backlog[0], r.Backlog[n-1]
		fmt.Fprintf(tw, "claim cost\tbacklog %d vs %d\tp50 ×%.2f\tmean ×%.2f (flat is ×1)\n",
			last.Backlog, first.Backlog, ratio(last.Cycle.P50, first.Cycle.P50), ratio(last.Cycle.Mean, first.Cycle.Mean))
	}
	if f := r.Fleet; f != nil {
		writeFleet(tw, f)
	}
	return tw.Flush()
}

func writeFleet(w io.Writer, f *FleetResult) {
	mib := func(b int64) string {
		if b <= 0 {
			return "not measured"
		}
		return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
	}
	idle := "server CPU not measured"
	if f.IdleCPU >= 0 {
		idle = fmt.Sprintf("server CPU %.1f%% of a core over %s of waiting", 100*float64(f.IdleCPU)/float64(f.IdleWindow), f.IdleWindow)
	}
	fmt.Fprintf(w, "fleet\t%d idle workers\tserver RSS %s\tread %s after the first connected; %s; peak RSS %s\n",
		f.Workers, mib(f.IdleRSS), ms(f.Settle), idle, mib(f.PeakRSS))
	// The CPU per task beside the fleet includes the fleet's polling
	// during the run; alone, it does not: the difference is their cost.
	alone := ""
	if d := f.Alone.CPU.describe(f.Alone.Tasks); d != "" {
		alone = "; without them: " + strings.TrimPrefix(d, "; ")
	}
	fmt.Fprintf(w, "fleet\tlife-cycle beside them\t%.0f tasks/s\t%.0f%% of the %.0f tasks/s without them (%d tasks, %d creators, %d workers)%s%s\n",
		f.Beside.TasksPerSecond(), 100*f.Beside.TasksPerSecond()/max(f.Alone.TasksPerSecond(), 1e-9), f.Alone.TasksPerSecond(),
		f.Beside.Tasks, f.Beside.Creators, f.Beside.Workers, f.Beside.CPU.describe(f.Beside.Tasks), alone)
	fmt.Fprintf(w, "fleet\t%d tasks, one per worker\tp50 %s  p99 %s\t%d of %d woken, from each createTask reply to the claimWork reply (max %s); created in %s\n",
		f.Workers, ms(f.Wake.P50), ms(f.Wake.P99), f.Woken, f.Workers, ms(f.Wake.Max), ms(f.CreateElapsed))
}

// ms renders a duration in milliseconds with three significant decimals.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond))
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
