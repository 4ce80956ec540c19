// Package cli implements `hopper task`, a command-line client of the queue
// API driven by the TASKCLUSTER_* environment like the official Taskcluster
// tools: create tasks from YAML or JSON files, run a command as a task and
// follow its log, inspect status, logs and artifacts, cancel, rerun, and
// watch a task group until it resolves.
//
// It talks to the queue only through internal/tcclient, so it works against
// hopper and against an upstream Taskcluster deployment alike. The cobra
// tree is built here (NewTaskCommand) so that flag handling and exit codes
// are tested with the logic; cmd/hopper only registers it.
package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// Exit codes of `hopper task` commands. Results mirror the task's
// resolution so scripts can branch on them; usage errors use 64 like BSD's
// sysexits EX_USAGE.
const (
	// ExitOK means success (for run and group: every task completed).
	ExitOK = 0
	// ExitFailed means the task (or a group member) failed, or an
	// operation failed.
	ExitFailed = 1
	// ExitException means the task resolved as exception.
	ExitException = 2
	// ExitUsage means bad command-line input, environment or task file.
	ExitUsage = 64
	// ExitInterrupted means the user interrupted a command that was
	// waiting (128 + SIGINT, as shells report it).
	ExitInterrupted = 130
)

// DefaultTaskQueue is the queue `hopper dev`'s worker serves; run (and
// create, for files naming no queue) use it unless told otherwise.
const DefaultTaskQueue = "hopper/default"

// Env is everything the commands need from the outside world, injected so
// tests can run them in-process.
type Env struct {
	// Stdout receives results (logs, tables, JSON); Stderr progress and
	// notices; Stdin is read by `create -f -`.
	Stdout, Stderr io.Writer
	Stdin          io.Reader
	// TTY tells whether Stdout is a terminal: it enables in-place redraws
	// and colour.
	TTY bool
	// Getenv reads the environment (TASKCLUSTER_*, NO_COLOR, USER);
	// nil means os.Getenv.
	Getenv func(string) string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// HTTPClient performs queue calls and artifact downloads; nil means
	// http.DefaultClient (no overall timeout: logs stream for as long as a
	// task runs).
	HTTPClient *http.Client
	// PollInterval is how often status and task groups are polled
	// (default 1 s).
	PollInterval time.Duration
	// LiveIdle is how long `log` without --follow waits for more output
	// from a running task's live log before it stops (default 500 ms).
	LiveIdle time.Duration
	// RetryDelay overrides the client's back-off base (tests shorten it).
	RetryDelay time.Duration
	// Signals makes SIGINT and SIGTERM cancel a running command (set for
	// the real process; tests cancel through contexts instead).
	Signals bool
}

// StdEnv returns an Env on the process's standard streams, detecting
// whether stdout is a terminal.
func StdEnv() *Env {
	return &Env{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin, TTY: isTerminal(os.Stdout), Signals: true}
}

// isTerminal reports whether f is a character device. golang.org/x/term is
// not a dependency of this module, and for deciding between redraws and
// plain lines the mode bit is enough.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (e *Env) getenv(name string) string {
	if e.Getenv != nil {
		return e.Getenv(name)
	}
	return os.Getenv(name)
}

func (e *Env) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Env) pollInterval() time.Duration {
	if e.PollInterval > 0 {
		return e.PollInterval
	}
	return time.Second
}

func (e *Env) liveIdle() time.Duration {
	if e.LiveIdle > 0 {
		return e.LiveIdle
	}
	return 500 * time.Millisecond
}

func (e *Env) httpClient() *http.Client {
	if e.HTTPClient != nil {
		return e.HTTPClient
	}
	return http.DefaultClient
}

// color tells whether output may carry ANSI colours: only on a terminal,
// and never when NO_COLOR is set (https://no-color.org).
func (e *Env) color() bool {
	return e.TTY && e.getenv("NO_COLOR") == "" && e.getenv("TERM") != "dumb"
}

