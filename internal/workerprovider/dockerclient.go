package workerprovider

import (
	"context"
	"slices"
	"time"

	"github.com/hopper-ci/hopper/internal/dockerapi"
)

// dockerCallTimeout bounds each call the provider makes to a daemon: none
// waits for a container, so a daemon that does not answer fails the pass
// instead of holding it.
const dockerCallTimeout = 30 * time.Second

// NewDockerClient returns the client of the daemon at endpoint
// (unix:///path/to/docker.sock or tcp://host:port) as the provider uses
// it: the Engine API client both sides of the HTTP line share
// (internal/dockerapi), each call bounded by dockerCallTimeout.
func NewDockerClient(endpoint string) (*dockerapi.Client, error) {
	c, err := dockerapi.New(endpoint)
	if err != nil {
		return nil, err
	}
	return c.WithTimeout(dockerCallTimeout), nil
}

// liveStates are the states of a container that holds a place on its
// host: made, running or restarting.
var liveStates = []string{"created", "running", "restarting"}

// countLive counts a pool's containers that hold a place on the daemon.
func countLive(ctx context.Context, c *dockerapi.Client, workerPoolID string) (int, error) {
	list, err := c.ListContainers(ctx, labelPool, workerPoolID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range list {
		if slices.Contains(liveStates, s.State) {
			n++
		}
	}
	return n, nil
}
