package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/oauth2"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// ExitUnavailable means the server or the sign-in provider could not be
// reached (sysexits' EX_UNAVAILABLE).
const ExitUnavailable = 69

// loginTimeout is how long `hopper login` waits for the person: the
// server forgets a sign-in started with the provider after as long.
const loginTimeout = 10 * time.Minute

// loginReply is the server's answer with the person's credentials
// (POST /login/cli/token and /login/<provider>/device/token).
type loginReply struct {
	Identity    string            `json:"identity"`
	Provider    string            `json:"provider"`
	Roles       []string          `json:"roles"`
	Scopes      []string          `json:"scopes"`
	Expires     time.Time         `json:"expires"`
	Credentials map[string]string `json:"credentials"`
	// Status is "pending" or "slow_down" while a device sign-in waits.
	Status string `json:"status"`
}

// loginOptions are `hopper login`'s flags.
type loginOptions struct {
	noBrowser, device, export bool
}

// NewLoginCommand is `hopper login`: sign in as yourself through one of
// the deployment's providers and keep temporary credentials for the other
// commands.
func NewLoginCommand(env *Env) *cobra.Command {
	var o loginOptions
	cmd := &cobra.Command{
		Use:   "login [PROVIDER]",
		Short: "Sign in through the deployment's identity provider and keep temporary credentials",
		Long: `Sign in as yourself through one of the sign-in providers of the deployment
at TASKCLUSTER_ROOT_URL (hopper's /login/providers; name one when there are
several). The browser opens hopper's sign-in page (--no-browser: only print
its address); after you sign in with the provider and allow the command, the
browser hands a one-time code to this command on a loopback port, and the
command trades it (with its PKCE verifier) for temporary credentials.

--device uses the provider's device flow instead, for a machine without a
browser: the command prints an address and a code to enter on any device.

The credentials (an hour at most) are written to $HOPPER_CREDENTIALS, else
$XDG_CONFIG_HOME/hopper/credentials.json, else ~/.config/hopper/credentials.json,
where the other hopper commands read them when TASKCLUSTER_CLIENT_ID and
TASKCLUSTER_ACCESS_TOKEN are not set. --export prints
export TASKCLUSTER_… lines instead, as "taskcluster signin" does:
  eval "$(hopper login --export)"

Exit codes: 0 signed in, 1 sign-in refused or failed (nothing written),
64 bad usage, 69 server or provider unreachable, 130 interrupted.`,
		Args: atMostArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if env.Signals {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			provider := ""
			if len(args) == 1 {
				provider = args[0]
			}
			return runLogin(ctx, env, o, provider)
		},
	}
	cmd.Flags().BoolVar(&o.noBrowser, "no-browser", false, "print the sign-in address instead of opening a browser")
	cmd.Flags().BoolVar(&o.device, "device", false, "sign in with the provider's device flow (a code entered on any device)")
	cmd.Flags().BoolVar(&o.export, "export", false, "print export TASKCLUSTER_… lines instead of writing the credentials file")
	return cmd
}

// loginClient talks to the login service of one deployment.
type loginClient struct {
	root string
	http *http.Client
}

// call sends JSON in and decodes a 2xx answer into out; other answers are
// *tcclient.APIError, and a server that cannot be reached is
// ExitUnavailable.
func (l *loginClient) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, l.root+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &ExitError{Code: ExitUnavailable, Err: err, Msg: fmt.Sprintf("hopper at %s cannot be reached: %s", l.root, describe(err))}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return &ExitError{Code: ExitUnavailable, Err: err, Msg: "reading hopper's answer: " + err.Error()}
	}
	if resp.StatusCode >= 300 {
		apiErr := &tcclient.APIError{StatusCode: resp.StatusCode, Method: method, URL: l.root + path}
		var parsed struct{ Code, Message string }
		if json.Unmarshal(data, &parsed) == nil && parsed.Message != "" {
			apiErr.Code, apiErr.Message = parsed.Code, parsed.Message
		} else {
			apiErr.Message = resp.Status
		}
		return apiErr
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decoding hopper's answer to %s %s: %w", method, path, err)
		}
	}
	return nil
}

