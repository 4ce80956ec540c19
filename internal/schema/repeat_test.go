package schema

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValidateRepeated: a remembered body gives what Validate gives, an
// invalid one fails every time, long bodies and unknown schemas are not
// remembered, and the memory is bounded.
func TestValidateRepeated(t *testing.T) {
	r, err := New()
	require.NoError(t, err)
	r.repeatEntries = 4
	const name = "claim-work-request"

	tests := []struct {
		name  string
		body  string
		valid bool
	}{
		{"a poll", `{"workerGroup":"wg","workerId":"w1","tasks":2}`, true},
		{"a default added", `{"workerGroup":"wg","workerId":"w1"}`, true},
		{"invalid", `{"workerGroup":"wg","workerId":"w1","tasks":"two"}`, false},
		{"long", `{"workerGroup":"` + strings.Repeat("g", 20) + `","workerId":"w1"` + strings.Repeat(" ", repeatMaxBody) + `}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, wantErr := r.Validate(name, []byte(tc.body))
			for range 3 {
				got, err := r.ValidateRepeated(name, []byte(tc.body))
				if !tc.valid {
					require.Error(t, err)
					require.Equal(t, wantErr.Error(), err.Error())
					continue
				}
				require.NoError(t, err)
				require.Equal(t, string(want), string(got))
				got[0] = 'X' // the caller's copy: the memory keeps its own
			}
		})
	}
	_, err = r.ValidateRepeated("no-such-schema", []byte(`{}`))
	var unknown *UnknownSchemaError
	require.ErrorAs(t, err, &unknown)

	v, ok := r.repeats.Load(name)
	require.True(t, ok)
	m := v.(*repeats)
	require.Len(t, m.cur, 2, "two valid short bodies remembered; the invalid and the long one not")
	for i := range 20 {
		_, err := r.ValidateRepeated(name, fmt.Appendf(nil, `{"workerGroup":"wg","workerId":"w%d"}`, i))
		require.NoError(t, err)
	}
	require.LessOrEqual(t, len(m.cur)+len(m.prev), 2*r.repeatEntries)
}

// BenchmarkValidateClaimWork is one idle worker's poll body, validated
// each time and remembered: go test ./internal/schema -run '^$' -bench
// ClaimWork -benchmem
func BenchmarkValidateClaimWork(b *testing.B) {
	r, err := New()
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"workerGroup":"us-east-1","workerId":"i-0123456789abcdef0","tasks":1}`)
	b.Run("validated", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Validate("claim-work-request", body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remembered", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.ValidateRepeated("claim-work-request", body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
