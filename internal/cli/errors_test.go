package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestErrorsSayWhatToCheck runs commands against servers that refuse them
// the ways users meet: the message names the operation once, the cause in
// the server's words, and the setting to check.
func TestErrorsSayWhatToCheck(t *testing.T) {
	t.Parallel()
	refusing := func(status int, code, message string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"code":"` + code + `","message":"` + message + `"}`))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedURL := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())

	taskID := tcclient.NewTaskID()
	tests := []struct {
		name string
		root string
		args []string
		want string
	}{
		{"bad mac", refusing(401, "AuthenticationFailed", "Unauthorized: Bad mac"), []string{"cancel", taskID},
			"cancelling task " + taskID + ": AuthenticationFailed (HTTP 401): Unauthorized: Bad mac (check TASKCLUSTER_ACCESS_TOKEN: it does not match TASKCLUSTER_CLIENT_ID)"},
		{"stale", refusing(401, "AuthenticationFailed", "Stale timestamp"), []string{"status", taskID},
			"getting status of task " + taskID + ": AuthenticationFailed (HTTP 401): Stale timestamp (check this machine's clock: Hawk allows a minute of skew)"},
		{"connection refused", closedURL, []string{"status", taskID},
			"getting status of task " + taskID + ": connection refused (is hopper running at " + closedURL + "? check TASKCLUSTER_ROOT_URL)"},
		{"scopes have no hint", refusing(403, "InsufficientScopes", "You do not have sufficient scopes."), []string{"cancel", taskID},
			"cancelling task " + taskID + ": InsufficientScopes (HTTP 403): You do not have sufficient scopes."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tt.root, &tcclient.Credentials{ClientID: "someone", AccessToken: "wrong"})
			err := h.exec(context.Background(), tt.args...)
			require.Error(t, err)
			require.Equal(t, ExitFailed, exitCode(err))
			require.Equal(t, tt.want, err.Error())
			require.Equal(t, 1, strings.Count(err.Error(), taskID), "the context is said once")
		})
	}
}

// TestClientCommandErrorsSayWhatToCheck: `hopper client` and `hopper role`
// word their failures the same way.
// It sets the environment (the commands read os.Getenv), so it does not
// run in parallel.
func TestClientCommandErrorsSayWhatToCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedURL := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	badMac := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"code":"AuthenticationFailed","message":"Unauthorized: Bad mac"}`))
	}))
	t.Cleanup(badMac.Close)

	for _, tt := range []struct{ root, want string }{
		{closedURL, "listing clients: connection refused (is hopper running at " + closedURL + "? check TASKCLUSTER_ROOT_URL)"},
		{badMac.URL, "listing clients: 401 AuthenticationFailed: Unauthorized: Bad mac (check TASKCLUSTER_ACCESS_TOKEN: it does not match TASKCLUSTER_CLIENT_ID)"},
	} {
		vars := map[string]string{"TASKCLUSTER_ROOT_URL": tt.root, "TASKCLUSTER_CLIENT_ID": "someone", "TASKCLUSTER_ACCESS_TOKEN": "wrong"}
		cmd := NewClientCommand()
		cmd.SetArgs([]string{"list"})
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		for k, v := range vars {
			t.Setenv(k, v)
		}
		err := cmd.Execute()
		require.EqualError(t, err, tt.want)
	}
}

// TestWithoutCredentialsSaysWhichSettingIsMissing: a newcomer who did not
// paste the export line is told the variable is not set (exit 64), not
// shown the server's list of missing scopes; with credentials the refusal
// stays the server's.
func TestWithoutCredentialsSaysWhichSettingIsMissing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"code":"InsufficientScopes","message":"Client ID anonymous does not have sufficient scopes\n\n---\n\n* scope: queue:create-task:lowest:hopper/default"}`))
	}))
	t.Cleanup(srv.Close)
	const want = "TASKCLUSTER_CLIENT_ID is not set: %s needs credentials, and the server refused it without them; " +
		"set TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN (hopper dev prints the export line)"

	h := newHarness(t, srv.URL, nil)
	err := h.exec(context.Background(), "run", "--", "echo", "hi")
	require.Equal(t, ExitUsage, exitCode(err))
	require.Regexp(t, `^TASKCLUSTER_CLIENT_ID is not set: creating task \S+ needs credentials`, err.Error())
	require.NotContains(t, err.Error(), "\n")

	h = newHarness(t, srv.URL, &tcclient.Credentials{ClientID: "someone", AccessToken: "token"})
	err = h.exec(context.Background(), "run", "--", "echo", "hi")
	require.Equal(t, ExitFailed, exitCode(err))
	require.Contains(t, err.Error(), "InsufficientScopes (HTTP 403)")

	t.Setenv("TASKCLUSTER_ROOT_URL", srv.URL)
	t.Setenv("TASKCLUSTER_CLIENT_ID", "")
	t.Setenv("TASKCLUSTER_ACCESS_TOKEN", "")
	cmd := NewRoleCommand()
	cmd.SetArgs([]string{"list"})
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err = cmd.Execute()
	require.EqualError(t, err, fmt.Sprintf(want, "listing roles"))
	require.Equal(t, ExitUsage, exitCode(err))
}
