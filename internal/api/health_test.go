package api_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
)

func TestServiceHealthRoutes(t *testing.T) {
	t.Parallel()
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	call := &api.Call{Now: started.Add(90 * time.Second)}
	for _, tc := range []struct {
		name, version string
		want          map[string]any
	}{
		{name: "without a version", want: map[string]any{
			"/api/x/v1/ping":            map[string]any{"alive": true, "uptime": 90.0},
			"/api/x/v1/__lbheartbeat__": map[string]any{},
			"/api/x/v1/__heartbeat__":   map[string]any{},
		}},
		{name: "with a version", version: "1.2.3", want: map[string]any{
			"/api/x/v1/ping":            map[string]any{"alive": true, "uptime": 90.0},
			"/api/x/v1/__lbheartbeat__": map[string]any{},
			"/api/x/v1/__heartbeat__":   map[string]any{},
			"/api/x/v1/__version__":     map[string]string{"version": "1.2.3", "commit": "", "source": "https://github.com/hopper-ci/hopper", "build": ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := map[string]any{}
			for _, r := range api.ServiceHealthRoutes("/api/x/v1", started, tc.version) {
				require.Equal(t, "GET", r.Method, r.Name)
				require.Len(t, r.Paths, 1, r.Name)
				body, err := r.Handle(call)
				require.NoError(t, err, r.Name)
				got[r.Paths[0]] = body
			}
			require.Equal(t, tc.want, got)
		})
	}
}
