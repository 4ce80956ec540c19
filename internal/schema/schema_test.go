package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

const (
	slugA = "CQhoJlHNQcKxCdQcdXe8tQ"
	slugB = "NQ-pWjM5TZeNsKBVIh12RA"
	slugC = "PDBaD0o_SNGBEP-VD1Ws5w"
)

// setup compiles a registry for one test.
func setup(t *testing.T) *Registry {
	t.Helper()
	r, err := New()
	require.NoError(t, err)
	return r
}

// taskBody returns a minimal valid createTask body, changed by edit.
func taskBody(edit func(map[string]any)) string {
	body := map[string]any{
		"taskQueueId": "proj-x/builder",
		"created":     "2024-05-01T12:00:00.000Z",
		"deadline":    "2024-05-02T12:00:00.000Z",
		"payload":     map[string]any{"command": []any{"true"}},
		"metadata": map[string]any{
			"name":        "build",
			"description": "builds things",
			"owner":       "someone@example.com",
			"source":      "https://example.com/repo",
		},
	}
	if edit != nil {
		edit(body)
	}
	out, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return string(out)
}

// strings returns n distinct strings made by format.
func manyStrings(n int, format string) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

func TestNewRegistersEveryRequestSchema(t *testing.T) {
	t.Parallel()
	r := setup(t)
	require.Equal(t, []string{
		"authenticate-hawk-request",
		"change-task-priority-request",
		"claim-task-request",
		"claim-work-request",
		"create-client-request",
		"create-hook-request",
		"create-id-token-request",
		"create-role-request",
		"create-task-request",
		"create-worker-pool-request",
		"create-worker-request",
		"declare-provisioner-request",
		"declare-worker-request",
		"declare-worker-type-request",
		"finish-artifact-request",
		"github-create-comment-request", "github-create-status-request", "github-render-taskcluster-yml-request",
		"index-find-tasks-request", "index-insert-task-request",
		"login-cli-token-request",
		"login-device-token-request",
		"login-oauth-decision-request",
		"notify-address", "notify-email-request", "notify-matrix-request", "notify-pulse-request",
		"notify-slack-request", "notify-webhook-request",
		"object-create-upload-request",
		"object-download-request",
		"object-finish-upload-request",
		"object-hashes",
		"post-artifact-request",
		"purge-cache-request",
		"quarantine-worker-request",
		"register-worker-request",
		"report-completed-request",
		"report-worker-error-request",
		"reregister-worker-request",
		"scopeset", "secret",
		"task-exception-request",
		"task-ids-request",
		"taskcluster-github-config-v0", "taskcluster-github-config-v1",
		"test-authenticate-request",
		"trigger-hook-request",
		"update-client-request",
		"update-worker-pool-request",
		"worker-pool-config-docker",
		"worker-pool-config-kubernetes",
		"worker-pool-config-static",
	}, r.Names())
}

func TestValidateUnknownSchema(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for _, name := range []string{"nope", "common", "create-task-request.json", ""} {
		_, err := r.Validate(name, []byte(`{}`))
		var unknown *UnknownSchemaError
		require.ErrorAs(t, err, &unknown, name)
		require.Equal(t, name, unknown.Name)
		var verr *ValidationError
		require.False(t, errors.As(err, &verr), "an unknown schema is not the caller's input error")
	}
}

func TestValidateDecoding(t *testing.T) {
	t.Parallel()
	r := setup(t)

	t.Run("EmptyBodyIsEmptyObject", func(t *testing.T) {
		t.Parallel()
		for _, raw := range []string{"", "  \n\t"} {
			out, err := r.Validate("task-ids-request", []byte(raw))
			require.NoError(t, err)
			require.JSONEq(t, `{"taskIds": []}`, string(out))
		}
	})

	t.Run("Malformed", func(t *testing.T) {
		t.Parallel()
		for _, raw := range []string{`{"taskIds": []} {}`, `{"taskIds": [}`, `{} x`} {
			_, err := r.Validate("task-ids-request", []byte(raw))
			require.Error(t, err, raw)
			var verr *ValidationError
			require.False(t, errors.As(err, &verr), "malformed JSON is not a schema mismatch: %s", raw)
		}
	})

	t.Run("TopLevelMustBeObject", func(t *testing.T) {
		t.Parallel()
		for _, raw := range []string{`[]`, `"x"`, `3`, `null`} {
			_, err := r.Validate("task-ids-request", []byte(raw))
			var verr *ValidationError
			require.ErrorAs(t, err, &verr, raw)
			require.Contains(t, verr.Problems[0], "(root): got ", raw)
		}
	})
}

// validationCase is one body checked against one schema. With no problems
// expected the body must validate (and, if out is set, produce out); otherwise
// every expected fragment must appear in some problem line.
type validationCase struct {
	name     string
	schema   string
	body     string
	out      string
	problems []string
}

