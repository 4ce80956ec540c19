package interactive

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseControl(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    Control
		wantErr string
	}{
		{in: `{"resize":{"cols":80,"rows":24}}`, want: Control{Resize: &Size{Cols: 80, Rows: 24}}},
		{in: `{"session":"abc","size":{"cols":1,"rows":1000}}`, want: Control{Session: "abc", Size: &Size{Cols: 1, Rows: 1000}}},
		{in: `{"resize":{"cols":0,"rows":24}}`, wantErr: "terminal size 0x24"},
		{in: `{"size":{"cols":80,"rows":1001}}`, wantErr: "terminal size 80x1001"},
		{in: `{"resize":`, wantErr: "decoding a control message"},
	} {
		got, err := ParseControl([]byte(tc.in))
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
		again, err := ParseControl(got.Encode())
		require.NoError(t, err)
		require.Equal(t, got, again)
	}
}

func TestStayAlive(t *testing.T) {
	t.Parallel()
	ended := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		after    time.Duration
		attached int
		want     bool
	}{
		{"within the keep-alive", 59 * time.Second, 0, true},
		{"keep-alive over", time.Minute, 0, false},
		{"keep-alive over, a shell attached", time.Hour, 1, true},
	} {
		require.Equal(t, tc.want, StayAlive(ended, time.Minute, tc.attached, ended.Add(tc.after)), tc.name)
	}
	require.Equal(t, "interactive:open-shell:prov/type", ShellScope("prov/type"))
}
