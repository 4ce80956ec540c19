package workerprovider_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/workerprovider"
)

// TestDockerConfigSchemaNamesTheEnvironment: the docker pool config's
// schema tells an image's author what a container is given, in the names
// the provider sets. It named TASKCLUSTER_WORKER_STATIC_SECRET where the
// provider sets HOPPER_WORKER_STATIC_SECRET.
func TestDockerConfigSchemaNamesTheEnvironment(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../schema/schemas/worker-pool-config-docker.json")
	require.NoError(t, err)
	var sch struct {
		Properties struct {
			Image struct {
				Description string `json:"description"`
			} `json:"image"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(raw, &sch))
	desc := sch.Properties.Image.Description
	for _, name := range []string{workerprovider.EnvRootURL, workerprovider.EnvWorkerPool, workerprovider.EnvWorkerGroup,
		workerprovider.EnvWorkerID, workerprovider.EnvStaticSecret} {
		require.Contains(t, desc, name, "the image's description names what the provider sets")
	}
	for _, word := range strings.Fields(strings.NewReplacer(",", " ", ".", " ").Replace(desc)) {
		if strings.HasPrefix(word, "TASKCLUSTER_") || strings.HasPrefix(word, "HOPPER_") {
			require.Contains(t, []string{workerprovider.EnvRootURL, workerprovider.EnvWorkerPool, workerprovider.EnvWorkerGroup,
				workerprovider.EnvWorkerID, workerprovider.EnvStaticSecret}, word, "a variable the provider does not set")
		}
	}
}