func runValidationCases(t *testing.T, cases []validationCase) {
	t.Helper()
	r := setup(t)
	for _, tc := range cases {
		t.Run(tc.schema+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := r.Validate(tc.schema, []byte(tc.body))
			if len(tc.problems) == 0 {
				require.NoError(t, err)
				if tc.out != "" {
					require.JSONEq(t, tc.out, string(out))
				}
				return
			}
			require.Nil(t, out)
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Equal(t, tc.schema, verr.Schema)
			for _, want := range tc.problems {
				found := false
				for _, p := range verr.Problems {
					if strings.Contains(p, want) {
						found = true
						break
					}
				}
				require.True(t, found, "no problem contains %q; problems:\n%s", want, strings.Join(verr.Problems, "\n"))
			}
		})
	}
}

func TestValidateCreateTask(t *testing.T) {
	t.Parallel()
	runValidationCases(t, []validationCase{
		{name: "Minimal", schema: "create-task-request", body: taskBody(nil)},
		{name: "Full", schema: "create-task-request", body: taskBody(func(b map[string]any) {
			b["provisionerId"] = "proj-x"
			b["workerType"] = "builder"
			b["schedulerId"] = "tc-gecko"
			b["projectId"] = "gecko/ci"
			b["taskGroupId"] = slugA
			b["dependencies"] = []any{slugB, slugC}
			b["requires"] = "all-resolved"
			b["routes"] = []any{"index.a.b", "notify.email.x@example.com.on-failed"}
			b["priority"] = "very-high"
			b["retries"] = 0
			b["expires"] = "2025-05-02T12:00:00+02:00"
			b["scopes"] = []any{"queue:get-artifact:private/*", "", "with space"}
			b["tags"] = map[string]any{"kind": "build"}
			b["extra"] = map[string]any{"treeherder": map[string]any{"symbol": "B"}}
		})},
		{name: "SplitQueueIdentityOnly", schema: "create-task-request", body: taskBody(func(b map[string]any) {
			delete(b, "taskQueueId")
			b["provisionerId"] = "Proj_X"
			b["workerType"] = "b"
		})},
		{name: "NoQueueIdentityIsLeftToTheHandler", schema: "create-task-request", body: taskBody(func(b map[string]any) {
			delete(b, "taskQueueId")
		})},
		{name: "NormalPriority", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["priority"] = "normal" })},
		{name: "GitSource", schema: "create-task-request", body: taskBody(func(b map[string]any) {
			b["metadata"].(map[string]any)["source"] = "git@github.com:org/repo.git"
		})},
		{name: "MaxDependencies", schema: "create-task-request", body: taskBody(func(b map[string]any) {
			deps := make([]any, 10000)
			for i := range deps {
				deps[i] = fmt.Sprintf("%08dQACAAAAAAAAAAA", i)
			}
			b["dependencies"] = deps
		})},

		{name: "UnknownField", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["bogus"] = 1 }),
			problems: []string{"(root): additional properties 'bogus' not allowed"}},
		{name: "UnknownMetadataField", schema: "create-task-request", body: taskBody(func(b map[string]any) {
			b["metadata"].(map[string]any)["url"] = "x"
		}), problems: []string{"/metadata: additional properties 'url' not allowed"}},
		{name: "MissingRequired", schema: "create-task-request", body: `{"taskQueueId": "a/b"}`,
			problems: []string{"(root): missing properties 'created', 'deadline', 'payload', 'metadata'"}},
		{name: "MissingMetadataMember", schema: "create-task-request", body: taskBody(func(b map[string]any) {
			delete(b["metadata"].(map[string]any), "owner")
		}), problems: []string{"/metadata: missing property 'owner'"}},
		{name: "BadSource", schema: "create-task-request", body: taskBody(func(b map[string]any) {
			b["metadata"].(map[string]any)["source"] = "javascript:alert(1)"
		}), problems: []string{"/metadata/source: "}},
		{name: "LongName", schema: "create-task-request", body: taskBody(func(b map[string]any) {
			b["metadata"].(map[string]any)["name"] = strings.Repeat("n", 256)
		}), problems: []string{"/metadata/name: "}},
		{name: "BadTaskQueueId", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["taskQueueId"] = "proj-x/Builder" }),
			problems: []string{"/taskQueueId: 'proj-x/Builder' does not match pattern"}},
		{name: "UpperCaseWorkerType", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["workerType"] = "Builder" }),
			problems: []string{"/workerType: "}},
		{name: "LongProvisionerId", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["provisionerId"] = strings.Repeat("p", 39) }),
			problems: []string{"/provisionerId: "}},
		{name: "EmptySchedulerId", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["schedulerId"] = "" }),
			problems: []string{"/schedulerId: "}},
		{name: "ProjectIdWithColon", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["projectId"] = "a:b" }),
			problems: []string{"/projectId: "}},
		{name: "BadTaskGroupId", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["taskGroupId"] = "not-a-slug" }),
			problems: []string{"/taskGroupId: "}},
		{name: "BadDependency", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["dependencies"] = []any{slugA, "nope"} }),
			problems: []string{"/dependencies/1: 'nope' does not match pattern"}},
		{name: "DuplicateDependency", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["dependencies"] = []any{slugA, slugA} }),
			problems: []string{"/dependencies: items at 0 and 1 are equal"}},
		{name: "TooManyDependencies", schema: "create-task-request", body: taskBody(func(b map[string]any) {
			deps := make([]any, 10001)
			for i := range deps {
				deps[i] = fmt.Sprintf("%08dQACAAAAAAAAAAA", i)
			}
			b["dependencies"] = deps
		}), problems: []string{"/dependencies: maxItems: got 10,001, want 10,000"}},
		{name: "BadRequires", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["requires"] = "all-failed" }),
			problems: []string{"/requires: value must be one of"}},
		{name: "TooManyRoutes", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["routes"] = manyStrings(65, "r%d") }),
			problems: []string{"/routes: maxItems: got 65, want 64"}},
		{name: "EmptyRoute", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["routes"] = []any{""} }),
			problems: []string{"/routes/0: "}},
		{name: "LongRoute", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["routes"] = []any{strings.Repeat("r", 250)} }),
			problems: []string{"/routes/0: "}},
		{name: "DuplicateRoute", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["routes"] = []any{"a", "a"} }),
			problems: []string{"/routes: items at 0 and 1 are equal"}},
		{name: "BadPriority", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["priority"] = "urgent" }),
			problems: []string{"/priority: value must be one of"}},
		{name: "RetriesTooHigh", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["retries"] = 50 }),
			problems: []string{"/retries: maximum: got 50, want 49"}},
		{name: "RetriesNegative", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["retries"] = -1 }),
			problems: []string{"/retries: minimum: got -1, want 0"}},
		{name: "RetriesFraction", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["retries"] = 1.5 }),
			problems: []string{"/retries: got number, want integer"}},
		{name: "ScopeNotPrintable", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["scopes"] = []any{"a\tb"} }),
			problems: []string{"/scopes/0: "}},
		{name: "ScopeNonASCII", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["scopes"] = []any{"queue:é"} }),
			problems: []string{"/scopes/0: "}},
		{name: "LongTag", schema: "create-task-request", body: taskBody(func(b map[string]any) {
			b["tags"] = map[string]any{"big": strings.Repeat("t", 4097)}
		}), problems: []string{"/tags/big: "}},
		{name: "NonStringTag", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["tags"] = map[string]any{"n": 1} }),
			problems: []string{"/tags/n: got number, want string"}},
		{name: "PayloadNotObject", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["payload"] = []any{} }),
			problems: []string{"/payload: got array, want object"}},
		{name: "DeadlineWithoutZone", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["deadline"] = "2024-05-02T12:00:00" }),
			problems: []string{"/deadline: '2024-05-02T12:00:00' is not valid date-time"}},
		{name: "CreatedNotADate", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["created"] = "yesterday" }),
			problems: []string{"/created: 'yesterday' is not valid date-time"}},
		{name: "ExpiresImpossibleDay", schema: "create-task-request", body: taskBody(func(b map[string]any) { b["expires"] = "2025-02-30T00:00:00Z" }),
			problems: []string{"/expires: "}},
	})
}