// Client builds a queue client from TASKCLUSTER_ROOT_URL,
// TASKCLUSTER_CLIENT_ID, TASKCLUSTER_ACCESS_TOKEN and
// TASKCLUSTER_CERTIFICATE. Without a client id it is anonymous, like the
// official clients.
func (e *Env) Client() (*tcclient.Client, error) {
	root := strings.TrimSpace(e.getenv("TASKCLUSTER_ROOT_URL"))
	id, token, cert := e.getenv("TASKCLUSTER_CLIENT_ID"), e.getenv("TASKCLUSTER_ACCESS_TOKEN"), e.getenv("TASKCLUSTER_CERTIFICATE")
	var stored *tcclient.Credentials
	if id == "" && token == "" && cert == "" {
		// No credentials in the environment: those `hopper login` stored.
		var storedRoot string
		var err error
		if stored, storedRoot, err = loadStoredCredentials(e.getenv, root, e.now()); err != nil {
			return nil, err
		}
		if root == "" {
			root = storedRoot
		}
	}
	if root == "" {
		return nil, usagef("TASKCLUSTER_ROOT_URL is not set: point it at the queue's root URL, e.g. http://127.0.0.1:8080")
	}
	u, err := url.Parse(root)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("TASKCLUSTER_ROOT_URL %q is not an http(s) URL", root)
	}
	c := &tcclient.Client{RootURL: strings.TrimRight(root, "/"), HTTPClient: e.HTTPClient, RetryDelay: e.RetryDelay}
	switch {
	case stored != nil:
		c.Credentials = stored
	case id == "" && token == "":
		if cert != "" {
			return nil, usagef("TASKCLUSTER_CERTIFICATE is set without TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN")
		}
	case id == "":
		return nil, usagef("TASKCLUSTER_ACCESS_TOKEN is set but TASKCLUSTER_CLIENT_ID is not")
	case token == "":
		return nil, usagef("TASKCLUSTER_CLIENT_ID is set but TASKCLUSTER_ACCESS_TOKEN is not")
	default:
		c.Credentials = &tcclient.Credentials{ClientID: id, AccessToken: token, Certificate: cert}
		// Fail here, with the variable's name, rather than on the first
		// signed request with a JSON decoding error.
		if _, err := tcclient.HawkExt(c.Credentials, nil); err != nil {
			return nil, usagef("TASKCLUSTER_CERTIFICATE: %v", err)
		}
	}
	return c, nil
}

// ExitError carries the exit code a command wants; cmd/hopper prints its
// message after "hopper: " and exits with Code.
type ExitError struct {
	// Code is the process exit code.
	Code int
	// Msg is the one-line message.
	Msg string
	// Err is the underlying error, if any, for errors.Is/As.
	Err error
}

// Error implements error.
func (e *ExitError) Error() string { return e.Msg }

// Unwrap returns the underlying error.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode returns the process exit code (cmd/hopper looks for this
// method).
func (e *ExitError) ExitCode() int { return e.Code }

// usagef returns an ExitUsage error.
func usagef(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Msg: oneLine(fmt.Sprintf(format, args...))}
}

// withoutCredentials turns the server's refusal of a request sent with no
// credentials into the missing setting (exit 64): a newcomer who did not
// paste the export line is told so, not shown a list of missing scopes.
// Other errors are returned as they are.
func withoutCredentials(err error) error {
	var apiErr *tcclient.APIError
	if err == nil || !errors.As(err, &apiErr) || (apiErr.StatusCode != http.StatusForbidden && apiErr.StatusCode != http.StatusUnauthorized) {
		return err
	}
	doing := "the request"
	var exit *ExitError
	if errors.As(err, &exit) {
		doing, _, _ = strings.Cut(exit.Msg, ": ")
	}
	return &ExitError{Code: ExitUsage, Err: err, Msg: "TASKCLUSTER_CLIENT_ID is not set: " + doing +
		" needs credentials, and the server refused it without them; set TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN (hopper dev prints the export line)"}
}

