package notify_test

import (
	"testing"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/queue"
)

// BenchmarkHasRoutes is what a transition of a task without notify routes
// pays for notifications: a scan of its routes (here three index routes).
func BenchmarkHasRoutes(b *testing.B) {
	def := &queue.Task{Routes: []string{"index.project.app.latest", "index.project.app.revision.abc", "tc-treeherder.v2.project.abc"}}
	for b.Loop() {
		if notify.HasRoutes(def) {
			b.Fatal("no notify route")
		}
	}
}

// BenchmarkForEvents is the rules' part for a task with two notify routes
// resolving: which notifications its task-completed event produces.
func BenchmarkForEvents(b *testing.B) {
	def := &queue.Task{Routes: []string{"index.project.app.latest", "notify.email.team@example.com.on-failed", "notify.webhook.chat.on-resolved"}}
	st := &queue.Status{State: "completed", Runs: []queue.Run{{RunID: 0, State: "completed", ReasonResolved: "completed"}}}
	events := []queue.Event{{Kind: queue.EventTaskCompleted, RunID: 0, Status: st}}
	for b.Loop() {
		if len(notify.ForEvents(def, events)) != 1 {
			b.Fatal("want one notification")
		}
	}
}