func TestValidateQueueBodies(t *testing.T) {
	t.Parallel()
	runValidationCases(t, []validationCase{
		{name: "Ids", schema: "task-ids-request", body: `{"taskIds": ["x", "x", "` + slugA + `"]}`,
			out: `{"taskIds": ["x", "x", "` + slugA + `"]}`},
		{name: "Default", schema: "task-ids-request", body: `{}`, out: `{"taskIds": []}`},
		{name: "UnknownField", schema: "task-ids-request", body: `{"taskIds": [], "limit": 3}`,
			problems: []string{"(root): additional properties 'limit' not allowed"}},
		{name: "NonStringId", schema: "task-ids-request", body: `{"taskIds": [1]}`,
			problems: []string{"/taskIds/0: got number, want string"}},

		{name: "DefaultTasks", schema: "claim-work-request", body: `{"workerGroup": "wg", "workerId": "w-1"}`,
			out: `{"workerGroup": "wg", "workerId": "w-1", "tasks": 1}`},
		{name: "ExplicitTasks", schema: "claim-work-request", body: `{"workerGroup": "wg", "workerId": "w_1", "tasks": 32}`,
			out: `{"workerGroup": "wg", "workerId": "w_1", "tasks": 32}`},
		{name: "TooManyTasks", schema: "claim-work-request", body: `{"workerGroup": "wg", "workerId": "w", "tasks": 33}`,
			problems: []string{"/tasks: maximum: got 33, want 32"}},
		{name: "ZeroTasks", schema: "claim-work-request", body: `{"workerGroup": "wg", "workerId": "w", "tasks": 0}`,
			problems: []string{"/tasks: minimum: got 0, want 1"}},
		{name: "MissingWorkerId", schema: "claim-work-request", body: `{"workerGroup": "wg"}`,
			problems: []string{"(root): missing property 'workerId'"}},
		{name: "BadWorkerGroup", schema: "claim-work-request", body: `{"workerGroup": "w.g", "workerId": "w"}`,
			problems: []string{"/workerGroup: 'w.g' does not match pattern"}},
		{name: "UnknownField", schema: "claim-work-request", body: `{"workerGroup": "wg", "workerId": "w", "capacity": 2}`,
			problems: []string{"additional properties 'capacity' not allowed"}},

		{name: "Valid", schema: "claim-task-request", body: `{"workerGroup": "wg", "workerId": "w"}`},
		{name: "LongWorkerId", schema: "claim-task-request", body: `{"workerGroup": "wg", "workerId": "` + strings.Repeat("w", 39) + `"}`,
			problems: []string{"/workerId: "}},
		{name: "Missing", schema: "claim-task-request", body: `{}`,
			problems: []string{"(root): missing properties 'workerGroup', 'workerId'"}},

		{name: "WorkerShutdown", schema: "task-exception-request", body: `{"reason": "worker-shutdown"}`},
		{name: "Superseded", schema: "task-exception-request", body: `{"reason": "superseded"}`},
		{name: "SeedSpelling", schema: "task-exception-request", body: `{"reason": "resources-unavailable"}`},
		{name: "Canceled", schema: "task-exception-request", body: `{"reason": "canceled"}`,
			problems: []string{"/reason: value must be one of"}},
		{name: "NoReason", schema: "task-exception-request", body: `{}`,
			problems: []string{"(root): missing property 'reason'"}},
		{name: "UnknownField", schema: "task-exception-request", body: `{"reason": "internal-error", "message": "x"}`,
			problems: []string{"additional properties 'message' not allowed"}},

		{name: "Empty", schema: "report-completed-request", body: ``, out: `{}`},
		{name: "Success", schema: "report-completed-request", body: `{"success": false}`, out: `{"success": false}`},
		{name: "OtherFieldsIgnored", schema: "report-completed-request", body: `{"anything": [1]}`},
		{name: "SuccessNotBool", schema: "report-completed-request", body: `{"success": "no"}`,
			problems: []string{"/success: got string, want boolean"}},

		{name: "Valid", schema: "finish-artifact-request", body: `{"uploadId": "` + slugA + `"}`},
		{name: "BadUploadId", schema: "finish-artifact-request", body: `{"uploadId": "abc"}`,
			problems: []string{"/uploadId: 'abc' does not match pattern"}},
		{name: "Missing", schema: "finish-artifact-request", body: `{}`,
			problems: []string{"(root): missing property 'uploadId'"}},

		{name: "Valid", schema: "quarantine-worker-request", body: `{"quarantineUntil": "2030-01-01T00:00:00Z", "quarantineInfo": "bad disk"}`},
		{name: "LongInfo", schema: "quarantine-worker-request", body: `{"quarantineUntil": "2030-01-01T00:00:00Z", "quarantineInfo": "` + strings.Repeat("i", 4001) + `"}`,
			problems: []string{"/quarantineInfo: "}},
		{name: "BadDate", schema: "quarantine-worker-request", body: `{"quarantineUntil": "2030-01-01"}`,
			problems: []string{"/quarantineUntil: '2030-01-01' is not valid date-time"}},
		{name: "Missing", schema: "quarantine-worker-request", body: `{"quarantineInfo": "x"}`,
			problems: []string{"(root): missing property 'quarantineUntil'"}},

		{name: "Empty", schema: "declare-worker-request", body: `{}`, out: `{}`},
		{name: "Expires", schema: "declare-worker-request", body: `{"expires": "2030-01-01T00:00:00.123456Z"}`},
		{name: "BadDate", schema: "declare-worker-request", body: `{"expires": 1700000000}`,
			problems: []string{"/expires: got number, want string"}},
		{name: "UnknownField", schema: "declare-worker-request", body: `{"expires": "2030-01-01T00:00:00Z", "quarantineUntil": "2030-01-01T00:00:00Z"}`,
			problems: []string{"additional properties 'quarantineUntil' not allowed"}},

		{name: "All", schema: "declare-provisioner-request", body: `{"stability": "stable", "description": "d", "expires": "2030-01-01T00:00:00Z",
			"actions": [{"name": "kill", "title": "Kill", "context": "worker", "url": "https://x/<workerId>", "method": "DELETE", "description": "d"}]}`},
		{name: "BadStability", schema: "declare-provisioner-request", body: `{"stability": "beta"}`,
			problems: []string{"/stability: value must be one of"}},
		{name: "BadActionMethod", schema: "declare-provisioner-request", body: `{"actions": [{"name": "kill", "title": "Kill", "context": "worker", "url": "u", "method": "GET", "description": "d"}]}`,
			problems: []string{"/actions/0/method: value must be one of"}},
		{name: "IncompleteAction", schema: "declare-provisioner-request", body: `{"actions": [{"name": "kill"}]}`,
			problems: []string{"/actions/0: missing properties"}},

		{name: "All", schema: "declare-worker-type-request", body: `{"stability": "deprecated", "description": "d", "expires": "2030-01-01T00:00:00Z"}`},
		{name: "Actions", schema: "declare-worker-type-request", body: `{"actions": []}`,
			problems: []string{"additional properties 'actions' not allowed"}},

		{name: "Valid", schema: "change-task-priority-request", body: `{"newPriority": "high"}`},
		{name: "Normal", schema: "change-task-priority-request", body: `{"newPriority": "normal"}`,
			problems: []string{"/newPriority: value must be one of"}},
		{name: "Missing", schema: "change-task-priority-request", body: `{}`,
			problems: []string{"(root): missing property 'newPriority'"}},
	})
}

