package ui_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/ui"
)

// cliCallback is the local server `taskcluster signin` runs while the
// browser signs in: it answers the console's redirect, takes clientId and
// accessToken from its query, and says the user may close the window.
type cliCallback struct {
	URL string // http://localhost:<port>, as the command writes it

	mu    sync.Mutex
	calls []url.Values
}

func startCLICallback(t *testing.T) *cliCallback {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cb := &cliCallback{URL: "http://localhost:" + strings.TrimPrefix(l.Addr().String(), "127.0.0.1:")}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/favicon.ico" { // the browser's, after the page
			http.NotFound(w, r)
			return
		}
		cb.mu.Lock()
		cb.calls = append(cb.calls, r.URL.Query())
		cb.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!doctype html><title>Sign-In Successful</title><h1>You have successfully signed in</h1>"))
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return cb
}

// checkCLISignin checks what the console handed to the callback: one
// client, named after the signed-in root, whose token works and which has
// exactly the scopes asked for, a day to live and deleteOnExpiration.
func checkCLISignin(ctx context.Context, t *testing.T, cb *cliCallback, rootURL string) {
	t.Helper()
	cb.mu.Lock()
	calls := cb.calls
	cb.mu.Unlock()
	require.Len(t, calls, 1, "the callback was called once")
	id, token := calls[0].Get("clientId"), calls[0].Get("accessToken")
	require.Equal(t, "taskcluster/root/cli-AbC123", id)
	made := &tcclient.Client{RootURL: rootURL, Credentials: &tcclient.Credentials{ClientID: id, AccessToken: token}}
	scopes, err := made.CurrentScopes(ctx)
	require.NoError(t, err, "the handed-over credentials work")
	require.Contains(t, scopes, "queue:get-task:*")
	cl, err := made.GetClient(ctx, id)
	require.NoError(t, err)
	require.Equal(t, []string{"auth:get-client:taskcluster/root/cli-*", "queue:get-task:*"}, cl.Scopes)
	require.True(t, cl.DeleteOnExpiration)
	require.Equal(t, "Temporary client for use on the command line", cl.Description)
	require.WithinDuration(t, time.Now().Add(24*time.Hour), cl.Expires.Time, 10*time.Minute)
}

// cliSigninURL is the address `taskcluster signin` opens, with its
// parameters in its order and encoding.
func cliSigninURL(rootURL, callback string) string {
	return rootURL + ui.CLISigninPath + "?scope=" + url.QueryEscape("queue:get-task:*") +
		"&scope=" + url.QueryEscape("auth:get-client:taskcluster/root/cli-*") +
		"&name=cli-AbC123&expires=1d&callback_url=" + url.QueryEscape(callback) +
		"&description=" + url.QueryEscape("Temporary client for use on the command line")
}
