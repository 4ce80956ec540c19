package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/ident"
	"github.com/hopper-ci/hopper/internal/schema"
)

// NewGithubCommand is `hopper github`: the forge integration's
// `.taskcluster.yml`, rendered locally.
func NewGithubCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "github",
		Short: "Debug a repository's .taskcluster.yml before pushing it",
		Args:  cobra.NoArgs,
	}
	var o githubRenderOptions
	render := &cobra.Command{
		Use:   "render [-f .taskcluster.yml] (--event TYPE [--action A] [--overrides FILE] | --delivery HOST/ID)",
		Short: "Render a .taskcluster.yml against an event and show the tasks, the role's scopes and any error",
		Long: "Render a .taskcluster.yml as hopper's github service would for an event, and print the tasks it\n" +
			"creates (as createTask bodies), the scopes they are created with (the repository's role) and the\n" +
			"hooks it triggers. The event is either mocked (--event github-push, github-pull-request,\n" +
			"github-pull-request-untrusted, github-release or github-issue-comment, with --action and\n" +
			"--overrides merged into it) or a delivery the server stored (--delivery <host>/<deliveryId>,\n" +
			"which needs the scope github:get-delivery:<host>). Task ids are fresh on every run; nothing is\n" +
			"created.\n\n" + authCLIEnvHelp,
		Example: "  hopper github render --event github-push\n" +
			"  hopper github render --event github-pull-request --action synchronize --overrides pr.json\n" +
			"  hopper github render --delivery github.com/72d3162e-cc78-11e3-81ab-4c9367dc0958",
		Args: cobra.NoArgs,
		RunE: o.run,
	}
	f := render.Flags()
	f.StringVarP(&o.file, "file", "f", ".taskcluster.yml", "the .taskcluster.yml (\"-\" for standard input)")
	f.StringVar(&o.event, "event", "", "mock an event of this tasks_for")
	f.StringVar(&o.action, "action", "", "the mocked event's action (pull requests, releases, comments)")
	f.StringVar(&o.overridesFile, "overrides", "", "YAML or JSON mapping merged into the mocked event")
	f.StringVar(&o.delivery, "delivery", "", "render against a stored delivery: <host>/<deliveryId>")
	f.StringVar(&o.org, "org", "taskcluster", "the mocked event's organization")
	f.StringVar(&o.repo, "repo", "testing", "the mocked event's repository")
	f.StringVar(&o.host, "host", "github.com", "the mocked event's forge host (roles are repo:<host>/…)")
	f.StringVar(&o.now, "now", "", "render as if it were this RFC 3339 time (default: now)")
	cmd.AddCommand(render)
	return cmd
}

// githubRenderOptions are the flags of `hopper github render`.
type githubRenderOptions struct {
	file, event, action, overridesFile, delivery, org, repo, host, now string
}

// run renders the file against the stored delivery or the mocked event.
func (o *githubRenderOptions) run(cmd *cobra.Command, _ []string) error {
	at := time.Now()
	if o.now != "" {
		t, err := time.Parse(time.RFC3339Nano, o.now)
		if err != nil {
			return usagef("--now %q is not an RFC 3339 date-time", o.now)
		}
		at = t
	}
	text, err := readGithubFile(cmd.InOrStdin(), o.file)
	if err != nil {
		return err
	}
	switch {
	case o.delivery != "" && o.event != "":
		return usagef("--event and --delivery exclude each other")
	case o.delivery != "":
		e, reply, err := o.deliveryEvent(cmd.Context())
		if err != nil {
			return err
		}
		if e == nil {
			fmt.Fprintf(cmd.OutOrStdout(), "this delivery starts nothing: %s\n", reply)
			return nil
		}
		return renderGithub(cmd.OutOrStdout(), text, e, "", at)
	case o.event != "":
		e, err := o.mockedEvent(cmd.InOrStdin())
		if err != nil {
			return err
		}
		return renderGithub(cmd.OutOrStdout(), text, e, o.event, at)
	default:
		return usagef("give --event or --delivery")
	}
}

