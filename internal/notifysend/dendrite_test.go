package notifysend_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/notify"
	"github.com/hopper-ci/hopper/internal/notifysend"
	"github.com/hopper-ci/hopper/internal/testclock"
)

// dendriteVersion is the Matrix homeserver (written in Go) the test runs.
const dendriteVersion = "v0.13.8"

// dendriteBinaries finds Dendrite's dendrite, generate-keys,
// generate-config and create-account: in $HOPPER_TEST_DENDRITE or the
// user's cache. They are not built by the test: the build takes many
// minutes (some 300 modules).
func dendriteBinaries(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("HOPPER_TEST_DENDRITE")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err == nil {
			dir = filepath.Join(cache, "hopper-test", "dendrite-"+dendriteVersion)
		}
	}
	for _, bin := range []string{"dendrite", "generate-keys", "generate-config", "create-account"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			t.Skipf("no Dendrite to test Matrix against: set HOPPER_TEST_DENDRITE to a directory built with "+
				"GOBIN=DIR go install github.com/matrix-org/dendrite/cmd/{dendrite,generate-keys,generate-config,create-account}@%s (%v)", dendriteVersion, err)
		}
	}
	return dir
}

// startDendrite runs a homeserver on loopback with one account, and returns
// its base URL and the account's access token.
func startDendrite(t *testing.T) (base, token string) {
	t.Helper()
	bin := dendriteBinaries(t)
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", name, out)
		return string(out)
	}
	run("generate-keys", "--private-key", "matrix_key.pem")
	config := run("generate-config", "-dir", dir, "-ci")
	// No open registration: the one account is made with the shared secret.
	config = strings.Replace(config, "registration_disabled: false", "registration_disabled: true", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dendrite.yaml"), []byte(config), 0o600))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	base = "http://127.0.0.1:" + strconv.Itoa(port)
	var logs bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "dendrite"), "-config", "dendrite.yaml",
		"-http-bind-address", "127.0.0.1:"+strconv.Itoa(port), "-https-bind-address", "127.0.0.1:0")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &logs, &logs
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	testclock.WaitFor(t, 2*time.Minute, "dendrite to answer", func() bool {
		select {
		case <-done:
			t.Fatalf("dendrite exited: %s", logs.String())
		default:
		}
		resp, err := http.Get(base + "/_matrix/client/versions")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	out := run("create-account", "--config", "dendrite.yaml", "-username", "hopper", "-password", "hopper-notify-test", "-url", base)
	m := regexp.MustCompile(`AccessToken: ([A-Za-z0-9_\-.]+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "no access token in %q", out)
	return base, m[1]
}

// matrixCall is one client-server API call as the test account.
func matrixCall(t *testing.T, method, u, token string, body any, out any) int {
	t.Helper()
	var rdr *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rdr = bytes.NewReader(b)
	} else {
		rdr = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, u, rdr)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// TestMatrixDendrite sends to a real Matrix homeserver (Dendrite): the
// message arrives in the room with its formatted body, the same
// notification sent again (a sender that died before recording it) is
// posted once, and a room the account is not in fails for good.
func TestMatrixDendrite(t *testing.T) {
	t.Parallel()
	base, token := startDendrite(t)
	api := base + "/_matrix/client/v3"
	var room struct {
		RoomID string `json:"room_id"`
	}
	require.Equal(t, 200, matrixCall(t, http.MethodPost, api+"/createRoom", token, map[string]any{"name": "ci"}, &room))
	d, err := notifysend.New(&notifysend.Config{Matrix: &notifysend.MatrixConfig{BaseURL: base, AccessToken: token}}, notifysend.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	m := &notify.Message{Matrix: &notify.Matrix{RoomID: room.RoomID, Body: "nightly failed: https://hopper.example/ui/#/task/x",
		Format: "org.matrix.custom.html", FormattedBody: `<a href="https://hopper.example/ui/#/task/x">nightly</a> failed`, Msgtype: "m.notice"}}
	require.NoError(t, d.Send(ctx, "01900000-0000-7000-8000-000000000001", "task-failed", m))
	require.NoError(t, d.Send(ctx, "01900000-0000-7000-8000-000000000001", "task-failed", m), "sent again after a lost record")
	require.NoError(t, d.Send(ctx, "01900000-0000-7000-8000-000000000002", "", &notify.Message{Matrix: &notify.Matrix{
		RoomID: room.RoomID, Body: "second", Msgtype: "m.text"}}))

	// Dendrite's room history catches up with accepted events a moment
	// later: read it until the last message sent is in it.
	var bodies []string
	testclock.WaitFor(t, 2*time.Minute, "the last message in the room's history", func() bool {
		var msgs struct {
			Chunk []struct {
				Type    string         `json:"type"`
				Content map[string]any `json:"content"`
			} `json:"chunk"`
		}
		require.Equal(t, 200, matrixCall(t, http.MethodGet, api+"/rooms/"+url.PathEscape(room.RoomID)+"/messages?dir=b&limit=50", token, nil, &msgs))
		bodies = bodies[:0]
		for _, e := range msgs.Chunk {
			if e.Type == "m.room.message" {
				bodies = append(bodies, e.Content["body"].(string))
				if e.Content["body"] == m.Matrix.Body {
					require.Equal(t, "m.notice", e.Content["msgtype"])
					require.Equal(t, m.Matrix.FormattedBody, e.Content["formatted_body"])
					require.Equal(t, "org.matrix.custom.html", e.Content["format"])
				}
			}
		}
		return slices.Contains(bodies, "second")
	})
	require.ElementsMatch(t, []string{m.Matrix.Body, "second"}, bodies, "each notification once")

	err = d.Send(ctx, "01900000-0000-7000-8000-000000000003", "", &notify.Message{Matrix: &notify.Matrix{RoomID: "!nowhere:localhost", Body: "x"}})
	require.True(t, isPermanent(err), "a room the account is not in: %v", err)
}