func TestValidateAuthBodies(t *testing.T) {
	t.Parallel()
	runValidationCases(t, []validationCase{
		{name: "Minimal", schema: "create-client-request", body: `{"expires": "2030-01-01T00:00:00Z", "description": "ci"}`,
			out: `{"expires": "2030-01-01T00:00:00Z", "description": "ci", "scopes": [], "deleteOnExpiration": false}`},
		{name: "Full", schema: "create-client-request", body: `{"expires": "2030-01-01T00:00:00Z", "description": "ci", "scopes": ["a:*"], "deleteOnExpiration": true}`,
			out: `{"expires": "2030-01-01T00:00:00Z", "description": "ci", "scopes": ["a:*"], "deleteOnExpiration": true}`},
		{name: "DuplicateScopes", schema: "create-client-request", body: `{"expires": "2030-01-01T00:00:00Z", "description": "ci", "scopes": ["a", "a"]}`,
			problems: []string{"/scopes: items at 0 and 1 are equal"}},
		{name: "MissingExpires", schema: "create-client-request", body: `{"description": "ci"}`,
			problems: []string{"(root): missing property 'expires'"}},
		{name: "LongDescription", schema: "create-client-request", body: `{"expires": "2030-01-01T00:00:00Z", "description": "` + strings.Repeat("d", 10241) + `"}`,
			problems: []string{"/description: "}},
		{name: "UnknownField", schema: "create-client-request", body: `{"expires": "2030-01-01T00:00:00Z", "description": "ci", "accessToken": "x"}`,
			problems: []string{"additional properties 'accessToken' not allowed"}},

		{name: "ScopesKeptAbsent", schema: "update-client-request", body: `{"expires": "2030-01-01T00:00:00Z", "description": "ci"}`,
			out: `{"expires": "2030-01-01T00:00:00Z", "description": "ci", "deleteOnExpiration": false}`},
		{name: "BadScope", schema: "update-client-request", body: `{"expires": "2030-01-01T00:00:00Z", "description": "ci", "scopes": ["a\u0000"]}`,
			problems: []string{"/scopes/0: "}},

		{name: "Valid", schema: "create-role-request", body: `{"scopes": ["queue:*"], "description": "r"}`},
		{name: "MissingScopes", schema: "create-role-request", body: `{"description": "r"}`,
			problems: []string{"(root): missing property 'scopes'"}},
		{name: "DuplicateScopes", schema: "create-role-request", body: `{"scopes": ["x", "x"], "description": "r"}`,
			problems: []string{"/scopes: items at 0 and 1 are equal"}},

		{name: "Valid", schema: "scopeset", body: `{"scopes": ["assume:repo:*", ""]}`},
		{name: "Missing", schema: "scopeset", body: `{}`, problems: []string{"(root): missing property 'scopes'"}},
		{name: "NotArray", schema: "scopeset", body: `{"scopes": "a"}`, problems: []string{"/scopes: got string, want array"}},

		{name: "Defaults", schema: "test-authenticate-request", body: `{}`, out: `{"clientScopes": [], "requiredScopes": []}`},
		{name: "Valid", schema: "test-authenticate-request", body: `{"clientScopes": ["test:*"], "requiredScopes": ["test:x"]}`},
		{name: "UnknownField", schema: "test-authenticate-request", body: `{"clientId": "tester"}`,
			problems: []string{"additional properties 'clientId' not allowed"}},

		{name: "Valid", schema: "authenticate-hawk-request", body: `{"method": "get", "resource": "/api/queue/v1/ping?x=1", "host": "127.0.0.1", "port": 8080, "sourceIp": "::1"}`},
		{name: "UpperMethod", schema: "authenticate-hawk-request", body: `{"method": "GET", "resource": "/", "host": "h", "port": 80}`,
			problems: []string{"/method: value must be one of"}},
		{name: "BadPort", schema: "authenticate-hawk-request", body: `{"method": "get", "resource": "/", "host": "h", "port": 70000}`,
			problems: []string{"/port: maximum"}},
		{name: "BadSourceIp", schema: "authenticate-hawk-request", body: `{"method": "get", "resource": "/", "host": "h", "port": 80, "sourceIp": "nope"}`,
			problems: []string{"/sourceIp: "}},
	})
}