// loginFailure turns a refusal into what went wrong and an exit code: the
// server's own words (first line), 69 when hopper or the provider cannot
// be reached.
func loginFailure(doing string, err error) error {
	var exit *ExitError
	if errors.As(err, &exit) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return &ExitError{Code: ExitInterrupted, Err: err, Msg: doing + ": interrupted; nothing was written"}
	}
	code := ExitFailed
	msg := err.Error()
	var apiErr *tcclient.APIError
	if errors.As(err, &apiErr) {
		msg, _ = tcclient.ErrorDigest(apiErr.Message)
		if apiErr.StatusCode == http.StatusServiceUnavailable || apiErr.StatusCode == http.StatusBadGateway {
			code = ExitUnavailable
		}
		if apiErr.StatusCode == http.StatusNotFound && apiErr.Code == "" {
			msg = "this server has no sign-in service (/login/): is it hopper, started with HOPPER_LOGIN_CONFIG?"
		}
	}
	return &ExitError{Code: code, Err: err, Msg: oneLine(doing + ": " + msg + "; nothing was written")}
}

// chooseProvider picks the provider named, or the only one.
func (l *loginClient) chooseProvider(ctx context.Context, name string) (string, error) {
	var list struct {
		Providers []struct {
			Name, DisplayName string
		} `json:"providers"`
	}
	if err := l.call(ctx, http.MethodGet, "/login/providers", nil, &list); err != nil {
		return "", loginFailure("listing the sign-in providers", err)
	}
	var names []string
	for _, p := range list.Providers {
		if p.Name == name {
			return name, nil
		}
		names = append(names, p.Name)
	}
	switch {
	case len(names) == 0:
		return "", &ExitError{Code: ExitFailed, Msg: "the deployment at " + l.root + " has no sign-in providers (its operator configures them, docs/login.md)"}
	case name != "":
		return "", usagef("the deployment has no sign-in provider %q; it has %s", name, strings.Join(names, ", "))
	case len(names) > 1:
		return "", usagef("name the sign-in provider: hopper login <%s>", strings.Join(names, "|"))
	}
	return names[0], nil
}

func runLogin(ctx context.Context, env *Env, o loginOptions, provider string) error {
	root := strings.TrimRight(strings.TrimSpace(env.getenv("TASKCLUSTER_ROOT_URL")), "/")
	u, err := url.Parse(root)
	if root == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("TASKCLUSTER_ROOT_URL must be the deployment's root URL (http(s)://…) to sign in to")
	}
	hc := env.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: time.Minute}
	}
	l := &loginClient{root: root, http: hc}
	provider, err = l.chooseProvider(ctx, provider)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	var reply *loginReply
	if o.device {
		reply, err = loginDevice(ctx, env, l, provider)
	} else {
		reply, err = loginLoopback(ctx, env, l, provider, o.noBrowser)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &ExitError{Code: ExitFailed, Err: err, Msg: fmt.Sprintf("signing in: no sign-in finished within %s; nothing was written", loginTimeout)}
	}
	if err != nil {
		return err
	}
	return keepCredentials(env, o, root, reply)
}

// keepCredentials writes the credentials file, or prints export lines.
func keepCredentials(env *Env, o loginOptions, root string, r *loginReply) error {
	creds := tcclient.Credentials{ClientID: r.Credentials["clientId"], AccessToken: r.Credentials["accessToken"], Certificate: r.Credentials["certificate"]}
	if creds.ClientID == "" || creds.AccessToken == "" {
		return &ExitError{Code: ExitFailed, Msg: "signing in: the server answered no credentials; nothing was written"}
	}
	until := r.Expires.Local().Format("15:04 MST")
	if o.export {
		fmt.Fprintf(env.Stdout, "export TASKCLUSTER_ROOT_URL=%s\nexport TASKCLUSTER_CLIENT_ID=%s\nexport TASKCLUSTER_ACCESS_TOKEN=%s\n",
			shellQuote([]string{root}), shellQuote([]string{creds.ClientID}), shellQuote([]string{creds.AccessToken}))
		if creds.Certificate != "" {
			fmt.Fprintf(env.Stdout, "export TASKCLUSTER_CERTIFICATE=%s\n", shellQuote([]string{creds.Certificate}))
		}
		fmt.Fprintf(env.Stderr, "Signed in as %s until %s.\n", r.Identity, until)
		return nil
	}
	path, err := credentialsPath(env.getenv)
	if err != nil {
		return usagef("signing in: nowhere to keep the credentials (%v): set HOPPER_CREDENTIALS or use --export", err)
	}
	err = writeStoredCredentials(path, storedCredentials{RootURL: root, Identity: r.Identity, ClientID: creds.ClientID,
		AccessToken: creds.AccessToken, Certificate: creds.Certificate, Expires: r.Expires})
	if err != nil {
		return &ExitError{Code: ExitFailed, Err: err, Msg: "signing in: " + err.Error()}
	}
	fmt.Fprintf(env.Stderr, "Signed in as %s until %s; the credentials are in %s.\n", r.Identity, until, path)
	return nil
}