// deliveryEvent loads the stored delivery and classifies it as the
// service does: a nil event, with the service's reply, for a delivery
// that starts nothing.
func (o *githubRenderOptions) deliveryEvent(ctx context.Context) (*github.Event, string, error) {
	h, id, ok := strings.Cut(o.delivery, "/")
	if !ok {
		return nil, "", usagef("--delivery is <host>/<deliveryId>")
	}
	c, err := authCLIClient()
	if err != nil {
		return nil, "", err
	}
	d, err := c.GithubDeliveryEvent(ctx, h, id)
	if err != nil {
		return nil, "", &ExitError{Code: ExitFailed, Msg: oneLine(fmt.Sprintf("loading delivery %s: %v", o.delivery, err))}
	}
	dec, err := github.Classify(github.Delivery{Forge: d.Forge, Host: d.Host, ID: d.DeliveryID, Name: d.Event, Body: d.Body})
	if err != nil {
		return nil, "", &ExitError{Code: ExitFailed, Msg: oneLine(err.Error())}
	}
	return dec.Event, dec.Reply, nil
}

// mockedEvent makes the event of --event, with --action (or the usual one
// for the kind) and --overrides merged into it.
func (o *githubRenderOptions) mockedEvent(stdin io.Reader) (*github.Event, error) {
	overrides := map[string]any{}
	if o.overridesFile != "" {
		doc, err := readJSONEDocument(stdin, o.overridesFile)
		if err != nil {
			return nil, err
		}
		m, ok := doc.(map[string]any)
		if !ok {
			return nil, usagef("%s: the overrides must be a mapping", o.overridesFile)
		}
		overrides = m
	}
	action := o.action
	if action == "" {
		action = map[string]string{github.TasksForPullRequest: "opened", github.TasksForPullRequestUntrusted: "opened",
			github.TasksForRelease: "published", github.TasksForIssueComment: "created"}[o.event]
	}
	e, err := github.FakeEvent(o.event, action, o.org, o.repo, overrides)
	if err != nil {
		return nil, usagef("%v", err)
	}
	e.Host = o.host
	return e, nil
}

func readGithubFile(stdin io.Reader, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("reading %s: %v", path, err)
	}
	return b, nil
}

// renderGithub renders and prints the result, or the error a repository's
// users would be shown.
func renderGithub(out io.Writer, text []byte, e *github.Event, tasksFor string, at time.Time) error {
	reg, err := schema.New()
	if err != nil {
		return err
	}
	cfg, err := github.ParseConfig(reg, text)
	if err != nil {
		return &ExitError{Code: ExitFailed, Msg: "the .taskcluster.yml cannot be used: " + err.Error()}
	}
	ids := map[string]string{}
	r, err := cfg.Render(github.RenderParams{Event: e, TasksFor: tasksFor, RootURL: os.Getenv("TASKCLUSTER_ROOT_URL"), Now: at,
		ID: func(label string) string {
			if _, ok := ids[label]; !ok {
				ids[label] = ident.NewSlugID()
			}
			return ids[label]
		}})
	if err != nil {
		return &ExitError{Code: ExitFailed, Msg: "the .taskcluster.yml does not render: " + err.Error()}
	}
	tasks := make([]any, 0, len(r.Tasks))
	for _, t := range r.Tasks {
		tasks = append(tasks, map[string]any{"taskId": t.TaskID, "task": t.Definition})
	}
	result := map[string]any{"tasks_for": orDefault(tasksFor, e.TasksFor), "tasks": tasks, "scopes": r.Scopes}
	if len(r.Hooks) > 0 {
		result["hooks"] = r.Hooks
	}
	if e.Kind == github.KindPullRequest && e.TasksFor == github.TasksForPullRequest {
		result["policy"] = cfg.PullRequestPolicy()
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(result); err != nil {
		return err
	}
	_, err = out.Write(buf.Bytes())
	return err
}

func orDefault(s, d string) string {
	if s != "" {
		return s
	}
	return d
}