func TestValidatePostArtifact(t *testing.T) {
	t.Parallel()
	const exp = `"expires": "2030-01-01T00:00:00.000Z"`
	runValidationCases(t, []validationCase{
		{name: "S3", schema: "post-artifact-request", body: `{"storageType": "s3", ` + exp + `, "contentType": "text/plain"}`,
			out: `{"storageType": "s3", ` + exp + `, "contentType": "text/plain"}`},
		{name: "S3WithLength", schema: "post-artifact-request", body: `{"storageType": "s3", ` + exp + `, "contentType": "text/plain", "contentLength": 1e3}`,
			out: `{"storageType": "s3", ` + exp + `, "contentType": "text/plain", "contentLength": 1000}`},
		{name: "Object", schema: "post-artifact-request", body: `{"storageType": "object", ` + exp + `, "contentType": "application/json", "contentLength": 0}`},
		{name: "Reference", schema: "post-artifact-request", body: `{"storageType": "reference", ` + exp + `, "contentType": "text/html", "url": "https://example.com/x"}`},
		{name: "LinkDefaultsContentType", schema: "post-artifact-request", body: `{"storageType": "link", ` + exp + `, "artifact": "public/build.tar.gz"}`,
			out: `{"storageType": "link", ` + exp + `, "artifact": "public/build.tar.gz", "contentType": "application/binary"}`},
		{name: "LinkKeepsContentType", schema: "post-artifact-request", body: `{"storageType": "link", ` + exp + `, "artifact": "a", "contentType": "text/plain"}`,
			out: `{"storageType": "link", ` + exp + `, "artifact": "a", "contentType": "text/plain"}`},
		{name: "Error", schema: "post-artifact-request", body: `{"storageType": "error", ` + exp + `, "reason": "file-not-readable-on-worker", "message": "permission denied"}`,
			out: `{"storageType": "error", ` + exp + `, "reason": "file-not-readable-on-worker", "message": "permission denied"}`},

		{name: "ErrorBadReason", schema: "post-artifact-request", body: `{"storageType": "error", ` + exp + `, "reason": "lost", "message": "m"}`,
			problems: []string{"/reason: value must be one of 'file-missing-on-worker'"}},
		{name: "ErrorContentTypeNotAllowed", schema: "post-artifact-request", body: `{"storageType": "error", ` + exp + `, "reason": "file-missing-on-worker", "message": "m", "contentType": "text/plain"}`,
			problems: []string{"(root): additional properties 'contentType' not allowed"}},
		{name: "ErrorLongMessage", schema: "post-artifact-request", body: `{"storageType": "error", ` + exp + `, "reason": "file-missing-on-worker", "message": "` + strings.Repeat("m", 4097) + `"}`,
			problems: []string{"/message: "}},
		{name: "S3UnknownField", schema: "post-artifact-request", body: `{"storageType": "s3", ` + exp + `, "contentType": "text/plain", "contentSha256": "00"}`,
			problems: []string{"(root): additional properties 'contentSha256' not allowed"}},
		{name: "S3MissingContentType", schema: "post-artifact-request", body: `{"storageType": "s3", ` + exp + `}`,
			problems: []string{"(root): missing property 'contentType'"}},
		{name: "S3NegativeLength", schema: "post-artifact-request", body: `{"storageType": "s3", ` + exp + `, "contentType": "a", "contentLength": -1}`,
			problems: []string{"/contentLength: minimum"}},
		{name: "ReferenceRelativeURL", schema: "post-artifact-request", body: `{"storageType": "reference", ` + exp + `, "contentType": "a", "url": "/x"}`,
			problems: []string{"/url: '/x' is not valid uri"}},
		{name: "LinkMissingTarget", schema: "post-artifact-request", body: `{"storageType": "link", ` + exp + `}`,
			problems: []string{"(root): missing property 'artifact'"}},
		{name: "BadExpires", schema: "post-artifact-request", body: `{"storageType": "s3", "expires": "soon", "contentType": "a"}`,
			problems: []string{"/expires: 'soon' is not valid date-time"}},
		{name: "UnknownStorageType", schema: "post-artifact-request", body: `{"storageType": "azure", ` + exp + `, "contentType": "a"}`,
			problems: []string{`/storageType: value must be one of "error", "link", "object", "reference", "s3"`}},
		{name: "MissingStorageType", schema: "post-artifact-request", body: `{` + exp + `, "contentType": "a"}`,
			problems: []string{"(root): does not match any of the allowed forms", "(as form 1) missing property 'storageType'"}},
		{name: "NotAnObject", schema: "post-artifact-request", body: `[]`,
			problems: []string{"(root): does not match any of the allowed forms", "got array, want object"}},
	})
}

