package workerprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hopper-ci/hopper/internal/dockerapi"
	"github.com/hopper-ci/hopper/internal/workermanager"
)

// DockerConfig is a docker pool's config (schema
// worker-pool-config-docker).
type DockerConfig struct {
	Hosts []struct {
		Endpoint      string `json:"endpoint"`
		MaxContainers int    `json:"maxContainers"`
	} `json:"hosts"`
	Image   string            `json:"image"`
	Command []string          `json:"command"`
	Env     map[string]string `json:"env"`
	// Network is the containers' network mode (default "host": the
	// container reaches hopper at the root URL the host uses).
	Network string `json:"network"`
	// RootURL is hopper's root URL as the containers reach it (default:
	// the server's).
	RootURL string `json:"rootUrl"`
}

// dockerData is a docker worker's ProviderData.
type dockerData struct {
	Host        string `json:"host"`
	ContainerID string `json:"containerId"`
}

// Docker runs each worker as a container on one of the Docker daemons its
// pool names, with the worker's identity and one-time secret in its
// environment and labels naming it, so that each daemon can say how many
// of a pool's containers it runs.
type Docker struct {
	// Dial returns the client of a daemon (default NewDockerClient).
	Dial func(endpoint string) (*dockerapi.Client, error)
}

// Labels put on every worker container.
const (
	labelPool   = "hopper.worker-pool"
	labelWorker = "hopper.worker"
)

// Environment variables a worker container gets.
const (
	EnvRootURL      = "TASKCLUSTER_ROOT_URL"
	EnvWorkerPool   = "HOPPER_WORKER_POOL"
	EnvWorkerGroup  = "HOPPER_WORKER_GROUP"
	EnvWorkerID     = "HOPPER_WORKER_ID"
	EnvStaticSecret = "HOPPER_WORKER_STATIC_SECRET"
)

// ParseDockerConfig reads a docker pool's config.
func ParseDockerConfig(raw json.RawMessage) (*DockerConfig, error) {
	var c DockerConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("reading the docker pool config: %w", err)
	}
	if len(c.Hosts) == 0 || c.Image == "" {
		return nil, errors.New("a docker pool needs hosts and an image")
	}
	if c.Network == "" {
		c.Network = "host"
	}
	return &c, nil
}

func (d *Docker) dial(endpoint string) (*dockerapi.Client, error) {
	if d.Dial != nil {
		return d.Dial(endpoint)
	}
	return NewDockerClient(endpoint)
}

// containerName is unique per worker: the pool's id with its slash
// turned into a dash, and the worker id.
func containerName(w *workermanager.Worker) string {
	return "hopper-" + strings.ReplaceAll(w.WorkerPoolID, "/", "-") + "-" + w.WorkerID
}

// Start implements Provider: the container goes on the first host with
// room (its count of the pool's containers, from the daemon itself, below
// maxContainers).
func (d *Docker) Start(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker, reg Registration) (json.RawMessage, error) {
	cfg, err := ParseDockerConfig(pool.Config)
	if err != nil {
		return nil, err
	}
	rootURL := cfg.RootURL
	if rootURL == "" {
		rootURL = reg.RootURL
	}
	var lastErr error
	for _, h := range cfg.Hosts {
		c, err := d.dial(h.Endpoint)
		if err != nil {
			lastErr = err
			continue
		}
		if h.MaxContainers > 0 {
			running, err := countLive(ctx, c, pool.WorkerPoolID)
			if err != nil {
				lastErr = fmt.Errorf("docker host %s: %w", h.Endpoint, err)
				continue
			}
			if running >= h.MaxContainers {
				continue
			}
		}
		cmd := cfg.Command
		if len(cmd) == 0 {
			cmd = []string{"/hopper", "worker", "--worker-pool", pool.WorkerPoolID, "--provider-id", w.ProviderID}
		}
		env := []string{EnvRootURL + "=" + rootURL, EnvWorkerPool + "=" + w.WorkerPoolID, EnvWorkerGroup + "=" + w.WorkerGroup,
			EnvWorkerID + "=" + w.WorkerID, EnvStaticSecret + "=" + reg.StaticSecret}
		for k, v := range cfg.Env {
			env = append(env, k+"="+v)
		}
		spec := &dockerapi.ContainerConfig{
			Image: cfg.Image, Cmd: cmd, Env: env,
			Labels:     map[string]string{labelPool: pool.WorkerPoolID, labelWorker: w.WorkerGroup + "/" + w.WorkerID},
			HostConfig: dockerapi.HostConfig{NetworkMode: cfg.Network},
		}
		id, err := startWorkerContainer(ctx, c, containerName(w), spec)
		data, _ := json.Marshal(dockerData{Host: h.Endpoint, ContainerID: id})
		if err != nil {
			return data, fmt.Errorf("docker host %s: %w", h.Endpoint, err)
		}
		return data, nil
	}
	if lastErr != nil {
		return nil, lastErr
	}
	return nil, ErrNoRoom
}

