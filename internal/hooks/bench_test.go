package hooks

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkScheduleNext measures computing a hook's next due time, as the
// scheduler does after every fire and createHook/updateHook do.
func BenchmarkScheduleNext(b *testing.B) {
	for _, tc := range []struct {
		name     string
		patterns []string
	}{
		{"every-second", []string{"* * * * * *"}},
		{"weekdays-twice", []string{"0 0 9,21 * * 1-5", "0 0 12 * * 0,6"}},
		{"leap-day", []string{"0 0 0 29 2 *"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := ParseSchedule(tc.patterns)
			if err != nil {
				b.Fatal(err)
			}
			at := time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := s.Next(at); !ok {
					b.Fatal("no next")
				}
			}
		})
	}
}

// BenchmarkRenderTask measures rendering a typical decision-task template
// for a fire.
func BenchmarkRenderTask(b *testing.B) {
	def := &Definition{Task: json.RawMessage(`{"taskQueueId":"proj/decision","created":{"$fromNow":"0 seconds"},
		"deadline":{"$fromNow":"1 day"},"routes":["index.proj.${firedBy}.latest"],
		"payload":{"command":[["sh","-c",{"$eval":"'run ' + payload.branch"}]],"maxRunTime":600},
		"metadata":{"name":"decision ${payload.branch}","description":"d","owner":"o@example.com","source":"https://example.com"}}`)}
	fire := Fire{FiredBy: FiredByTriggerHook, TaskID: "fN1gHwxWQJmjsxJyHD-ZwA", Payload: map[string]any{"branch": "main"},
		Now: time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderTask(def, fire); err != nil {
			b.Fatal(err)
		}
	}
}