func TestValidateErrorNamesOnlyTheMatchingArtifactForm(t *testing.T) {
	t.Parallel()
	r := setup(t)
	_, err := r.Validate("post-artifact-request", []byte(`{"storageType": "error", "expires": "2030-01-01T00:00:00Z", "reason": "lost", "message": "m"}`))
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	require.Len(t, verr.Problems, 1, "only the error form's complaint: %v", verr.Problems)
	require.True(t, strings.HasPrefix(verr.Problems[0], "/reason: "), verr.Problems[0])
}

func TestCreateTaskDefaults(t *testing.T) {
	t.Parallel()
	r := setup(t)

	t.Run("FilledFully", func(t *testing.T) {
		t.Parallel()
		out, err := r.Validate("create-task-request", []byte(taskBody(nil)))
		require.NoError(t, err)
		require.JSONEq(t, `{
			"taskQueueId": "proj-x/builder",
			"schedulerId": "-",
			"projectId": "none",
			"dependencies": [],
			"requires": "all-completed",
			"routes": [],
			"priority": "lowest",
			"retries": 5,
			"created": "2024-05-01T12:00:00.000Z",
			"deadline": "2024-05-02T12:00:00.000Z",
			"scopes": [],
			"payload": {"command": ["true"]},
			"metadata": {"name": "build", "description": "builds things", "owner": "someone@example.com", "source": "https://example.com/repo"},
			"tags": {},
			"extra": {}
		}`, string(out))
		require.Contains(t, string(out), `"retries":5,`, "integers stay integers")
		require.NotContains(t, string(out), "expires", "expires is derived by the handler, not the schema")
		require.NotContains(t, string(out), "taskGroupId", "taskGroupId is derived by the handler, not the schema")
	})

	t.Run("ExplicitValuesWin", func(t *testing.T) {
		t.Parallel()
		out, err := r.Validate("create-task-request", []byte(taskBody(func(b map[string]any) {
			b["schedulerId"] = "s"
			b["retries"] = 0
			b["priority"] = "high"
			b["tags"] = map[string]any{"a": "b"}
		})))
		require.NoError(t, err)
		var got map[string]any
		require.NoError(t, json.Unmarshal(out, &got))
		require.Equal(t, "s", got["schedulerId"])
		require.Equal(t, 0.0, got["retries"])
		require.Equal(t, "high", got["priority"])
		require.Equal(t, map[string]any{"a": "b"}, got["tags"])
	})

	t.Run("IntegralRetriesBecomePlainIntegers", func(t *testing.T) {
		t.Parallel()
		for _, spelling := range []string{"3.0", "3e0", "0.3e1", "30e-1"} {
			body := strings.Replace(taskBody(nil), `"payload"`, `"retries":`+spelling+`,"payload"`, 1)
			out, err := r.Validate("create-task-request", []byte(body))
			require.NoError(t, err, spelling)
			var task struct {
				Retries int `json:"retries"`
			}
			require.NoError(t, json.Unmarshal(out, &task), "%s -> %s", spelling, out)
			require.Equal(t, 3, task.Retries)
		}
	})

	t.Run("OpaqueValuesKeptVerbatim", func(t *testing.T) {
		t.Parallel()
		body := strings.Replace(taskBody(nil), `"payload":{"command":["true"]}`,
			`"payload":{"big":123456789012345678901234567890,"f":1.50,"e":1E+2,"html":"<a href=\"x\">&</a>"}`, 1)
		out, err := r.Validate("create-task-request", []byte(body))
		require.NoError(t, err)
		// Byte for byte as sent: only defaults are appended to the body.
		require.Contains(t, string(out), `"payload":{"big":123456789012345678901234567890,"f":1.50,"e":1E+2,"html":"<a href=\"x\">&</a>"}`)
	})

	t.Run("ReEncodedWhenANestedValueChanges", func(t *testing.T) {
		t.Parallel()
		// A nested default (or a canonicalised integer) changes the body
		// below its top level: it is encoded again, opaque values intact.
		body := strings.Replace(taskBody(nil), `"payload":{"command":["true"]}`,
			`"retries":3.0,"payload":{"f":1.50,"html":"<a>"}`, 1)
		out, err := r.Validate("create-task-request", []byte(body))
		require.NoError(t, err)
		require.Contains(t, string(out), `"retries":3,`)
		require.Contains(t, string(out), `"payload":{"f":1.50,"html":"<a>"}`)
	})

}

