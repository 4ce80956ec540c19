package dockerapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Image is the part of an image inspection hopper uses.
type Image struct {
	ID       string   `json:"Id"`
	RepoTags []string `json:"RepoTags"`
}

// InspectImage returns the image named ref (a name, name:tag or ID); a
// missing image is an error for which IsNotFound is true.
func (c *Client) InspectImage(ctx context.Context, ref string) (*Image, error) {
	var img Image
	if err := c.call(ctx, http.MethodGet, "/images/"+ref+"/json", nil, nil, &img); err != nil {
		return nil, err
	}
	return &img, nil
}

// PullImage pulls ref from its registry (tag "latest" when none is given).
// Failures reported inside the progress stream are returned as errors.
func (c *Client) PullImage(ctx context.Context, ref string) error {
	name, tag := splitTag(ref)
	q := url.Values{"fromImage": {name}}
	if tag != "" {
		q.Set("tag", tag)
	}
	resp, err := c.request(ctx, http.MethodPost, "/images/create", q, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = readProgress(resp.Body)
	return err
}

// splitTag splits "name:tag" (but not the port of "host:5000/name") and
// leaves "name@sha256:…" digests whole.
func splitTag(ref string) (name, tag string) {
	if strings.Contains(ref, "@") {
		return ref, ""
	}
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, ""
	}
	return ref[:i], ref[i+1:]
}

// LoadImage loads an image tarball (the `docker save` format) and returns
// the references the daemon reports ("name:tag" or "sha256:…" IDs).
func (c *Client) LoadImage(ctx context.Context, tarball io.Reader) ([]string, error) {
	resp, err := c.request(ctx, http.MethodPost, "/images/load", url.Values{"quiet": {"1"}}, tarball, "application/x-tar")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	texts, err := readProgress(resp.Body)
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, t := range texts {
		for _, line := range strings.Split(t, "\n") {
			line = strings.TrimSpace(line)
			if ref, ok := strings.CutPrefix(line, "Loaded image ID: "); ok {
				refs = append(refs, ref)
			} else if ref, ok := strings.CutPrefix(line, "Loaded image: "); ok {
				refs = append(refs, ref)
			}
		}
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("docker load reported no image (output %q)", strings.Join(texts, ""))
	}
	return refs, nil
}

// TagImage gives the image ref the additional name repo:tag.
func (c *Client) TagImage(ctx context.Context, ref, repo, tag string) error {
	return c.call(ctx, http.MethodPost, "/images/"+ref+"/tag", url.Values{"repo": {repo}, "tag": {tag}}, nil, nil)
}

// RemoveImage deletes an image (force removes it from stopped containers'
// references too).
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	return c.call(ctx, http.MethodDelete, "/images/"+ref, url.Values{"force": {"1"}}, nil, nil)
}

// ImportImage creates an image from a root file system tarball, like
// `docker import - repo:tag`; tests use it to build images offline.
func (c *Client) ImportImage(ctx context.Context, rootfs io.Reader, repo, tag string) error {
	q := url.Values{"fromSrc": {"-"}, "repo": {repo}, "tag": {tag}}
	resp, err := c.request(ctx, http.MethodPost, "/images/create", q, rootfs, "application/x-tar")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = readProgress(resp.Body)
	return err
}

// SaveImage streams the `docker save` tarball of ref; the caller closes it.
func (c *Client) SaveImage(ctx context.Context, ref string) (io.ReadCloser, error) {
	resp, err := c.request(ctx, http.MethodGet, "/images/"+ref+"/get", nil, nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// NetworkGateway returns the gateway address of a network (for "bridge",
// the host's address on docker0).
func (c *Client) NetworkGateway(ctx context.Context, network string) (string, error) {
	var out struct {
		IPAM struct {
			Config []struct {
				Gateway string `json:"Gateway"`
			} `json:"Config"`
		} `json:"IPAM"`
	}
	if err := c.call(ctx, http.MethodGet, "/networks/"+network, nil, nil, &out); err != nil {
		return "", err
	}
	for _, cfg := range out.IPAM.Config {
		if cfg.Gateway != "" {
			return cfg.Gateway, nil
		}
	}
	return "", fmt.Errorf("network %s has no gateway", network)
}
