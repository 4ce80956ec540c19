package dockerapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// ExecConfig is the body of an exec creation (the Engine API's names).
type ExecConfig struct {
	Cmd          []string `json:"Cmd"`
	Env          []string `json:"Env,omitempty"`
	WorkingDir   string   `json:"WorkingDir,omitempty"`
	User         string   `json:"User,omitempty"`
	Tty          bool     `json:"Tty"`
	AttachStdin  bool     `json:"AttachStdin"`
	AttachStdout bool     `json:"AttachStdout"`
	AttachStderr bool     `json:"AttachStderr"`
}

// CreateExec prepares a command in the running container id and returns
// the exec's ID.
func (c *Client) CreateExec(ctx context.Context, id string, cfg *ExecConfig) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	if err := c.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/exec", nil, cfg, &out); err != nil {
		return "", fmt.Errorf("creating an exec in container %s: %w", id, err)
	}
	return out.ID, nil
}

// StartExec starts exec id with a terminal and returns the terminal's
// stream: what is written is typed on it, what is read is its output
// (raw: a terminal's output is not multiplexed). The stream ends when the
// command exits; closing it detaches.
func (c *Client) StartExec(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	body, _ := json.Marshal(map[string]bool{"Detach": false, "Tty": true})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/exec/"+url.PathEscape(id)+"/start", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the start of exec %s: %w", id, err)
	}
	req.Header.Set("Content-Type", "application/json")
	// The daemon hands the connection over to the exec's stream.
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("starting exec %s: %w", id, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, &Error{StatusCode: resp.StatusCode, Message: string(bytes.TrimSpace(data))}
	}
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("starting exec %s: the daemon's stream is not writable", id)
	}
	return rw, nil
}

// ResizeExec sets the size of exec id's terminal.
func (c *Client) ResizeExec(ctx context.Context, id string, rows, cols int) error {
	q := url.Values{"h": {strconv.Itoa(rows)}, "w": {strconv.Itoa(cols)}}
	if err := c.call(ctx, http.MethodPost, "/exec/"+url.PathEscape(id)+"/resize", q, nil, nil); err != nil {
		return fmt.Errorf("resizing exec %s: %w", id, err)
	}
	return nil
}

// ExecState is what InspectExec reports.
type ExecState struct {
	Running  bool `json:"Running"`
	ExitCode int  `json:"ExitCode"`
}

// InspectExec reports whether exec id runs and, once it ended, its exit
// code.
func (c *Client) InspectExec(ctx context.Context, id string) (*ExecState, error) {
	var out ExecState
	if err := c.call(ctx, http.MethodGet, "/exec/"+url.PathEscape(id)+"/json", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("inspecting exec %s: %w", id, err)
	}
	return &out, nil
}

// CommitContainer makes an image of container id's file system as it is
// now (repo:tag) and returns the image's ID.
func (c *Client) CommitContainer(ctx context.Context, id, repo, tag string) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	q := url.Values{"container": {id}, "repo": {repo}, "tag": {tag}, "pause": {"false"}}
	if err := c.call(ctx, http.MethodPost, "/commit", q, struct{}{}, &out); err != nil {
		return "", fmt.Errorf("committing container %s: %w", id, err)
	}
	return out.ID, nil
}
