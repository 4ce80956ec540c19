package queue_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/queue"
)

func TestParseFlow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		extra   string
		routes  []string
		want    *queue.FlowPolicy
		wantErr string
	}{
		{name: "no extra", extra: ``},
		{name: "no flow", extra: `{"other": {"flow": 1}}`},
		{name: "not an object", extra: `[1]`},
		{name: "limit", extra: `{"flow": {"key": "deploy", "limit": 2}}`, want: &queue.FlowPolicy{Key: "deploy", Limit: 2}},
		{name: "all", extra: `{"flow": {"key": "k", "limit": 1, "supersede": true, "cancelInProgress": true, "failFast": true}}`,
			want: &queue.FlowPolicy{Key: "k", Limit: 1, Supersede: true, CancelInProgress: true, FailFast: true}},
		{name: "key from route", extra: `{"flow": {"supersede": true}}`, routes: []string{"index.x", "coalesce.v1.lint"},
			want: &queue.FlowPolicy{Key: "lint", Supersede: true}},
		{name: "fail-fast alone", extra: `{"flow": {"failFast": true}}`, want: &queue.FlowPolicy{FailFast: true}},
		{name: "no key anywhere", extra: `{"flow": {"limit": 1}}`, wantErr: "no key: set task.extra.flow.key or add a route coalesce.v1.<key>"},
		{name: "two routes", extra: `{"flow": {"limit": 1}}`, routes: []string{"coalesce.v1.a", "coalesce.v1.b"}, wantErr: "2 coalesce.v1. routes (a, b)"},
		{name: "zero limit", extra: `{"flow": {"key": "k", "limit": 0}}`, wantErr: "limit must be between 1 and 10000, got 0"},
		{name: "huge limit", extra: `{"flow": {"key": "k", "limit": 10001}}`, wantErr: "limit must be between 1 and 10000"},
		{name: "unknown field", extra: `{"flow": {"key": "k", "limt": 1}}`, wantErr: `unknown field "limt"`},
		{name: "wrong type", extra: `{"flow": {"key": "k", "supersede": "yes"}}`, wantErr: "task.extra.flow must be an object"},
		{name: "not an object block", extra: `{"flow": true}`, wantErr: "task.extra.flow must be an object"},
		{name: "empty key", extra: `{"flow": {"key": "", "limit": 1}}`, wantErr: "key must not be empty"},
		{name: "long key", extra: `{"flow": {"key": "` + strings.Repeat("k", 201) + `", "limit": 1}}`, wantErr: "201 bytes long; at most 200"},
		{name: "control character", extra: `{"flow": {"key": "a\nb", "limit": 1}}`, wantErr: "control characters"},
		{name: "key without policy", extra: `{"flow": {"key": "k"}}`, wantErr: `key "k" is given without a policy`},
		{name: "empty block", extra: `{"flow": {}}`, wantErr: "declares nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			task := &queue.Task{Extra: json.RawMessage(tt.extra), Routes: tt.routes}
			got, err := queue.ParseFlow(task)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				var qe *queue.Error
				require.ErrorAs(t, err, &qe)
				require.Equal(t, queue.KindInput, qe.Kind)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
