// Package notify holds the rules of hopper's Notify service: which task
// routes ask for notifications (notify.<channel>.<target>.on-<event>), which
// task transitions produce which notifications, what a target of each
// channel may look like, the default messages and the task's extra.notify
// overrides, and how a failed send is retried. It is plain Go with no I/O:
// the store records what these rules decide, in the transaction of the
// transition, and the sender duty (package maintenance) delivers it.
//
// Taskcluster's notify service is the contract for the email, pulse,
// matrix-room and slack-channel channels; the webhook channel is hopper's
// own (signed HTTP POSTs to endpoints the operator configures).
package notify

import (
	"fmt"
	"net/mail"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/hopper-ci/hopper/internal/queue"
)

// RoutePrefix starts every notification route.
const RoutePrefix = "notify."

// The channels, as named in routes, in the denylist and in the store.
const (
	ChannelEmail   = "email"
	ChannelPulse   = "pulse"
	ChannelMatrix  = "matrix-room"
	ChannelSlack   = "slack-channel"
	ChannelWebhook = "webhook"
)

// Channels lists every channel, in a fixed order.
var Channels = []string{ChannelEmail, ChannelPulse, ChannelMatrix, ChannelSlack, ChannelWebhook}

// channelAliases maps the names a route may use to the channel: the issue's
// short "slack" and "matrix" spellings are accepted beside Taskcluster's.
var channelAliases = map[string]string{
	ChannelEmail: ChannelEmail, ChannelPulse: ChannelPulse, ChannelMatrix: ChannelMatrix, "matrix": ChannelMatrix,
	ChannelSlack: ChannelSlack, "slack": ChannelSlack, ChannelWebhook: ChannelWebhook,
}

// The deciders a route ends with (on-<decider>).
const (
	OnDefined    = "defined"
	OnPending    = "pending"
	OnRunning    = "running"
	OnCompleted  = "completed"
	OnFailed     = "failed"
	OnException  = "exception"
	OnResolved   = "resolved"
	OnTransition = "transition"
	OnAny        = "any" // Taskcluster's older name for on-resolved
)

var deciders = map[string]bool{
	OnDefined: true, OnPending: true, OnRunning: true, OnCompleted: true, OnFailed: true,
	OnException: true, OnResolved: true, OnTransition: true, OnAny: true,
}

// Route is a parsed notification route.
type Route struct {
	Raw     string // the route as the task carries it
	Channel string // one of Channels; "" when the channel is unknown
	Target  string // the address, room, channel, routing key or webhook name
	Decider string // what follows "on-"
}

// ParseRoute parses a route starting with RoutePrefix. ok is false for any
// other route. A route of an unknown channel parses with Channel "" and is
// ignored, as Taskcluster ignores it. err says why a notify route of a known
// channel is malformed: the notification is then recorded as refused with
// that reason, so that the task's author can see it.
func ParseRoute(route string) (r Route, ok bool, err error) {
	if !strings.HasPrefix(route, RoutePrefix) {
		return Route{}, false, nil
	}
	r.Raw = route
	parts := strings.Split(route, ".")
	r.Channel = channelAliases[parts[1]]
	if r.Channel == "" {
		return r, true, nil
	}
	if len(parts) < 4 {
		return r, true, fmt.Errorf("route %q is not notify.<channel>.<target>.on-<event>", route)
	}
	last := parts[len(parts)-1]
	r.Target = strings.Join(parts[2:len(parts)-1], ".")
	d, found := strings.CutPrefix(last, "on-")
	if !found || !deciders[d] {
		return r, true, fmt.Errorf("route %q does not end with one of on-defined, on-pending, on-running, on-completed, on-failed, on-exception, on-resolved, on-transition, on-any", route)
	}
	r.Decider = d
	if err := ValidateTarget(r.Channel, r.Target); err != nil {
		return r, true, fmt.Errorf("route %q: %w", route, err)
	}
	return r, true, nil
}

// eventState is the task state each queue event announces, in the words of
// the route deciders.
var eventState = map[string]string{
	queue.EventTaskDefined:   OnDefined,
	queue.EventTaskPending:   OnPending,
	queue.EventTaskRunning:   OnRunning,
	queue.EventTaskCompleted: OnCompleted,
	queue.EventTaskFailed:    OnFailed,
	queue.EventTaskException: OnException,
}

// Fires reports whether a route with the decider asks for a notification on
// a queue event of the kind: on-transition on every one of the six task
// events, on-resolved and on-any on completed, failed and exception, the
// others on their own.
func Fires(decider, eventKind string) bool {
	state, ok := eventState[eventKind]
	if !ok {
		return false
	}
	switch decider {
	case OnTransition:
		return true
	case OnResolved, OnAny:
		return state == OnCompleted || state == OnFailed || state == OnException
	}
	return decider == state
}

// IgnoredReasons are the reasons of an exception that notify nobody: a
// task cancelled or past its deadline ended by someone's deliberate choice
// (Taskcluster's ignoreTaskReasonResolved default).
var IgnoredReasons = map[string]bool{queue.ReasonCanceled: true, queue.ReasonDeadlineExceeded: true}

// Planned is one notification a transition produces, before it is stored.
type Planned struct {
	Route   Route
	Event   string // the queue event's kind
	RunID   int    // -1 for task-defined
	Refusal string // why it will not be sent ("" when it will be)
}

