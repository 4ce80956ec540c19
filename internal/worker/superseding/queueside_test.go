package superseding

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQueueFlowKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		extra string
		key   string
		keyed bool
	}{
		{``, "", false},
		{`{}`, "", false},
		{`[1]`, "", false},
		{`{"flow": {"failFast": true}}`, "", false},
		{`{"flow": {"key": "k", "limit": 2}}`, "k", true},
		{`{"flow": {"supersede": true}}`, "", true},
		{`{"flow": {"key": "k", "cancelInProgress": true}}`, "k", true},
	}
	for _, tt := range tests {
		key, keyed := queueFlowKey(json.RawMessage(tt.extra))
		require.Equal(t, tt.key, key, tt.extra)
		require.Equal(t, tt.keyed, keyed, tt.extra)
	}
}
