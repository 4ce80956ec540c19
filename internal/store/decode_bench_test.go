package store

import (
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
)

// BenchmarkDecodeTaskFlow decodes a stored task with a flow block and
// no cached definition, as a replica that did not create it (or one that
// restarted) reads it: the definition is decoded, its policy read from
// the row (before migration 054, parsed again from the block).
func BenchmarkDecodeTaskFlow(b *testing.B) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	def := queue.Task{
		ProvisionerID: "prov", WorkerType: "wt", TaskQueueID: "prov/wt", SchedulerID: "-", ProjectID: "none",
		TaskGroupID: "groupAAAAAAAAAAAAAAAAA", Dependencies: []string{}, Requires: queue.RequiresAllCompleted,
		Routes: []string{"index.project.branch.latest"}, Priority: "lowest", Retries: 5,
		Created: queue.NewTime(now), Deadline: queue.NewTime(now.Add(time.Hour)), Expires: queue.NewTime(now.Add(48 * time.Hour)),
		Scopes:   []string{"secrets:get:project/ci"},
		Payload:  json.RawMessage(`{"image":"ubuntu:24.04","command":["/bin/bash","-c","make test"],"maxRunTime":3600,"env":{"CI":"1"}}`),
		Metadata: queue.Metadata{Name: "test", Description: "runs the tests", Owner: "dev@example.com", Source: "https://example.com/repo"},
		Tags:     map[string]string{"kind": "test"},
		Extra:    json.RawMessage(`{"flow":{"key":"deploy-prod","limit":1,"supersede":true,"failFast":true},"treeherder":{"symbol":"T"}}`),
	}
	raw, err := json.Marshal(def)
	require.NoError(b, err)
	flow, err := queue.ParseFlow(&def)
	require.NoError(b, err)
	stored := storedTask{def: string(raw), runs: `[]`,
		flow: sql.NullInt64{Int64: flowColumn(flow), Valid: true}, flowKey: sql.NullString{String: flow.Key, Valid: true}}
	db := &DB{defs: definitionCache{max: 20000}}
	for b.Loop() {
		clear(db.defs.entries) // a cold cache
		var t queue.TaskState
		t.TaskID = "taskAAAAAAAAAAAAAAAAAA"
		if err := db.decodeTask(&t, &stored); err != nil {
			b.Fatal(err)
		}
		if !t.Task.Flow.Keyed() {
			b.Fatal("no flow policy")
		}
	}
}