// startWorkerContainer creates and starts a worker's container. A start
// the runtime failed ("OCI runtime create failed") is tried once more in a
// new container: on some hosts (Debian's docker.io 20.10 with runc 1.1 on
// recent kernels) a start now and then fails on a root file system runc
// did not see whole while other mount namespaces are being created, and a
// new container then starts. A container that did not start is removed.
func startWorkerContainer(ctx context.Context, c *dockerapi.Client, name string, spec *dockerapi.ContainerConfig) (string, error) {
	var startErr error
	for attempt := 0; attempt < 2; attempt++ {
		id, err := c.CreateContainer(ctx, name, spec)
		if err != nil {
			if startErr != nil {
				return "", fmt.Errorf("starting the container: %w (and creating a new one failed: %v)", startErr, err)
			}
			return "", fmt.Errorf("creating the container: %w", err)
		}
		startErr = c.StartContainer(ctx, id)
		if startErr == nil {
			return id, nil
		}
		_ = c.RemoveContainer(ctx, id)
		if !dockerapi.IsRuntimeStartFailure(startErr) {
			break
		}
	}
	return "", fmt.Errorf("starting the container: %w", startErr)
}

func dataOf(w *workermanager.Worker) (dockerData, error) {
	var d dockerData
	if len(w.ProviderData) == 0 {
		return d, nil
	}
	err := json.Unmarshal(w.ProviderData, &d)
	return d, err
}

// unrecorded finds the container of a worker whose start was not
// recorded (under way, or its provisioner died before recording it): by
// its name, on each host of the pool. It returns the host's client and
// the container's state, or a nil state when no host has it.
func (d *Docker) unrecorded(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker) (*dockerapi.Client, string, *dockerapi.ContainerState, error) {
	cfg, err := ParseDockerConfig(pool.Config)
	if err != nil {
		return nil, "", nil, err
	}
	for _, h := range cfg.Hosts {
		c, err := d.dial(h.Endpoint)
		if err != nil {
			return nil, "", nil, err
		}
		st, err := c.InspectContainer(ctx, containerName(w))
		if dockerapi.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, "", nil, fmt.Errorf("docker host %s: %w", h.Endpoint, err)
		}
		return c, h.Endpoint, st, nil
	}
	return nil, "", nil, nil
}

// Check implements Provider. A worker with no container recorded is
// looked up by its container's name: its start may be under way.
func (d *Docker) Check(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker) (Status, error) {
	data, err := dataOf(w)
	if err != nil || data.ContainerID == "" {
		_, host, st, err := d.unrecorded(ctx, pool, w)
		switch {
		case err != nil:
			return Status{}, err
		case st == nil:
			return Status{NotStarted: true, Detail: "no container was started for the worker"}, nil
		}
		return containerStatus(st, containerName(w), host), nil
	}
	c, err := d.dial(data.Host)
	if err != nil {
		return Status{}, err
	}
	st, err := c.InspectContainer(ctx, data.ContainerID)
	if dockerapi.IsNotFound(err) {
		return Status{Detail: "its container " + short(data.ContainerID) + " is gone from " + data.Host}, nil
	}
	if err != nil {
		return Status{}, fmt.Errorf("docker host %s: %w", data.Host, err)
	}
	return containerStatus(st, short(data.ContainerID), data.Host), nil
}

// containerStatus is what a container's state says of its worker.
func containerStatus(st *dockerapi.ContainerState, container, host string) Status {
	if st.Running {
		return Status{Running: true}
	}
	detail := fmt.Sprintf("its container %s on %s exited with status %d", container, host, st.ExitCode)
	if st.OOMKilled {
		detail += " (killed: out of memory)"
	}
	if st.Error != "" {
		detail += ": " + st.Error
	}
	return Status{Exited: st.Status == "exited" || st.Status == "dead", ExitCode: st.ExitCode, Detail: detail}
}

// Stop implements Provider. A worker with no container recorded is looked
// up by its container's name, so a start its provisioner did not live to
// record leaves nothing behind.
func (d *Docker) Stop(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker) error {
	data, err := dataOf(w)
	if err != nil || data.ContainerID == "" {
		c, host, st, err := d.unrecorded(ctx, pool, w)
		if err != nil || st == nil {
			return err
		}
		if err := c.RemoveContainer(ctx, containerName(w)); err != nil && !dockerapi.IsNotFound(err) {
			return fmt.Errorf("docker host %s: removing container %s: %w", host, containerName(w), err)
		}
		return nil
	}
	c, err := d.dial(data.Host)
	if err != nil {
		return err
	}
	if err := c.RemoveContainer(ctx, data.ContainerID); err != nil && !dockerapi.IsNotFound(err) {
		return fmt.Errorf("docker host %s: removing container %s: %w", data.Host, short(data.ContainerID), err)
	}
	return nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