// failure turns an error from the client into an ExitFailed error: what was
// being done, then the cause in the API's own words, then what to check
// when the cause is one a user can fix (credentials, the root URL); an API
// error's lines that say what to fix (missing scopes, schema violations)
// follow, indented.
func failure(doing string, err error) error {
	var exit *ExitError
	if errors.As(err, &exit) {
		return err
	}
	msg := doing + ": " + describe(err)
	if hint := hintFor(err); hint != "" {
		msg += " (" + hint + ")"
	}
	var apiErr *tcclient.APIError
	if errors.As(err, &apiErr) && !(apiErr.StatusCode == http.StatusFailedDependency && apiErr.Reason != "") {
		// (An error artifact's message is the worker's, told on one line.)
		_, details := tcclient.ErrorDigest(apiErr.Message)
		msg = withDetails(msg, details)
	}
	return &ExitError{Code: ExitFailed, Msg: msg, Err: err}
}

// describe renders err as one line, preferring the API's own words. The
// client wraps errors with what it was doing and the URL it called; the
// caller of failure says what it was doing already, so only the innermost
// cause is kept.
func describe(err error) string {
	var apiErr *tcclient.APIError
	if errors.As(err, &apiErr) {
		if apiErr.StatusCode == http.StatusFailedDependency && apiErr.Reason != "" {
			// An error artifact: the worker recorded why it has no data.
			return fmt.Sprintf("it is an error artifact (%s): %s", apiErr.Reason, firstLine(apiErr.Message))
		}
		code := apiErr.Code
		if code == "" {
			code = http.StatusText(apiErr.StatusCode)
		}
		msg, _ := tcclient.ErrorDigest(apiErr.Message)
		if msg == "" {
			return fmt.Sprintf("%s (HTTP %d)", code, apiErr.StatusCode)
		}
		return fmt.Sprintf("%s (HTTP %d): %s", code, apiErr.StatusCode, msg)
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		var opErr *net.OpError
		switch {
		case errors.Is(urlErr.Err, syscall.ECONNREFUSED):
			return "connection refused"
		case errors.As(urlErr.Err, &opErr):
			return oneLine(opErr.Err.Error())
		}
		return oneLine(urlErr.Err.Error())
	}
	return oneLine(err.Error())
}

// hintFor names what a user should check for the errors they cause
// themselves: wrong credentials or a queue that is not where
// TASKCLUSTER_ROOT_URL says.
func hintFor(err error) string {
	var apiErr *tcclient.APIError
	if errors.As(err, &apiErr) {
		if apiErr.StatusCode != http.StatusUnauthorized {
			return ""
		}
		switch msg := apiErr.Message; {
		case strings.Contains(msg, "Bad mac"):
			return "check TASKCLUSTER_ACCESS_TOKEN: it does not match TASKCLUSTER_CLIENT_ID"
		case strings.Contains(msg, "Stale timestamp"):
			return "check this machine's clock: Hawk allows a minute of skew"
		case strings.Contains(msg, "certificate"):
			return "check TASKCLUSTER_CERTIFICATE: temporary credentials expire"
		case strings.Contains(msg, "client"):
			return "check TASKCLUSTER_CLIENT_ID"
		}
		return "check TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN"
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		root := urlErr.URL
		if u, perr := url.Parse(urlErr.URL); perr == nil && u.Host != "" {
			root = u.Scheme + "://" + u.Host
		}
		var dnsErr *net.DNSError
		switch {
		case errors.Is(urlErr.Err, syscall.ECONNREFUSED):
			return "is hopper running at " + root + "? check TASKCLUSTER_ROOT_URL"
		case errors.As(urlErr.Err, &dnsErr):
			return "check the host name in TASKCLUSTER_ROOT_URL (" + root + ")"
		case urlErr.Timeout():
			return "no answer from " + root + "; check TASKCLUSTER_ROOT_URL"
		}
	}
	return ""
}

// firstLine returns the first non-empty line of s, trimmed.
func firstLine(s string) string {
	for _, ln := range strings.Split(s, "\n") {
		if ln = strings.TrimSpace(ln); ln != "" {
			return ln
		}
	}
	return ""
}

// oneLine folds s onto one line so that every error is a single line on
// the terminal.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// taskPageURL is the link printed for a task: its page in hopper's web UI
// (the UI routes by URL fragment, so the link works for any hopper).
func taskPageURL(c *tcclient.Client, taskID string) string {
	return c.RootURL + "/ui/#/task/" + tcclient.EscapePathParam(taskID)
}