func TestDefaultsAreNotShared(t *testing.T) {
	t.Parallel()
	// An object default whose members have defaults of their own: filling
	// it writes into the inserted copy, which must not be the compiled
	// schema's value, or every later body (and concurrent ones) would see
	// the writes.
	const draft = `"$schema": "http://json-schema.org/draft-06/schema#"`
	r, err := newRegistry(fstest.MapFS{"a.json": {Data: []byte(`{` + draft + `, "properties": {
		"o": {"type": "object", "default": {}, "properties": {"x": {"type": "integer", "default": 1}}},
		"l": {"type": "array", "default": [{}], "items": {"properties": {"y": {"default": "y"}}}}}}`)}})
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			out, err := r.Validate("a", []byte(`{}`))
			if err == nil && string(out) != `{"l":[{"y":"y"}],"o":{"x":1}}` {
				err = fmt.Errorf("unexpected output %s", out)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	props := r.schemas["a"].Properties
	require.Equal(t, map[string]any{}, *props["o"].Default, "compiled default untouched")
	require.Equal(t, []any{map[string]any{}}, *props["l"].Default, "compiled default untouched")
}

func TestDateTimeFormat(t *testing.T) {
	t.Parallel()
	r := setup(t)
	cases := []struct {
		value string
		valid bool
	}{
		{"2024-05-01T12:34:56.789Z", true},
		{"2024-05-01T12:34:56Z", true},
		{"2024-05-01T12:34:56.123456789Z", true},
		{"2024-05-01T12:34:56+05:30", true},
		{"2024-05-01T12:34:56.5-08:00", true},
		{"2024-02-29T00:00:00Z", true},
		{"2024-05-01T12:34:56", false},
		{"2024-05-01 12:34:56Z", false},
		{"2024-05-01t12:34:56z", false},
		{"2024-05-01T12:34:56,5Z", false},
		{"2024-05-01T12:34:56+0530", false},
		{"2024-05-01", false},
		{"2023-02-29T00:00:00Z", false},
		{"2024-13-01T00:00:00Z", false},
		{"2024-05-01T24:00:00Z", false},
		{"2024-05-01T23:59:60Z", false},
		{"2024-05-01T12:34:56.Z", false},
		{"1714566896", false},
		{"", false},
	}
	for _, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			t.Parallel()
			body, err := json.Marshal(map[string]any{"expires": tc.value})
			require.NoError(t, err)
			_, err = r.Validate("declare-worker-request", body)
			if tc.valid {
				require.NoError(t, err)
				return
			}
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Len(t, verr.Problems, 1)
			require.True(t, strings.HasPrefix(verr.Problems[0], "/expires: "), verr.Problems[0])
			require.Contains(t, verr.Problems[0], "date-time")
		})
	}
}

func TestValidationErrorText(t *testing.T) {
	t.Parallel()
	r := setup(t)
	_, err := r.Validate("create-task-request", []byte(taskBody(func(b map[string]any) {
		b["retries"] = 99
		b["routes"] = []any{""}
		b["bogus"] = true
		delete(b["metadata"].(map[string]any), "source")
	})))
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	require.Equal(t, []string{
		"(root): additional properties 'bogus' not allowed",
		"/metadata: missing property 'source'",
		"/retries: maximum: got 99, want 49",
		"/routes/0: minLength: got 0, want 1",
	}, verr.Problems)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, "request body does not match schema create-task-request:\n"), msg)
	for _, p := range verr.Problems {
		require.Contains(t, msg, "\n  * "+p)
	}
}

func TestPointerEscaping(t *testing.T) {
	t.Parallel()
	r := setup(t)
	_, err := r.Validate("create-task-request", []byte(taskBody(func(b map[string]any) {
		b["tags"] = map[string]any{"a/b~c": 1}
	})))
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	require.Equal(t, []string{"/tags/a~1b~0c: got number, want string"}, verr.Problems)
}
