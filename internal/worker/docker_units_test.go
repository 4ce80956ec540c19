package worker

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/dockerapi"
)

func TestImageCompression(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path, want string
		ok         bool
	}{
		{"public/image.tar", "", true},
		{"public/image.tar.gz", "gz", true},
		{"public/image.tgz", "gz", true},
		{"public/image.tar.zst", "zst", true},
		{"public/image.tar.lz4", "", false},
		{"public/image.zip", "", false},
		{"public/tar", "", false},
	}
	for _, tt := range tests {
		got, ok := imageCompression(tt.path)
		require.Equal(t, tt.ok, ok, tt.path)
		require.Equal(t, tt.want, got, tt.path)
	}
}

func TestPullIsPermanent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"bad reference", &dockerapi.Error{StatusCode: http.StatusBadRequest, Message: "invalid reference format"}, true},
		{"unknown manifest", &dockerapi.Error{StatusCode: http.StatusNotFound, Message: "manifest unknown: manifest unknown"}, true},
		{"private repository", &dockerapi.Error{StatusCode: http.StatusNotFound, Message: "pull access denied for x, repository does not exist or may require 'docker login'"}, true},
		{"registry down", &dockerapi.Error{StatusCode: http.StatusInternalServerError, Message: `Get "https://127.0.0.1:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused`}, false},
		{"dns", &dockerapi.Error{StatusCode: http.StatusOK, Message: "lookup registry.example: no such host"}, false},
		{"socket", errors.New("docker POST /images/create: connection reset"), false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, pullIsPermanent(tt.err), tt.name)
	}
}

func TestImageRefRE(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"busybox", "ubuntu:24.04", "registry.example:5000/team/img:tag", "img@sha256:" + strings.Repeat("a", 64)} {
		require.True(t, imageRefRE.MatchString(ok), ok)
	}
	for _, bad := range []string{"", "busybox?x=1", "a b", "../x", "img#frag", "-flag"} {
		require.False(t, imageRefRE.MatchString(bad), bad)
	}
}

func TestDockerConfig(t *testing.T) {
	t.Parallel()
	base := Config{RootURL: "http://127.0.0.1:1", TaskQueueID: "p/w", WorkerGroup: "g", WorkerID: "i",
		Credentials: CredentialsConfig{ClientID: "c", AccessToken: "t"}, WorkDir: t.TempDir()}
	tests := []struct {
		name string
		edit func(*Config)
		err  string
	}{
		{name: "process by default", edit: func(*Config) {}},
		{name: "docker", edit: func(c *Config) { c.Engine = EngineDocker; c.Docker.Network = "host" }},
		{name: "unknown engine", edit: func(c *Config) { c.Engine = "vm" }, err: `engine "vm" must be process or docker`},
		{name: "unknown network", edit: func(c *Config) { c.Docker.Network = "overlay" }, err: `docker.network "overlay"`},
		{name: "unknown device", edit: func(c *Config) { c.Docker.AllowedDevices = []string{"gpu"} }, err: `unknown device "gpu"`},
		{name: "negative memory", edit: func(c *Config) { c.Docker.MemoryMiB = -1 }, err: "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := base
			tt.edit(&c)
			n, err := c.Normalize()
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Contains(t, []string{EngineProcess, EngineDocker}, n.Engine)
		})
	}
}

// TestDockerEngineNeedsItsDaemon: a docker worker whose daemon does not
// answer stops before claiming anything, naming the socket.
func TestDockerEngineNeedsItsDaemon(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "absent.sock")
	cfg := Config{RootURL: "http://127.0.0.1:1", TaskQueueID: "p/w", WorkerGroup: "g", WorkerID: "i",
		Credentials: CredentialsConfig{ClientID: "c", AccessToken: "t"}, WorkDir: t.TempDir(),
		Engine: EngineDocker, Docker: DockerConfig{Host: "unix://" + sock}}
	w, err := New(cfg, nil)
	require.NoError(t, err)
	code, err := w.Run(context.Background())
	require.Equal(t, 1, code)
	require.ErrorContains(t, err, "the Docker daemon at unix://"+sock+" does not answer")
	_, statErr := os.Stat(sock)
	require.True(t, os.IsNotExist(statErr))
}