// HasRoutes reports whether a task definition carries any notify route:
// the whole cost a transition pays for a task without one.
func HasRoutes(def *queue.Task) bool {
	for _, r := range def.Routes {
		if strings.HasPrefix(r, RoutePrefix) {
			return true
		}
	}
	return false
}

// ForEvents returns the notifications the events of one transition of a
// task produce, in event order, then route order. Events whose last run
// was resolved exception for one of IgnoredReasons produce none. Malformed
// routes produce a notification refused with the reason.
func ForEvents(def *queue.Task, events []queue.Event) []Planned {
	if !HasRoutes(def) {
		return nil
	}
	var routes []Route
	var errs []error
	for _, raw := range def.Routes {
		r, ok, err := ParseRoute(raw)
		if !ok || (err == nil && r.Channel == "") {
			continue
		}
		routes = append(routes, r)
		errs = append(errs, err)
	}
	var out []Planned
	for _, ev := range events {
		if ev.Kind == queue.EventTaskException && ev.Status != nil && len(ev.Status.Runs) > 0 &&
			IgnoredReasons[ev.Status.Runs[len(ev.Status.Runs)-1].ReasonResolved] {
			continue
		}
		for i, r := range routes {
			if errs[i] != nil {
				// A malformed route is reported once, on the first event
				// that could have fired it (or the first event, when its
				// decider could not be read).
				if (r.Decider == "" && ev.Kind == events[0].Kind) || (r.Decider != "" && Fires(r.Decider, ev.Kind)) {
					out = append(out, Planned{Route: r, Event: ev.Kind, RunID: ev.RunID, Refusal: errs[i].Error()})
				}
				continue
			}
			if Fires(r.Decider, ev.Kind) {
				out = append(out, Planned{Route: r, Event: ev.Kind, RunID: ev.RunID})
			}
		}
	}
	return out
}

var (
	// A Matrix room ID: "!" opaque ":" server name.
	matrixRoomPattern = regexp.MustCompile(`^![\x21-\x39\x3B-\x7E]+:[A-Za-z0-9.\-\[\]:]+$`)
	// A Slack conversation ID: C (public), G (private) or D (direct).
	slackChannelPattern = regexp.MustCompile(`^[CGD][A-Z0-9]{2,30}$`)
	// A pulse routing key: AMQP words; no wildcards.
	pulseKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$`)
	// A webhook's name in the operator's configuration.
	webhookNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_\-]{0,63}$`)
)

// MaxTargetLength bounds every target.
const MaxTargetLength = 255

// ValidateTarget checks a target of a channel: a bare email address, a
// Matrix room ID (!opaque:server), a Slack conversation ID, a pulse routing
// key without wildcards, or a webhook name.
func ValidateTarget(channel, target string) error {
	if target == "" {
		return fmt.Errorf("no %s target", channel)
	}
	if len(target) > MaxTargetLength || !utf8.ValidString(target) {
		return fmt.Errorf("%s target longer than %d bytes", channel, MaxTargetLength)
	}
	switch channel {
	case ChannelEmail:
		return ValidateEmail(target)
	case ChannelMatrix:
		if !matrixRoomPattern.MatchString(target) {
			return fmt.Errorf("%q is not a Matrix room ID (!opaque:server)", target)
		}
	case ChannelSlack:
		if !slackChannelPattern.MatchString(target) {
			return fmt.Errorf("%q is not a Slack channel ID (C…, G… or D… in capitals)", target)
		}
	case ChannelPulse:
		if !pulseKeyPattern.MatchString(target) {
			return fmt.Errorf("%q is not a routing key (words of letters, digits, _ and - joined by dots)", target)
		}
	case ChannelWebhook:
		if !webhookNamePattern.MatchString(target) {
			return fmt.Errorf("%q is not a webhook name (lower-case letters, digits, _ and -)", target)
		}
	default:
		return fmt.Errorf("unknown channel %q", channel)
	}
	return nil
}

// ValidateEmail accepts a bare address (local@domain, no display name, no
// angle brackets, no spaces or control characters): what an SMTP RCPT TO
// and a To header can carry without quoting tricks.
func ValidateEmail(address string) error {
	for _, c := range address {
		if c <= ' ' || c == 0x7f || c == '<' || c == '>' || c == ',' || c == '"' {
			return fmt.Errorf("%q is not a plain email address", address)
		}
	}
	a, err := mail.ParseAddress(address)
	if err != nil || a.Address != address || a.Name != "" {
		return fmt.Errorf("%q is not a plain email address", address)
	}
	local, domain, _ := strings.Cut(address, "@")
	if local == "" || domain == "" || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.Contains(domain, "..") {
		return fmt.Errorf("%q is not a plain email address", address)
	}
	return nil
}

// DenylistKey is what the denylist compares an address of a channel by.
// An email address is compared with its ASCII letters in lower case, the
// local part included: mail systems treat a domain without case, and the
// ones people use deliver DENY@example.com to deny@example.com, so a
// denylisted address spelled otherwise must still be denied (Taskcluster
// compares the text as given). Other channels' addresses (Slack and
// Matrix ids, routing keys, webhook names) are compared as given.
func DenylistKey(channel, address string) string {
	if channel != ChannelEmail {
		return address
	}
	b := []byte(address)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
