package dockerapi

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// ContainerConfig is the body of a container creation (the subset hopper
// sets; field names are the Engine API's).
type ContainerConfig struct {
	Image      string            `json:"Image"`
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Cmd        []string          `json:"Cmd,omitempty"`
	Env        []string          `json:"Env,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	Tty        bool              `json:"Tty"`
	OpenStdin  bool              `json:"OpenStdin"`
	HostConfig HostConfig        `json:"HostConfig"`
}

// HostConfig is the host side of a container's configuration.
type HostConfig struct {
	NetworkMode string          `json:"NetworkMode,omitempty"`
	Binds       []string        `json:"Binds,omitempty"`
	Privileged  bool            `json:"Privileged"`
	CapAdd      []string        `json:"CapAdd,omitempty"`
	Devices     []DeviceMapping `json:"Devices,omitempty"`
	ExtraHosts  []string        `json:"ExtraHosts,omitempty"`
	Memory      int64           `json:"Memory,omitempty"`
	NanoCPUs    int64           `json:"NanoCpus,omitempty"`
	PidsLimit   *int64          `json:"PidsLimit,omitempty"`
	ShmSize     int64           `json:"ShmSize,omitempty"`
	Init        *bool           `json:"Init,omitempty"`
}

// DeviceMapping exposes a host device inside the container.
type DeviceMapping struct {
	PathOnHost        string `json:"PathOnHost"`
	PathInContainer   string `json:"PathInContainer"`
	CgroupPermissions string `json:"CgroupPermissions"`
}

// CreateContainer creates (does not start) a container named name and
// returns its ID.
func (c *Client) CreateContainer(ctx context.Context, name string, cfg *ContainerConfig) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	if err := c.call(ctx, http.MethodPost, "/containers/create", q, cfg, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/containers/"+id+"/start", nil, nil, nil)
}

// WaitContainer blocks until the container is not running and returns its
// exit status.
func (c *Client) WaitContainer(ctx context.Context, id string) (int, error) {
	var out struct {
		StatusCode int `json:"StatusCode"`
		Error      *struct {
			Message string `json:"Message"`
		} `json:"Error"`
	}
	if err := c.call(ctx, http.MethodPost, "/containers/"+id+"/wait", url.Values{"condition": {"not-running"}}, nil, &out); err != nil {
		return -1, err
	}
	if out.Error != nil && out.Error.Message != "" {
		return out.StatusCode, fmt.Errorf("waiting for container: %s", out.Error.Message)
	}
	return out.StatusCode, nil
}

// KillContainer sends SIGKILL; a container that is already stopped is not
// an error.
func (c *Client) KillContainer(ctx context.Context, id string) error {
	err := c.call(ctx, http.MethodPost, "/containers/"+id+"/kill", url.Values{"signal": {"KILL"}}, nil, nil)
	var e *Error
	if errors.As(err, &e) && (e.StatusCode == http.StatusConflict || e.StatusCode == http.StatusNotFound) {
		return nil
	}
	return err
}

// RemoveContainer force-removes a container (killing it if it runs) with
// its anonymous volumes; a container already gone is not an error.
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	err := c.call(ctx, http.MethodDelete, "/containers/"+id, url.Values{"force": {"1"}, "v": {"1"}}, nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}

// ContainerSummary is one entry of a container listing.
type ContainerSummary struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"`
	State  string            `json:"State"`
	Labels map[string]string `json:"Labels"`
}

// ListContainers lists containers (running or not) carrying the label
// key=value.
func (c *Client) ListContainers(ctx context.Context, key, value string) ([]ContainerSummary, error) {
	filters, err := json.Marshal(map[string][]string{"label": {key + "=" + value}})
	if err != nil {
		return nil, fmt.Errorf("encoding container filter: %w", err)
	}
	var out []ContainerSummary
	q := url.Values{"all": {"1"}, "filters": {string(filters)}}
	if err := c.call(ctx, http.MethodGet, "/containers/json", q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ContainerIDs lists the ids of the containers (running or not) carrying
// the label key=value.
func (c *Client) ContainerIDs(ctx context.Context, key, value string) ([]string, error) {
	list, err := c.ListContainers(ctx, key, value)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	return ids, nil
}

// FollowLogs copies the container's stdout and stderr, from its start and
// in the order the daemon received them, into out until the container
// stops or ctx ends. The container must not use a TTY (the stream is then
// multiplexed with 8-byte frame headers, which are removed here).
func (c *Client) FollowLogs(ctx context.Context, id string, out io.Writer) error {
	q := url.Values{"follow": {"1"}, "stdout": {"1"}, "stderr": {"1"}}
	resp, err := c.request(ctx, http.MethodGet, "/containers/"+id+"/logs", q, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return demux(resp.Body, out)
}

// demux strips the frame headers of a multiplexed stream: one byte stream
// type, three zero bytes, a big-endian uint32 payload length.
func demux(r io.Reader, out io.Writer) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading log frame header: %w", err)
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		if _, err := io.CopyN(out, r, n); err != nil {
			return fmt.Errorf("reading log frame of %d bytes: %w", n, err)
		}
	}
}

// PathStat describes a path inside a container.
type PathStat struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	Mode uint32 `json:"mode"`
}

// IsDir reports whether the path is a directory (Go's os.ModeDir bit, as
// the daemon encodes it).
func (s PathStat) IsDir() bool { return s.Mode&(1<<31) != 0 }

// CopyFrom streams a tar archive of path (a file or a directory, named by
// its base name inside the archive) out of a container, running or
// stopped, with its stat. A missing path is an error for which IsNotFound
// is true. The caller closes the stream.
func (c *Client) CopyFrom(ctx context.Context, id, path string) (io.ReadCloser, PathStat, error) {
	var st PathStat
	resp, err := c.request(ctx, http.MethodGet, "/containers/"+id+"/archive", url.Values{"path": {path}}, nil, "")
	if err != nil {
		return nil, st, err
	}
	if raw := resp.Header.Get("X-Docker-Container-Path-Stat"); raw != "" {
		if data, err := decodeBase64(raw); err == nil {
			_ = json.Unmarshal(data, &st)
		}
	}
	return resp.Body, st, nil
}

// ContainerState is the part of a container inspection hopper uses.
type ContainerState struct {
	// Status is the Engine's word for it: created, running, exited, dead, …
	Status    string `json:"Status"`
	Running   bool   `json:"Running"`
	ExitCode  int    `json:"ExitCode"`
	OOMKilled bool   `json:"OOMKilled"`
	// Error is why the runtime could not run it, if it could not.
	Error string `json:"Error"`
}

// InspectContainer returns the container's state.
func (c *Client) InspectContainer(ctx context.Context, id string) (*ContainerState, error) {
	var out struct {
		State ContainerState `json:"State"`
	}
	if err := c.call(ctx, http.MethodGet, "/containers/"+id+"/json", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.State, nil
}

// decodeBase64 decodes the path-stat header, which the daemon writes with
// the standard alphabet (padded or not, depending on the version).
func decodeBase64(s string) ([]byte, error) {
	if data, err := base64.StdEncoding.DecodeString(s); err == nil {
		return data, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}
