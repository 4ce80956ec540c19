package workerprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DockerClient is the few Docker Engine API calls the provider makes, over
// a daemon's unix socket or TCP address. The worker's own engine client
// (internal/worker/dockerapi) lives on the other side of the HTTP line, so
// the server keeps this small one of its own.
type DockerClient struct {
	http *http.Client
	base string
}

// dockerAPIVersion is the Engine API version asked for (Docker 20.10+).
const dockerAPIVersion = "v1.41"

// NewDockerClient returns a client of the daemon at endpoint:
// unix:///path/to/docker.sock or tcp://host:port.
func NewDockerClient(endpoint string) (*DockerClient, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %w", endpoint, err)
	}
	tr := &http.Transport{MaxIdleConns: 4, IdleConnTimeout: 30 * time.Second}
	base := "http://docker/" + dockerAPIVersion
	switch u.Scheme {
	case "unix":
		path := u.Path
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
	case "tcp":
		base = "http://" + u.Host + "/" + dockerAPIVersion
	default:
		return nil, fmt.Errorf("docker host %q: unix:// or tcp:// expected", endpoint)
	}
	return &DockerClient{http: &http.Client{Transport: tr, Timeout: 30 * time.Second}, base: base}, nil
}

// DockerError is an error reply of a daemon.
type DockerError struct {
	StatusCode int
	Message    string
}

func (e *DockerError) Error() string { return fmt.Sprintf("docker: %d %s", e.StatusCode, e.Message) }

// IsNotFound says the daemon has no such container.
func IsNotFound(err error) bool {
	var e *DockerError
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

func (c *DockerClient) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotModified {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var msg struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &msg) != nil || msg.Message == "" {
			msg.Message = strings.TrimSpace(string(raw))
		}
		return &DockerError{StatusCode: resp.StatusCode, Message: msg.Message}
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

type containerSpec struct {
	Image      string            `json:"Image"`
	Cmd        []string          `json:"Cmd,omitempty"`
	Env        []string          `json:"Env,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
	HostConfig hostConfig        `json:"HostConfig"`
}

type hostConfig struct {
	NetworkMode string `json:"NetworkMode,omitempty"`
}

// CreateContainer creates a container and returns its id.
func (c *DockerClient) CreateContainer(ctx context.Context, name string, spec containerSpec) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	err := c.call(ctx, http.MethodPost, "/containers/create", url.Values{"name": {name}}, spec, &out)
	return out.ID, err
}

// StartContainer starts a created container.
func (c *DockerClient) StartContainer(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/containers/"+id+"/start", nil, nil, nil)
}

// ContainerState is the State of an inspected container.
type ContainerState struct {
	Status    string `json:"Status"`
	Running   bool   `json:"Running"`
	OOMKilled bool   `json:"OOMKilled"`
	ExitCode  int    `json:"ExitCode"`
	Error     string `json:"Error"`
}

// InspectContainer returns a container's state.
func (c *DockerClient) InspectContainer(ctx context.Context, id string) (*ContainerState, error) {
	var out struct {
		State ContainerState `json:"State"`
	}
	if err := c.call(ctx, http.MethodGet, "/containers/"+id+"/json", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.State, nil
}

// RemoveContainer kills and removes a container.
func (c *DockerClient) RemoveContainer(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/containers/"+id, url.Values{"force": {"true"}}, nil, nil)
}

// KillContainer kills a container (tests: a worker that dies).
func (c *DockerClient) KillContainer(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/containers/"+id+"/kill", nil, nil, nil)
}

// CountLabelled counts the running containers with a label's value.
func (c *DockerClient) CountLabelled(ctx context.Context, key, value string) (int, error) {
	filters, _ := json.Marshal(map[string][]string{"label": {key + "=" + value}, "status": {"created", "running", "restarting"}})
	var out []struct {
		ID string `json:"Id"`
	}
	if err := c.call(ctx, http.MethodGet, "/containers/json", url.Values{"all": {"1"}, "filters": {string(filters)}}, nil, &out); err != nil {
		return 0, err
	}
	return len(out), nil
}

// ContainerIDs lists the containers (running or not) with a label's value.
func (c *DockerClient) ContainerIDs(ctx context.Context, key, value string) ([]string, error) {
	filters, _ := json.Marshal(map[string][]string{"label": {key + "=" + value}})
	var out []struct {
		ID string `json:"Id"`
	}
	if err := c.call(ctx, http.MethodGet, "/containers/json", url.Values{"all": {"1"}, "filters": {string(filters)}}, nil, &out); err != nil {
		return nil, err
	}
	ids := make([]string, len(out))
	for i, o := range out {
		ids[i] = o.ID
	}
	return ids, nil
}