// callbackResult is what the browser brought to the loopback port.
type callbackResult struct {
	code string
	err  error
}

// loginLoopback signs in through the browser (RFC 8252): a listener on a
// random loopback port receives the one-time code, which is traded with
// the PKCE verifier for the credentials.
func loginLoopback(ctx context.Context, env *Env, l *loginClient, provider string, noBrowser bool) (*loginReply, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, &ExitError{Code: ExitFailed, Err: err, Msg: "signing in: cannot listen on a loopback port: " + err.Error()}
	}
	defer ln.Close()
	redirectURI := "http://" + ln.Addr().String() + "/callback"
	state := randomString()
	verifier := oauth2.GenerateVerifier()
	results := make(chan callbackResult, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: loopbackHandler(state, results)}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	to := l.root + "/login/" + url.PathEscape(provider) + "/cli?" + url.Values{"redirect_uri": {redirectURI}, "state": {state},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}}.Encode()
	fmt.Fprintf(env.Stderr, "Sign in with your browser at:\n\n  %s\n\n", to)
	if !noBrowser {
		if err := openBrowser(env, to); err != nil {
			fmt.Fprintf(env.Stderr, "(the browser could not be opened: %v; open the address yourself)\n", err)
		}
	}
	fmt.Fprintln(env.Stderr, "Waiting for the browser…")
	var res callbackResult
	select {
	case res = <-results:
	case <-ctx.Done():
		return nil, loginFailure("signing in", ctx.Err())
	}
	if res.err != nil {
		return nil, res.err
	}
	var reply loginReply
	err = l.call(ctx, http.MethodPost, "/login/cli/token", map[string]string{"code": res.code, "codeVerifier": verifier, "redirectUri": redirectURI}, &reply)
	if err != nil {
		return nil, loginFailure("signing in", err)
	}
	return &reply, nil
}

// loopbackHandler answers the browser's one visit: a code with this
// sign-in's state, or the reason there is none. A visit with another
// state (a page of another site sending the browser here) ends the
// sign-in: nothing it brings is used.
func loopbackHandler(state string, results chan<- callbackResult) http.Handler {
	once := make(chan struct{}, 1)
	once <- struct{}{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		var res callbackResult
		switch {
		case subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1:
			res.err = &ExitError{Code: ExitFailed, Msg: "signing in: the browser came back with another sign-in's state (a forged or stale redirect); nothing was written"}
		case q.Get("error") == "temporarily_unavailable":
			res.err = &ExitError{Code: ExitUnavailable, Msg: oneLine(fmt.Sprintf("signing in: %s; nothing was written", q.Get("error_description")))}
		case q.Get("error") == "access_denied":
			res.err = &ExitError{Code: ExitFailed, Msg: "signing in: you denied the command in the browser; nothing was written"}
		case q.Get("error") != "":
			res.err = &ExitError{Code: ExitFailed, Msg: oneLine(fmt.Sprintf("signing in: refused (%s: %s); nothing was written", q.Get("error"), q.Get("error_description")))}
		case q.Get("code") == "":
			res.err = &ExitError{Code: ExitFailed, Msg: "signing in: the browser came back without a code; nothing was written"}
		default:
			res.code = q.Get("code")
		}
		select {
		case <-once:
		default:
			http.Error(w, "This sign-in has finished already.", http.StatusConflict)
			return
		}
		if res.err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintln(w, strings.TrimPrefix(res.err.Error(), "signing in: "))
		} else {
			fmt.Fprintln(w, "Signed in: the command has its credentials. You can close this window.")
		}
		results <- res
	})
}

// openBrowser opens the address in the person's browser: $BROWSER if
// set, else the system's opener.
func openBrowser(env *Env, to string) error {
	var cmd *exec.Cmd
	switch b := env.getenv("BROWSER"); {
	case b != "":
		cmd = exec.Command(b, to)
	case runtime.GOOS == "darwin":
		cmd = exec.Command("open", to)
	case runtime.GOOS == "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", to)
	default:
		cmd = exec.Command("xdg-open", to)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// randomString is 32 random bytes, base64url.
func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
