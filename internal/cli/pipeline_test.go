package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPlanPipeline(t *testing.T) {
	t.Parallel()
	d := Defaults{Now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), RootURL: "http://hopper.test", Description: "from p.yaml", Owner: "me@example.com"}
	parse := func(t *testing.T, text string) map[string]any {
		t.Helper()
		doc, err := ParseTaskDocument("p.yaml", []byte(text))
		require.NoError(t, err)
		require.True(t, isPipeline(doc))
		return doc
	}

	t.Run("needs become dependencies in one group, created in order", func(t *testing.T) {
		t.Parallel()
		doc := parse(t, `
taskQueueId: ci/linux
metadata: {owner: team@example.com}
routes: [notify.shared]
tasks:
  test: {needs: build, payload: {command: [[make, test]], maxRunTime: 60}}
  build:
    metadata: {name: compile}
    payload: {command: [[make]], maxRunTime: 60}
  lint: {payload: {command: [[make, lint]], maxRunTime: 60}}
  deploy: {needs: [test, lint], routes: [notify.deploy], payload: {command: [[make, deploy]], maxRunTime: 60}}
`)
		group, tasks, err := planPipeline("p.yaml", doc, d)
		require.NoError(t, err)
		labels := []string{}
		ids := map[string]string{}
		for _, tk := range tasks {
			labels = append(labels, tk.label)
			ids[tk.label] = tk.taskID
			require.Equal(t, group, tk.doc["taskGroupId"])
			require.Equal(t, "ci/linux", tk.doc["taskQueueId"])
			require.NotContains(t, tk.doc, "needs")
			require.Equal(t, "team@example.com", tk.doc["metadata"].(map[string]any)["owner"], "mappings merge with the file's defaults")
		}
		require.Equal(t, []string{"build", "lint", "test", "deploy"}, labels, "each task after those it needs")
		byLabel := func(l string) map[string]any {
			for _, tk := range tasks {
				if tk.label == l {
					return tk.doc
				}
			}
			return nil
		}
		require.Nil(t, byLabel("build")["dependencies"])
		require.Equal(t, []any{ids["build"]}, byLabel("test")["dependencies"])
		require.ElementsMatch(t, []any{ids["test"], ids["lint"]}, byLabel("deploy")["dependencies"])
		require.Equal(t, "compile", byLabel("build")["metadata"].(map[string]any)["name"])
		require.Equal(t, "test", byLabel("test")["metadata"].(map[string]any)["name"], "a task is named after its label")
		require.Equal(t, []any{"notify.deploy"}, byLabel("deploy")["routes"], "a task's own value wins whole")
		require.Equal(t, []any{"notify.shared"}, byLabel("lint")["routes"])
		require.Len(t, ids, 4)
	})

	tests := []struct{ name, text, want string }{
		{"unknown need", "tasks: {a: {needs: [b], payload: {}}}", `task "a" needs "b", which is not a task of this file (its tasks: a)`},
		{"needs itself", "tasks: {a: {needs: a, payload: {}}}", `task "a" needs itself`},
		{"cycle", "tasks: {a: {needs: b, payload: {}}, b: {needs: c, payload: {}}, c: {needs: a, payload: {}}, d: {payload: {}}}", "the needs of a, b, c form a cycle"},
		{"tasks not a mapping", "tasks: [a, b]", "tasks must be a mapping of labels to task definitions"},
		{"task not a mapping", "tasks: {a: 3}", `task "a" must be a mapping`},
		{"needs not names", "tasks: {a: {needs: [{x: 1}], payload: {}}}", `task "a": needs: expected a list of names`},
		{"another group", "taskGroupId: fN1SbArXTPSVFNUvaOlinQ\ntasks: {a: {taskGroupId: aGQjzPjDTCGGZHZdHO9Jkw, payload: {}}}", `task "a" names another taskGroupId`},
		{"no payload", "tasks: {a: {metadata: {name: x}}}", `task "a": the task definition has no payload`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := planPipeline("p.yaml", parse(t, tt.text), d)
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, ExitUsage, err.(*ExitError).Code)
		})
	}
}
