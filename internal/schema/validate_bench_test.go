package schema

import "testing"

var benchBody = []byte(`{"taskQueueId":"hopper-bench/lc","created":"2026-11-21T23:00:00.000Z","deadline":"2026-11-22T00:00:00.000Z","expires":"2026-11-23T00:00:00.000Z","payload":{},"metadata":{"name":"hopper bench","description":"a benchmark task; it runs nothing","owner":"hopper-bench@localhost","source":"https://github.com/hopper-ci/hopper"}}`)

// BenchmarkValidateCreateTask measures a typical createTask body: go test
// ./internal/schema -run '^$' -bench Validate -benchmem
func BenchmarkValidateCreateTask(b *testing.B) {
	r, err := New()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := r.Validate("create-task-request", benchBody); err != nil {
			b.Fatal(err)
		}
	}
}
